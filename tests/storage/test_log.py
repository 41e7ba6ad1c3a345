"""Log: append/read/offsets, rolling, ListOffsets, truncation, delete_records, errors."""

from __future__ import annotations

import pytest
from batches import Rec, decode_batches, make_batch, values_batch
from log_bytes import read_all_bytes

from kbroker.common.error_code import ErrorCode
from kbroker.records.batch_header import BatchHeader
from kbroker.storage.errors import (
    InvalidRecordsError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)

from .conftest import Env

TS = 1_700_000_000_000


def offsets_in(data: bytes) -> list[int]:
    return [r[0] for b in decode_batches(data) for r in b[2]]


def test_append_assigns_offsets_and_epoch(env: Env) -> None:
    log = env.log
    info = log.append_as_leader(values_batch(3), leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.log_append_time == -1 and info.max_timestamp == TS
    info = log.append_as_leader(bytearray(values_batch(2) + values_batch(5, codec=3)), leader_epoch=4)
    assert (info.first_offset, info.last_offset, info.batch_count) == (3, 9, 2)
    assert log.log_end_offset == 10 == log.high_watermark == log.last_stable_offset
    data = log.read(0, 1 << 20).records
    assert data is not None
    batches = decode_batches(data.read_bytes())
    assert [(b[0], b[1]) for b in batches] == [(0, 4), (3, 4), (5, 4)]
    assert offsets_in(data.read_bytes()) == list(range(10))
    assert log.latest_epoch == 4 and log.end_offset_for_epoch(4) == (4, 10)


def test_invalid_payload_appends_nothing(env: Env) -> None:
    log = env.log
    log.append_as_leader(values_batch(2))
    bad = bytearray(values_batch(2))
    bad[-1] ^= 1
    with pytest.raises(InvalidRecordsError) as exc:
        log.append_as_leader(values_batch(3) + bytes(bad))
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    big = env.log.config.with_overrides(max_message_bytes=100)
    log.update_config(big)
    with pytest.raises(InvalidRecordsError) as exc:
        log.append_as_leader(values_batch(30))
    assert exc.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    log.update_config(big.with_overrides(max_message_bytes=1 << 20))
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(values_batch(100, size=100))
    assert log.log_end_offset == 2 and log.size_in_bytes == len(values_batch(2))
    assert log.append_as_leader(b"").first_offset == -1


def test_bytes_input_is_not_modified(env: Env) -> None:
    payload = values_batch(2)
    env.log.append_as_leader(payload)
    env.log.append_as_leader(payload)
    assert payload == values_batch(2)
    assert env.log.log_end_offset == 4


def test_log_append_time(env: Env) -> None:
    log = env.log
    log.update_config(log.config.with_overrides({"message.timestamp.type": "LogAppendTime"}))
    info = log.append_as_leader(values_batch(3, base_timestamp=5))
    now = env.time.milliseconds()
    assert info.log_append_time == now and info.max_timestamp == now
    data = log.read(0, 1000).records
    assert data is not None
    h = BatchHeader.parse(data.read_bytes())
    assert h.is_log_append_time and h.max_timestamp == now


def test_deprecated_timestamp_difference_bounds_create_time(env: Env) -> None:
    log = env.log
    now = env.time.milliseconds()
    log.update_config(log.config.with_overrides({"message.timestamp.difference.max.ms": "5000"}))
    for skew in (-60_000, 60_000):
        with pytest.raises(InvalidRecordsError) as exc:
            log.append_as_leader(values_batch(1, base_timestamp=now + skew))
        assert exc.value.error_code == ErrorCode.INVALID_TIMESTAMP
    log.update_config(log.config.with_overrides({"message.timestamp.after.max.ms": "120000"}))
    assert log.append_as_leader(values_batch(1, base_timestamp=now + 60_000)).first_offset == 0


def test_rolls_by_size_and_time(env: Env) -> None:
    log = env.log
    for _ in range(40):
        log.append_as_leader(values_batch(5, size=40))
    assert len(log.segments) >= 4
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(s.size <= env.config.segment_bytes for s in log.segments)
    n = len(log.segments)
    log.update_config(log.config.with_overrides(segment_ms=1000))
    env.time.sleep(1001)
    log.append_as_leader(values_batch(1))
    assert len(log.segments) == n + 1
    log.roll()
    assert log.active_segment.base_offset == log.log_end_offset


def test_segment_jitter_is_drawn_per_segment(env: Env) -> None:
    """Kafka's segment.jitter.ms: each segment rolls after segment.ms minus its own random
    jitter in [0, jitter), not after segment.ms minus the whole jitter."""
    log = env.log
    log.update_config(log.config.with_overrides(segment_ms=10_000, segment_jitter_ms=9_000))
    ages = []
    for _ in range(30):
        log.append_as_leader(values_batch(1))
        segments, waited = len(log.segments), 0
        while len(log.segments) == segments:
            env.time.sleep(250)
            waited += 250
            log.append_as_leader(values_batch(1))
        ages.append(waited)
    assert all(1_000 < age <= 10_250 for age in ages)
    assert len(set(ages)) > 5  # random per segment: not one fixed cut-off


def test_read_bounds(env: Env) -> None:
    log = env.log
    for _ in range(50):
        log.append_as_leader(values_batch(4, size=30))
    assert log.read(200, 100).records is None  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(201, 100)
    assert exc.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    for offset in (0, 1, 77, 150, 199):
        info = log.read(offset, 10)  # smaller than a batch: still one whole batch
        assert info.records is not None
        first = decode_batches(info.records.read_bytes())[0]
        assert first[0] <= offset < first[0] + 4
    info = log.read(10, 100_000, max_offset=20)
    assert info.records is not None
    assert offsets_in(info.records.read_bytes())[-1] == 19
    log.update_high_watermark(100)
    assert log.high_watermark == 100
    info = log.read(90, 1 << 20)
    assert info.records is not None and offsets_in(info.records.read_bytes())[-1] == 99
    assert log.read(100, 1 << 20).records is None


def test_fetch_offset_by_timestamp(env: Env) -> None:
    log = env.log
    for i in range(60):
        recs = [Rec(b"x" * 20, timestamp_delta=j) for j in range(3)]
        log.append_as_leader(make_batch(recs, base_timestamp=TS + i * 10), leader_epoch=i // 20)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 0)
    assert log.fetch_offset_by_timestamp(-1) == (180, -1, 2)
    assert log.fetch_offset_by_timestamp(-3) == (179, TS + 592, 2)
    assert log.fetch_offset_by_timestamp(TS + 305) == (93, TS + 310, 1)
    assert log.fetch_offset_by_timestamp(TS + 302) == (92, TS + 302, 1)
    assert log.fetch_offset_by_timestamp(TS + 10_000) is None
    assert log.fetch_offset_by_timestamp(0) == (0, TS, 0)


def test_truncate_to(env: Env) -> None:
    log = env.log
    for i in range(50):
        log.append_as_leader(values_batch(2, size=60), leader_epoch=i // 10)
    n = len(log.segments)
    log.truncate_to(31)  # mid-batch: the batch 30..31 goes too
    assert log.log_end_offset == 30 and log.high_watermark == 30
    assert len(log.segments) < n
    assert log.end_offset_for_epoch(1) == (1, 30)
    assert log.end_offset_for_epoch(4) == (-1, -1)  # newer than any left: unknown, as Kafka
    info = log.append_as_leader(values_batch(1), leader_epoch=7)
    assert info.first_offset == 30
    assert offsets_in(read_all_bytes(log)) == list(range(31))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_delete_records_and_truncate_fully(env: Env) -> None:
    log = env.log
    for _ in range(50):
        log.append_as_leader(values_batch(2, size=60))
    n = len(log.segments)
    assert log.delete_records(41) == 41
    assert log.log_start_offset == 41 and len(log.segments) < n
    with pytest.raises(OffsetOutOfRangeError):
        log.read(40, 100)
    info = log.read(41, 10)
    assert info.records is not None
    assert decode_batches(info.records.read_bytes())[0][0] == 40
    assert log.fetch_offset_by_timestamp(-2)[0] == 41
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(101)
    assert log.delete_records(10) == 41
    assert log.delete_records(-1) == log.high_watermark == 100
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.append_as_leader(values_batch(1)).first_offset == 500


def test_flush_messages_moves_recovery_point(env: Env) -> None:
    log = env.log
    log.update_config(log.config.with_overrides(flush_messages=5))
    assert log.append_as_leader(values_batch(3)).flushed is None
    assert log.recovery_point == 0
    flushed = log.append_as_leader(values_batch(3)).flushed
    assert flushed is not None  # the fsync runs on the flush thread; the caller awaits it
    flushed.result(10)
    assert log.recovery_point == 6


def test_follower_append(env: Env) -> None:
    log = env.log
    log.append_as_follower(make_batch([Rec(b"a"), Rec(b"b")], base_offset=0, partition_leader_epoch=3))
    log.append_as_follower(make_batch([Rec(b"c")], base_offset=2, partition_leader_epoch=5))
    assert log.log_end_offset == 3 and log.latest_epoch == 5
    with pytest.raises(InvalidRecordsError):
        log.append_as_follower(make_batch([Rec(b"c")], base_offset=1))


def _corrupt_length(batch: bytes) -> bytes:
    bad = bytearray(batch)
    bad[8:12] = (40).to_bytes(4, "big")  # batchLength below the v2 header's 49
    return bytes(bad)


def _corrupt_crc(batch: bytes) -> bytes:
    bad = bytearray(batch)
    bad[-1] ^= 1
    return bytes(bad)


@pytest.mark.parametrize("corrupt, message", [(_corrupt_crc, "CRC-32C mismatch"),
                                              (_corrupt_length, "batch length below")])
def test_follower_append_refuses_a_corrupt_batch_and_stores_nothing(
        env: Env, corrupt, message: str) -> None:  # type: ignore[no-untyped-def]
    log = env.log
    log.append_as_follower(make_batch([Rec(b"a"), Rec(b"b")], base_offset=0, partition_leader_epoch=3))
    before = read_all_bytes(log)
    good = make_batch([Rec(b"c")], base_offset=2, partition_leader_epoch=5)
    bad = corrupt(make_batch([Rec(b"d")], base_offset=3, partition_leader_epoch=5))
    with pytest.raises(InvalidRecordsError) as exc:
        log.append_as_follower(good + bad)
    assert exc.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert message in str(exc.value) and f"(at byte {len(good)})" in str(exc.value)
    assert log.log_end_offset == 2 and log.latest_epoch == 3
    assert read_all_bytes(log) == before and log.size_in_bytes == len(before)


def test_follower_append_refuses_offsets_out_of_order_after_sound_batches(env: Env) -> None:
    log = env.log
    log.append_as_follower(values_batch(2, base_offset=0))
    payload = values_batch(2, base_offset=2, partition_leader_epoch=4) + values_batch(1, base_offset=3)
    with pytest.raises(InvalidRecordsError, match="follower append at 2"):
        log.append_as_follower(payload)
    assert log.log_end_offset == 2 and log.latest_epoch == 0


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_topic_compression_type_recompresses(env: Env, target: str) -> None:
    log = env.log
    log.update_config(log.config.with_overrides({"compression.type": target}))
    recs = [Rec(b"value-%d" % i, key=b"k", timestamp_delta=i, headers=[("h", b"1")]) for i in range(20)]
    log.append_as_leader(make_batch(recs, codec=1, producer_id=7, producer_epoch=1, base_sequence=0))
    log.append_as_leader(make_batch(recs, codec=0))
    data = log.read(0, 1 << 20).records
    assert data is not None
    raw = data.read_bytes()
    codecs = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    headers = [BatchHeader.parse(raw), BatchHeader.parse(raw, BatchHeader.parse(raw).size_in_bytes)]
    assert [h.codec for h in headers] == [codecs[target]] * 2
    assert (headers[0].producer_id, headers[0].base_sequence) == (7, 0)
    assert offsets_in(raw) == list(range(40))
    assert [r[3] for b in decode_batches(raw) for r in b[2]] == [r.value for r in recs] * 2


def test_rolls_when_an_index_is_full(env: Env) -> None:
    log = env.log
    log.update_config(log.config.with_overrides(segment_index_bytes=24, index_interval_bytes=0,
                                                segment_bytes=1 << 20))
    for _ in range(12):
        log.append_as_leader(values_batch(1))
    segments = list(log.segments)
    assert len(segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in segments)
    assert [r[0] for b in decode_batches(read_all_bytes(log)) for r in b[2]] == list(range(12))
