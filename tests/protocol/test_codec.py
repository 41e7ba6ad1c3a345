"""Reader/Writer primitives, truncation, and Writer parts with file slices."""

from __future__ import annotations

import os
import struct
import tempfile
import uuid

import pytest

from kbroker.protocol.codec import SHARE_RECORDS_BYTES, ZERO_UUID, DecodeError, Reader, Writer
from kbroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kbroker.protocol.messages.fetch import FetchResponse
from kbroker.protocol.messages.metadata import MetadataResponse
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.records.file_slice import FileSlice, SegmentFile


def encode(method: str, *args: object) -> bytes:
    w = Writer()
    getattr(w, method)(*args)
    return w.to_bytes()


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known_values(value: int, wire: bytes) -> None:
    assert encode("uvarint", value) == wire
    r = Reader(wire)
    assert r.uvarint() == value
    assert r.remaining() == 0


@pytest.mark.parametrize(
    ("method", "wire"),
    [
        ("uvarint", b"\x80\x80\x80\x80\x80\x01"),  # 6 bytes
        ("uvarint", b"\xff\xff\xff\xff\x1f"),  # 5 bytes but > 32 bits
        ("uvarint", b"\x80"),  # truncated
        ("uvarint", b""),
    ],
)
def test_bad_varints(method: str, wire: bytes) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(wire), method)()


def test_fixed_width_primitives() -> None:
    w = Writer()
    w.int8(-2)
    w.int16(-3)
    w.int32(-4)
    w.int64(-5)
    w.uint16(65535)
    w.uint32(2**32 - 1)
    w.float64(1.5)
    w.boolean(True)
    w.boolean(False)
    w.uuid(uuid.UUID(int=1))
    data = w.to_bytes()
    assert data == struct.pack(">bhiqHId??", -2, -3, -4, -5, 65535, 2**32 - 1, 1.5, True, False) + (
        b"\x00" * 15 + b"\x01"
    )
    r = Reader(data)
    got = [r.int8(), r.int16(), r.int32(), r.int64(), r.uint16(), r.uint32(), r.float64()]
    assert got == [-2, -3, -4, -5, 65535, 2**32 - 1, 1.5]
    assert r.boolean() is True and r.boolean() is False
    assert r.uuid() == uuid.UUID(int=1)
    assert r.remaining() == 0
    with pytest.raises(DecodeError):
        r.int8()


def test_strings_and_bytes() -> None:
    assert encode("string", "héllo") == b"\x00\x06h\xc3\xa9llo"
    assert encode("nullable_string", None) == b"\xff\xff"
    assert encode("compact_string", "") == b"\x01"
    assert encode("compact_nullable_string", None) == b"\x00"
    assert encode("bytes", b"ab") == b"\x00\x00\x00\x02ab"
    assert encode("nullable_bytes", None) == b"\xff\xff\xff\xff"
    assert encode("compact_bytes", b"ab") == b"\x03ab"
    assert encode("compact_nullable_bytes", None) == b"\x00"
    assert Reader(b"\x00\x06h\xc3\xa9llo").string() == "héllo"
    assert Reader(b"\xff\xff").nullable_string() is None
    assert Reader(b"\x00").compact_nullable_string() is None
    assert Reader(b"\x03ab").compact_bytes() == b"ab"
    assert Reader(b"\xff\xff\xff\xff").nullable_bytes() is None


@pytest.mark.parametrize(
    ("method", "wire"),
    [
        ("string", b"\xff\xff"),  # null in a non-nullable string
        ("nullable_string", b"\xff\xfe"),  # -2
        ("string", b"\x00\x02\xff\xfe"),  # bad UTF-8
        ("compact_string", b"\x00"),
        ("compact_string", b"\x03\xc3"),  # truncated
        ("bytes", b"\xff\xff\xff\xfe"),
        ("nullable_bytes", b"\x80\x00\x00\x00"),
        ("records", b"\xff\xff\xff\xf0"),
        ("array_length", b"\xff\xff\xff\xfe"),
        ("array_length", b"\x00\x00\x10\x00"),  # more elements than bytes left
        ("array_count", b"\xff\xff\xff\xff"),
        ("compact_array_count", b"\x00"),
        ("uuid", b"\x00" * 15),
        ("int64", b"\x00" * 7),
    ],
)
def test_invalid_input_raises_decode_error(method: str, wire: bytes) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(wire), method)()


def test_records_is_zero_copy() -> None:
    data = bytearray(b"\x00\x00\x00\x03abcxyz")
    r = Reader(data)
    view = r.records()
    assert isinstance(view, memoryview) and view == b"abc"
    data[4] = ord("A")
    assert view == b"Abc"
    assert Reader(b"\xff\xff\xff\xff").records() is None
    assert Reader(b"\x00").compact_records() is None


