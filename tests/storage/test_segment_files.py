"""LogSegments, SegmentFileCache, MappedFile and IndexFile: the pieces under a Log's files."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kbroker._core.index import MappedFile
from kbroker.storage.log_segment import LogSegment
from kbroker.storage.log_segments import LogSegments
from kbroker.storage.offset_index import OffsetIndex
from kbroker.storage.segment_file_cache import SegmentFileCache


def segment(d: Path, base: int) -> LogSegment:
    return LogSegment(str(d), base, index_interval_bytes=4096, max_index_size=1024, created_ms=0)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_log_segments_keep_order_and_find_floors(tmp_path: Path) -> None:
    segs = LogSegments()
    for base in (100, 0, 50):
        segs.add(segment(tmp_path, base))
    assert [s.base_offset for s in segs] == [0, 50, 100] and segs.active.base_offset == 100
    assert segs.floor(49).base_offset == 0 and segs.floor(50).base_offset == 50  # type: ignore[union-attr]
    assert segs.floor(-1) is None
    assert segs.higher(50).base_offset == 100 and segs.higher(100) is None  # type: ignore[union-attr]
    assert [s.base_offset for s in segs.from_offset(60)] == [50, 100]
    segs.remove(50)
    assert [s.base_offset for s in segs] == [0, 100] and segs.get(50) is None


def test_file_cache_bounds_open_segments_and_reopens_on_use(tmp_path: Path) -> None:
    cache = SegmentFileCache(2)
    segs = LogSegments()
    segs.use_file_cache(cache)
    for base in (0, 10, 20):
        segs.add(segment(tmp_path, base))
    before = open_fds()
    a, b, c = list(segs)
    a.open_file(), b.open_file()
    assert open_fds() == before + 2 and len(cache) == 2
    held = a.open_file()  # a is now the most recent; opening c evicts b
    c.open_file()
    assert open_fds() == before + 2 and cache.evictions == 1
    assert b._file is None and a._file is held
    os.pwrite(b.fd, b"x", 0)  # b reopens by itself
    assert os.path.getsize(b.log_path) == 1 and len(cache) == 2


def test_an_evicted_file_stays_open_for_its_holders(tmp_path: Path) -> None:
    cache = SegmentFileCache(1)
    segs = LogSegments()
    segs.use_file_cache(cache)
    first, second = segment(tmp_path, 0), segment(tmp_path, 10)
    segs.add(first)
    segs.add(second)
    os.pwrite(first.fd, b"first", 0)
    held = first.open_file()  # as a queued FileSlice holds it
    second.open_file()  # evicts `first`
    assert first._file is None
    assert os.pread(held.fd, 5, 0) == b"first"  # the descriptor is still the first file's


def test_mapped_file_holds_no_descriptor_and_refuses_to_move_under_a_buffer(tmp_path: Path) -> None:
    path = str(tmp_path / "00000000000000000000.index")
    before = open_fds()
    m = MappedFile(path, 4096)
    assert open_fds() == before and os.path.getsize(path) == 4096
    struct.pack_into(">ii", m, 8, 7, 9)
    view = memoryview(m)
    with pytest.raises(BufferError):
        m.resize(path, 8192)
    view.release()
    m.resize(path, 8192)
    assert struct.unpack_from(">ii", m, 8) == (7, 9) and len(m) == 8192
    m.close()
    assert m.closed
    with pytest.raises(ValueError):
        memoryview(m)


def test_index_unmaps_and_maps_again_on_use(tmp_path: Path) -> None:
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 1024)
    for i in range(5):
        idx.append(i * 10, i * 100)
    idx.unmap()
    assert idx.lookup(35) == (30, 300)  # mapped again to answer
    idx.close()
    assert os.path.getsize(idx.path) == 5 * 8  # trimmed to its entries
