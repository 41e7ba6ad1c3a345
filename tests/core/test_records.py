"""The record core (kbroker._core.records, batch_validation, segment_scan, segment_seek):
validation, offset assignment, LogAppendTime, segment scans and seeks."""

from __future__ import annotations

import os
import struct
import tempfile

import crc32c
import pytest
from batches import Rec, decode_batches, make_batch, values_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kbroker._core import batch_validation as V
from kbroker._core import records as R
from kbroker._core import segment_scan as S
from kbroker._core import segment_seek as K
from kbroker.common.error_code import ErrorCode
from kbroker.records.batch_header import BatchHeader
from kbroker.records.record_iter import iter_records
from tests.sanitized import examples


def kafka_python_batch(n: int, codec: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    for i in range(n):
        b.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"x")])
    return bytes(b.build())


def test_compiled_core_is_loaded() -> None:
    assert R.__file__.endswith(".so")


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_validate_own_batches(codec: int) -> None:
    data = values_batch(7, codec=codec) + values_batch(3, codec=codec)
    info = V.validate_batches(data)
    assert (info.batch_count, info.record_count, info.offset_count) == (2, 10, 10)
    assert info.codecs == 1 << codec
    assert info.valid_bytes == len(data)
    assert info.compressed == (codec != 0)


@pytest.mark.parametrize("codec", [0, 1, 3, 4])  # kafka-python has no snappy library here
def test_validate_kafka_python_batches(codec: int) -> None:
    data = kafka_python_batch(5, codec)
    info = V.validate_batches(data)
    assert info.record_count == 5
    assert info.max_timestamp == 1_700_000_000_004
    assert [r.value for r in iter_records(data)] == [b"value-%d" % i for i in range(5)]


def test_own_batch_matches_kafka_python_bytes() -> None:
    ours = make_batch([Rec(b"value-%d" % i, key=b"k%d" % i, timestamp_delta=i, headers=[("h", b"x")])
                       for i in range(5)])
    assert ours == kafka_python_batch(5)


def test_offset_of_max_timestamp_is_exact_for_uncompressed() -> None:
    data = make_batch([Rec(b"a", timestamp_delta=0), Rec(b"b", timestamp_delta=50),
                       Rec(b"c", timestamp_delta=10)])
    info = V.validate_batches(data)
    assert info.max_timestamp == 1_700_000_000_050
    assert info.offset_of_max_timestamp == 1


def test_empty_payload() -> None:
    info = V.validate_batches(b"")
    assert info.batch_count == 0 and info.valid_bytes == 0


def corrupt(data: bytes, pos: int, value: int | None = None) -> bytes:
    b = bytearray(data)
    b[pos] = (b[pos] ^ 0xFF) if value is None else value
    return bytes(b)


def error_of(data: bytes, **kw: int) -> ErrorCode:
    with pytest.raises(R.RecordValidationError) as exc:
        V.validate_batches(data, **kw)
    return exc.value.error_code


def test_crc_mismatch_is_corrupt_message() -> None:
    data = values_batch(3)
    assert error_of(corrupt(data, 70)) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(corrupt(data, 18)) == ErrorCode.CORRUPT_MESSAGE


def test_old_magic_is_unsupported_and_unknown_magic_corrupt() -> None:
    data = values_batch(3)
    assert error_of(corrupt(data, 16, 1)) == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert error_of(corrupt(data, 16, 0)) == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert error_of(corrupt(data, 16, 3)) == ErrorCode.CORRUPT_MESSAGE


def test_truncated_and_bad_length() -> None:
    data = values_batch(3)
    assert error_of(data[:-1]) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(data[:40]) == ErrorCode.CORRUPT_MESSAGE
    short = bytearray(data)
    struct.pack_into(">i", short, 8, 20)
    assert error_of(bytes(short)) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(data + data[:30]) == ErrorCode.CORRUPT_MESSAGE