def test_tagged_fields_skip_unknown() -> None:
    # two tagged fields: tag 5 (3 bytes), tag 9 (0 bytes), then an int8
    r = Reader(b"\x02\x05\x03abc\x09\x00\x07")
    r.skip_tagged_fields()
    assert r.int8() == 7
    with pytest.raises(DecodeError):
        Reader(b"\x01\x05\x09abc").skip_tagged_fields()


def _apiversions_v3() -> bytes:
    w = Writer()
    ApiVersionsRequest(client_software_name="kbroker", client_software_version="0.1").encode(w, 3)
    return w.to_bytes()


def _metadata_v12() -> bytes:
    t = MetadataResponse.MetadataResponseTopic(
        name="t",
        topic_id=uuid.UUID(int=7),
        partitions=[MetadataResponse.MetadataResponsePartition(replica_nodes=[1], isr_nodes=[1])],
    )
    resp = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id="c",
        topics=[t],
    )
    w = Writer()
    resp.encode(w, 12)
    return w.to_bytes()


def _produce_v9() -> bytes:
    req = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"x" * 70)],
            )
        ],
    )
    w = Writer()
    req.encode(w, 9)
    return w.to_bytes()


@pytest.mark.parametrize(
    ("cls", "version", "make"),
    [
        (ApiVersionsRequest, 3, _apiversions_v3),
        (MetadataResponse, 12, _metadata_v12),
        (ProduceRequest, 9, _produce_v9),
        (ProduceRequest, 3, lambda: _reencode(ProduceRequest, 9, 3, _produce_v9())),
    ],
)
def test_truncation_at_every_cut_point(cls: type, version: int, make: object) -> None:
    data = make()  # type: ignore[operator]
    r = Reader(data)
    cls.decode(r, version)  # type: ignore[attr-defined]
    assert r.remaining() == 0
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(Reader(data[:cut]), version)  # type: ignore[attr-defined]


def _reencode(cls: type, src: int, dst: int, data: bytes) -> bytes:
    msg = cls.decode(Reader(data), src)  # type: ignore[attr-defined]
    w = Writer()
    msg.encode(w, dst)
    return w.to_bytes()


def test_writer_parts_with_file_slice() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"0123456789")
        f.flush()
        sl = FileSlice(SegmentFile(os.dup(f.fileno())), 2, 5)
        resp = FetchResponse(
            responses=[
                FetchResponse.FetchableTopicResponse(
                    topic="t",
                    partitions=[
                        FetchResponse.PartitionData(partition_index=0, records=sl),
                        FetchResponse.PartitionData(partition_index=1, records=b"abc"),
                    ],
                )
            ]
        )
        for version in (4, 12):
            w = Writer()
            resp.encode(w, version)
            parts = w.parts()
            assert sl in parts
            assert sum(len(p) for p in parts) == len(w)
            with pytest.raises(ValueError):
                w.to_bytes()
            flat = b"".join(
                p if isinstance(p, bytes) else os.pread(p.fd, p.size, p.position) for p in parts
            )
            decoded = FetchResponse.decode(Reader(flat), version)
            got = decoded.responses[0].partitions
            assert bytes(got[0].records) == b"23456"
            assert bytes(got[1].records) == b"abc"


@pytest.mark.parametrize("version", [3, 9])  # records, then compact_records
def test_large_records_are_a_part_of_their_own(version: int) -> None:
    """Records of SHARE_RECORDS_BYTES or more in a bytes object are not copied: the caller's
    own object is one of the parts; smaller ones, and mutable buffers, are copied."""
    big, small = bytes(range(256)) * (SHARE_RECORDS_BYTES // 256), b"x" * 100
    mutable = bytearray(big)
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=r)
            for i, r in enumerate([big, small, mutable, big])])])
    w = Writer()
    request.encode(w, version)
    parts = w.parts()
    assert [p is big for p in parts].count(True) == 2
    assert not any(p is mutable for p in parts)
    assert sum(len(p) for p in parts) == len(w)
    flat = w.to_bytes()
    assert flat == b"".join(parts)
    decoded = ProduceRequest.decode(Reader(flat), version).topic_data[0].partition_data
    assert [bytes(d.records) for d in decoded] == [big, small, big, big]


def test_writer_without_slices() -> None:
    w = Writer()
    w.int32(1)
    w.records(None)
    assert w.parts() == [b"\x00\x00\x00\x01\xff\xff\xff\xff"]
    assert len(w) == 8
    assert ZERO_UUID.int == 0


def test_decode_rejects_unknown_version() -> None:
    with pytest.raises(DecodeError):
        ProduceRequest.decode(Reader(b""), 12)
    with pytest.raises(ValueError):
        ProduceRequest().encode(Writer(), 99)


def test_contract_example() -> None:
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)]
    )
    w = Writer()
    resp.encode(w, 3)
    assert w.to_bytes() == bytes.fromhex("000002001200000003000000000000")
