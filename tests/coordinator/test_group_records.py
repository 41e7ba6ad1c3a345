"""Kafka's __consumer_offsets key/value formats: bytes packed by hand, and round trips."""

from __future__ import annotations

import struct

from kbroker.coordinator import group_records as gr


def s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_commit_key_and_value_bytes() -> None:
    key = gr.encode_offset_key(gr.OffsetCommitKey("grp", "orders", 7))
    assert key == struct.pack(">h", 1) + s("grp") + s("orders") + struct.pack(">i", 7)
    value = gr.encode_offset_value(gr.OffsetCommitValue(42, 3, "meta", 1_700_000_000_000))
    assert value == struct.pack(">hqi", 3, 42, 3) + s("meta") + struct.pack(">q", 1_700_000_000_000)
    assert gr.decode_key(key) == gr.OffsetCommitKey("grp", "orders", 7)
    assert gr.decode_offset_value(value) == gr.OffsetCommitValue(42, 3, "meta", 1_700_000_000_000)


def test_offset_value_with_expire_timestamp_is_version_1() -> None:
    v = gr.OffsetCommitValue(5, -1, "", 10, 99)
    data = gr.encode_offset_value(v)
    assert data == struct.pack(">hq", 1, 5) + s("") + struct.pack(">qq", 10, 99)
    assert gr.decode_offset_value(data) == v


def test_older_value_versions_decode() -> None:
    v0 = struct.pack(">hq", 0, 9) + s("m") + struct.pack(">q", 77)
    assert gr.decode_offset_value(v0) == gr.OffsetCommitValue(9, -1, "m", 77)
    key0 = struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 1)
    assert gr.decode_key(key0) == gr.OffsetCommitKey("g", "t", 1)


def test_group_metadata_value_v3_bytes_and_round_trip() -> None:
    member = gr.MemberValue("m-1", "inst", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg")
    value = gr.GroupMetadataValue("consumer", 4, "range", "m-1", 123, [member])
    data = gr.encode_group_value(value)
    expected = (struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 4) + s("range") + s("m-1")
                + struct.pack(">qi", 123, 1) + s("m-1") + s("inst") + s("client") + s("/127.0.0.1")
                + struct.pack(">ii", 30000, 10000) + struct.pack(">i", 3) + b"sub"
                + struct.pack(">i", 3) + b"asg")
    assert data == expected
    assert gr.decode_group_value(data) == value
    key = gr.encode_group_key(gr.GroupMetadataKey("grp"))
    assert key == struct.pack(">h", 2) + s("grp")
    assert gr.decode_key(key) == gr.GroupMetadataKey("grp")


def test_empty_group_value_with_null_protocol_and_leader() -> None:
    value = gr.GroupMetadataValue("consumer", 9, None, None, -1, [])
    assert gr.decode_group_value(gr.encode_group_value(value)) == value