def rebuild_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_count_vs_last_offset_delta_is_invalid_record() -> None:
    data = bytearray(values_batch(3))
    struct.pack_into(">i", data, 57, 4)
    assert error_of(rebuild_crc(data)) == ErrorCode.INVALID_RECORD
    data = bytearray(values_batch(3))
    struct.pack_into(">i", data, 23, 5)
    assert error_of(rebuild_crc(data)) == ErrorCode.INVALID_RECORD


def test_records_must_fill_the_batch() -> None:
    data = bytearray(values_batch(3))
    data += b"\x00"  # one stray byte inside the batch
    struct.pack_into(">i", data, 8, len(data) - 12)
    assert error_of(rebuild_crc(data)) == ErrorCode.CORRUPT_MESSAGE


def test_non_consecutive_offset_deltas_are_invalid() -> None:
    b0 = make_batch([Rec(b"a"), Rec(b"b")])
    data = bytearray(b0)
    # second record's offsetDelta varint: record = len, attrs, tsDelta(0), offsetDelta(1)
    second = 61 + 1 + data[61] // 2
    assert data[second + 3] == 2  # zigzag(1)
    data[second + 3] = 4  # zigzag(2)
    assert error_of(rebuild_crc(data)) == ErrorCode.INVALID_RECORD


def test_message_too_large() -> None:
    data = values_batch(10, size=100)
    assert error_of(data, max_message_bytes=len(data) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    V.validate_batches(data, max_message_bytes=len(data))


def test_unknown_codec_and_control_from_client() -> None:
    data = bytearray(values_batch(2))
    struct.pack_into(">h", data, 21, 5)
    assert error_of(rebuild_crc(data)) == ErrorCode.CORRUPT_MESSAGE
    control = make_batch([Rec(b"x")], attributes=0x20)
    assert error_of(control) == ErrorCode.INVALID_RECORD
    assert V.validate_batches(control, from_client=False).has_control


def test_timestamp_bounds() -> None:
    now = 1_700_000_000_000
    data = values_batch(2, base_timestamp=now - 10_000)
    kw = dict(now_ms=now, check_timestamps=True)
    V.validate_batches(data, **kw)
    with pytest.raises(R.RecordValidationError) as exc:
        V.validate_batches(data, timestamp_before_max_ms=5_000, **kw)
    assert exc.value.error_code == ErrorCode.INVALID_TIMESTAMP
    future = values_batch(2, base_timestamp=now + 10_000)
    with pytest.raises(R.RecordValidationError):
        V.validate_batches(future, timestamp_after_max_ms=5_000, **kw)
    V.validate_batches(values_batch(1, base_timestamp=-1), timestamp_before_max_ms=1, **kw)


def test_assign_offsets_patches_outside_crc() -> None:
    data = bytearray(values_batch(3) + values_batch(4, codec=4) + kafka_python_batch(2))
    last = V.assign_offsets(data, 1000, 7)
    assert last == 1008
    info = V.validate_batches(data)  # CRCs still valid
    assert info.record_count == 9
    batches = decode_batches(bytes(data))
    assert [(b[0], b[1]) for b in batches] == [(1000, 7), (1003, 7), (1007, 7)]
    assert [r[0] for b in batches for r in b[2]] == list(range(1000, 1009))


def test_log_append_time_rewrites_max_timestamp_and_crc() -> None:
    data = bytearray(values_batch(3, codec=1))
    V.assign_offsets(data, 0, 0, log_append_time=42)
    h = BatchHeader.parse(data)
    assert h.is_log_append_time and h.max_timestamp == 42
    V.validate_batches(data)
    assert [r.timestamp for r in iter_records(bytes(data))] == [42, 42, 42]


@settings(max_examples=examples(200), deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.lists(st.binary(max_size=40), min_size=1, max_size=8),
            st.sampled_from([0, 1, 2, 3, 4]),
            st.integers(min_value=-1000, max_value=1000),
        ),
        min_size=1, max_size=5,
    ),
    base=st.integers(min_value=0, max_value=2**40),
)
def test_property_roundtrip(batches: list[tuple[list[bytes], int, int]], base: int) -> None:
    data = bytearray(b"".join(
        make_batch([Rec(v, timestamp_delta=i * d) for i, v in enumerate(vals)], codec=codec)
        for vals, codec, d in batches))
    info = V.validate_batches(data)
    total = sum(len(v) for v, _, _ in batches)
    assert info.record_count == total
    assert V.assign_offsets(data, base, 3) == base + total - 1
    got = list(iter_records(bytes(data)))
    assert [r.offset for r in got] == list(range(base, base + total))
    assert [r.value for r in got] == [v for vals, _, _ in batches for v in vals]


