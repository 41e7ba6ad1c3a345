"""A follower's append of batches whose offsets pass 2^31-1 and 2^32 (Kafka's offsets are
64-bit; only a segment's index entries are relative to its base offset, int32): on a
fresh log, on a log started at such an offset (a leader whose log starts there), and
across a gap wider than int32 (a compacted leader). Every offset is read back, before
and after a restart (recovery rebuilds the indexes from the segments), and no segment
holds an offset more than INT32_MAX above its base."""

from __future__ import annotations

import pytest
from batches import decode_batches, values_batch

from kbroker.storage.log import Log
from kbroker.storage.log_segment import INT32_MAX

from .conftest import Env

EDGE31, EDGE32 = 1 << 31, 1 << 32


def offsets_read(log: Log, start: int) -> list[int]:
    """Every record offset from `start` to the log end, read batch by batch."""
    out: list[int] = []
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, max_offset=log.log_end_offset).records
        assert data is not None and data.size > 0, f"nothing read at {offset}"
        got = [r[0] for b in decode_batches(data.read_bytes()) for r in b[2] if r[0] >= offset]
        assert got, f"no record at or after {offset}"
        out += got
        offset = got[-1] + 1
    return out


def assert_segments_relative(log: Log) -> None:
    for seg in log.segments:
        assert seg.next_offset - 1 - seg.base_offset <= INT32_MAX, (seg.base_offset, seg.next_offset)


def append_run(log: Log, first: int, batches: int, per_batch: int = 20) -> list[int]:
    """Batches of `per_batch` records from `first` on, as a leader wrote them (epoch 3)."""
    offsets: list[int] = []
    for i in range(batches):
        base = first + i * per_batch
        info = log.append_as_follower(values_batch(per_batch, base_offset=base, partition_leader_epoch=3))
        assert (info.first_offset, info.last_offset) == (base, base + per_batch - 1)
        offsets += range(base, base + per_batch)
    return offsets


@pytest.mark.parametrize("edge", [EDGE31, EDGE32], ids=["2^31", "2^32"])
def test_fresh_log_takes_batches_across_the_edge(env: Env, edge: int) -> None:
    log = env.log
    first = edge - 50  # the third batch straddles the edge (offsets up to edge + 9)
    offsets = append_run(log, first, 6)
    assert log.log_end_offset == first + 120 and log.latest_epoch == 3
    assert offsets_read(log, first) == offsets
    assert_segments_relative(log)
    log = env.restart()
    assert log.log_end_offset == first + 120
    assert offsets_read(log, first) == offsets
    assert log.end_offset_for_epoch(3) == (3, first + 120)


@pytest.mark.parametrize("start", [EDGE31 - 5, EDGE31 + 10, EDGE32 + 10], ids=["2^31-5", "2^31+10", "2^32+10"])
def test_log_started_where_the_leader_starts(env: Env, start: int) -> None:
    log = env.log
    log.truncate_fully_and_start_at(start)
    offsets = append_run(log, start, 40)  # 800 records: several segments of 4 KiB
    assert log.log_start_offset == start and log.log_end_offset == start + 800
    assert len(log.segments) > 1
    assert offsets_read(log, start) == offsets
    assert_segments_relative(log)
    log = env.restart()
    assert (log.log_start_offset, log.log_end_offset) == (start, start + 800)
    assert offsets_read(log, start) == offsets


def test_a_gap_wider_than_int32_starts_a_segment_at_the_batch(env: Env) -> None:
    log = env.log
    low = append_run(log, 0, 2)
    high = append_run(log, EDGE32 + 7, 2)  # 2^32 + 7 - 40 > INT32_MAX: not in the first segment
    assert log.log_end_offset == EDGE32 + 47
    assert [s.base_offset for s in log.segments] == [0, EDGE32 + 7]
    assert_segments_relative(log)
    assert offsets_read(log, 0) == low + high
    log = env.restart()
    assert offsets_read(log, 0) == low + high
