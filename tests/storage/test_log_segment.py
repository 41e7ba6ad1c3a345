"""LogSegment: append with sparse index entries, read, translate, timestamps, truncate, recover."""

from __future__ import annotations

import os

from batches import Rec, decode_batches, make_batch

from kbroker.storage.log_segment import LogSegment

TS = 1_700_000_000_000


def new_segment(path: str, base: int = 0, interval: int = 200) -> LogSegment:
    return LogSegment(path, base, index_interval_bytes=interval, max_index_size=4096, created_ms=0)


def fill(seg: LogSegment, n: int, per_batch: int = 3, ts_step: int = 10) -> list[int]:
    sizes = []
    offset = seg.next_offset
    for _i in range(n):
        recs = [Rec(b"value-%06d-%d" % (offset, j), timestamp_delta=j) for j in range(per_batch)]
        ts = TS + (offset // per_batch) * ts_step
        data = make_batch(recs, base_offset=offset, base_timestamp=ts)
        last = offset + per_batch - 1
        seg.append(last, ts + per_batch - 1, last, data)
        sizes.append(len(data))
        offset += per_batch
    return sizes


def test_names_and_append(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path), 42)
    assert os.path.basename(seg.log_path) == "00000000000000000042.log"
    fill(seg, 20)
    assert seg.next_offset == 42 + 60
    assert seg.offset_index.entries > 0
    assert os.path.exists(os.path.join(str(tmp_path), "00000000000000000042.index"))
    assert os.path.exists(os.path.join(str(tmp_path), "00000000000000000042.timeindex"))
    seg.sanity_check_indexes()
    seg.close()


def test_read_and_translate(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path))
    sizes = fill(seg, 30)
    size = sizes[0]
    for target in (0, 1, 2, 3, 44, 89):
        loc = seg.translate_offset(target)
        assert loc is not None and loc.base_offset == target // 3 * 3 and loc.position == target // 3 * size
    assert seg.translate_offset(90) is None
    pos, sl = seg.read(50, 1)  # min one message: the whole batch
    assert pos == 16 * size and sl.size == size
    assert decode_batches(sl.read_bytes())[0][0] == 48
    assert seg.read(50, 1, min_one_message=False)[1].size == 1
    assert seg.read(50, 10_000)[1].size == seg.size - 16 * size
    assert seg.read(50, 10_000, max_position=20 * size)[1].size == 4 * size
    seg.close()


def test_find_offset_by_timestamp(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path))
    fill(seg, 30)
    assert seg.find_offset_by_timestamp(TS, 0) == (0, TS)
    assert seg.find_offset_by_timestamp(TS + 101, 0) == (31, TS + 101)
    assert seg.find_offset_by_timestamp(TS + 105, 0) == (33, TS + 110)
    assert seg.find_offset_by_timestamp(TS + 101, 32) == (32, TS + 102)
    assert seg.find_offset_by_timestamp(TS + 10_000, 0) is None
    assert seg.largest_timestamp == TS + 292
    seg.close()


def test_truncate_to(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path))
    sizes = fill(seg, 30)
    assert seg.truncate_to(46) == 15 * sizes[0]  # the batch holding 46 starts at 45
    assert seg.next_offset == 45 and seg.size == 15 * sizes[0]
    assert seg.largest_timestamp == TS + 142
    seg.sanity_check_indexes()
    fill(seg, 2)
    assert seg.next_offset == 51
    assert seg.truncate_to(0) == seg.size + 0 or seg.size == 0
    assert seg.next_offset == 0
    seg.close()


def test_recover_rebuilds_indexes_and_truncates(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path))
    sizes = fill(seg, 30)
    entries = seg.offset_index.entries
    raw = bytes(memoryview(seg.offset_index.buffer)[: entries * 8])
    seg.close()
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 30)  # a torn append
    os.unlink(seg.offset_index.path)
    seg = new_segment(str(tmp_path))
    truncated, epochs, _ = seg.recover()
    assert truncated == 30 and seg.size == 30 * sizes[0] and seg.next_offset == 90
    assert bytes(memoryview(seg.offset_index.buffer)[: entries * 8]) == raw
    assert epochs == [(0, 0)]
    seg.close()


def test_load_tail_after_clean_close(tmp_path: object) -> None:
    seg = new_segment(str(tmp_path))
    fill(seg, 30)
    seg.close()
    seg = new_segment(str(tmp_path))
    seg.load_tail()
    assert seg.next_offset == 90 and seg.largest_timestamp == TS + 292
    seg.close()