@settings(max_examples=examples(200), deadline=None)
@given(data=st.binary(max_size=300))
def test_property_garbage_never_crashes(data: bytes) -> None:
    try:
        V.validate_batches(data)
    except R.RecordValidationError as e:
        assert isinstance(e.error_code, ErrorCode)
    S.scan_segment(data, 0)


def segment_bytes(n_batches: int, records_per_batch: int = 5) -> bytes:
    out = bytearray()
    offset = 0
    for i in range(n_batches):
        out += make_batch([Rec(b"x" * 50, timestamp_delta=i)] * records_per_batch, base_offset=offset,
                          partition_leader_epoch=i // 10)
        offset += records_per_batch
    return bytes(out)


def test_scan_segment_builds_index_entries() -> None:
    data = segment_bytes(40)
    size = len(data) // 40
    scan = S.scan_segment(data, 0, index_interval_bytes=4 * size)
    assert scan.valid_bytes == len(data) and scan.error is None
    assert scan.next_offset == 200 and scan.batch_count == 40
    entries = [struct.unpack_from(">ii", scan.offset_index_entries, i)
               for i in range(0, len(scan.offset_index_entries), 8)]
    assert entries and all(pos % size == 0 for _, pos in entries)
    assert all(rel == pos // size * 5 + 4 for rel, pos in entries)
    assert scan.epoch_starts == [(0, 0), (1, 50), (2, 100), (3, 150)]
    assert len(scan.time_index_entries) // 12 == len(entries)


def test_scan_segment_stops_at_torn_tail_and_corruption() -> None:
    data = segment_bytes(10)
    size = len(data) // 10
    torn = S.scan_segment(data[:-7], 0)
    assert torn.valid_bytes == 9 * size and torn.next_offset == 45 and torn.error
    flipped = corrupt(data, 5 * size + 30)
    bad = S.scan_segment(flipped, 0)
    assert bad.valid_bytes == 5 * size and bad.next_offset == 25
    # an out-of-order base offset (outside the CRC) is caught by the offset checks
    moved = bytearray(data)
    struct.pack_into(">q", moved, 3 * size, 2)
    assert S.scan_segment(bytes(moved), 0).valid_bytes == 3 * size
    gap = bytearray(data)
    struct.pack_into(">q", gap, 3 * size, 99)
    assert S.scan_segment(bytes(gap), 0, require_contiguous=True).valid_bytes == 3 * size


def reference_scan(data: bytes, base_offset: int, interval: int, start: int = 0,
                   next_offset: int = -1, last_ts_entry: int = -1, max_ts: int = -1,
                   off_max: int = -1, epoch: int = -1) -> dict[str, object]:
    """Kafka's LogSegment.recover in Python, over batches known to be valid."""
    pos = last_entry = start
    oidx, tidx, epochs = bytearray(), bytearray(), []
    while pos < len(data):
        h = R.read_batch_header(data, pos)
        base, length, ple, last_delta, batch_max_ts = h[0], h[1], h[2], h[6], h[8]
        last = base + last_delta
        if batch_max_ts > max_ts:
            max_ts, off_max = batch_max_ts, last
        if pos - last_entry > interval:
            oidx += struct.pack(">ii", last - base_offset, pos)
            if max_ts > last_ts_entry:
                tidx += struct.pack(">qi", max_ts, off_max - base_offset)
                last_ts_entry = max_ts
            last_entry = pos
        if ple > epoch:
            epoch = ple
            epochs.append((ple, base))
        next_offset = last + 1
        pos += length + 12
    return {"valid_bytes": pos, "next_offset": next_offset, "max_timestamp": max_ts,
            "offset_of_max_timestamp": off_max, "bytes_since_last_index_entry": pos - last_entry,
            "offset_index_entries": bytes(oidx), "time_index_entries": bytes(tidx),
            "epoch_starts": epochs}


def scan_fields(scan: S.SegmentScan) -> dict[str, object]:
    return {name: getattr(scan, name) for name in (
        "valid_bytes", "next_offset", "max_timestamp", "offset_of_max_timestamp",
        "bytes_since_last_index_entry", "offset_index_entries", "time_index_entries",
        "epoch_starts")}


@pytest.mark.parametrize("interval", [0, 100, 4096])
def test_scan_segment_matches_a_reference_across_buffer_growth(interval: int) -> None:
    """Thousands of index entries and epochs: the growable buffers grow past 4 KiB."""
    out = bytearray()
    offset = 1000
    for i in range(3000):
        n = 1 + i % 3
        out += make_batch([Rec(b"v" * (i % 40), timestamp_delta=(i * 7) % 50)] * n,
                          base_offset=offset, base_timestamp=1_700_000_000_000 + i % 500,
                          partition_leader_epoch=i // 3)
        offset += n
    data = bytes(out)
    scan = S.scan_segment(data, 1000, index_interval_bytes=interval)
    assert scan.error is None and scan.batch_count == 3000
    assert scan_fields(scan) == reference_scan(data, 1000, interval)
    assert len(scan.epoch_starts) == 1000
    if interval == 0:
        assert len(scan.offset_index_entries) == 2999 * 8


def test_scan_segment_resumes_from_a_position_with_carried_state() -> None:
    data = segment_bytes(40)
    size = len(data) // 40
    start = 20 * size
    kw = dict(next_offset=100, last_ts_entry=1_700_000_000_000, max_ts=1_700_000_000_010,
              off_max=60, epoch=1)
    scan = S.scan_segment(data, 0, start, kw["next_offset"], 2 * size, kw["last_ts_entry"],
                          kw["max_ts"], kw["off_max"], kw["epoch"])
    assert scan.batch_count == 20 and scan.error is None
    assert scan_fields(scan) == reference_scan(data, 0, 2 * size, start, **kw)
    assert scan.epoch_starts == [(2, 100), (3, 150)]
    assert S.scan_segment(data, 0, len(data)).valid_bytes == len(data)
    for bad in (-1, len(data) + 1):
        with pytest.raises(ValueError, match="start_position"):
            S.scan_segment(data, 0, bad)


def test_fd_walkers() -> None:
    data = segment_bytes(30)
    size = len(data) // 30
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.flush()
        fd = f.fileno()
        assert K.find_batch(fd, 0, len(data), 0) == (0, 0, 4, size)
        assert K.find_batch(fd, 0, len(data), 77) == (15 * size, 75, 79, size)
        assert K.find_batch(fd, 0, len(data), 150) is None
        pos, base, last, sz, ts = K.find_batch_by_timestamp(fd, 0, len(data), 1_700_000_000_012)
        assert (pos, base, ts) == (12 * size, 60, 1_700_000_000_012)
        assert K.scan_headers(fd, 0, len(data))[:2] == (30, 150)
        assert K.scan_headers(fd, 0, len(data) - 3)[4] == 29 * size
    assert os.path.exists("/proc/self")


def test_record_timestamps() -> None:
    data = make_batch([Rec(b"a", timestamp_delta=5), Rec(b"b", timestamp_delta=-3)])
    h = BatchHeader.parse(data)
    assert K.record_timestamps(data[61:], 2, h.base_timestamp) == [
        (0, h.base_timestamp + 5), (1, h.base_timestamp - 3)]
