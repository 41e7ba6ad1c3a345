"""IndexFile, driven directly: the preallocated, mapped file under OffsetIndex and TimeIndex.

Real files in tmp_path; each test looks at the file on disk (its length and bytes)
as well as at the object. OffsetIndex's and TimeIndex's own rules (lookup, ordering)
are tests/storage/test_indexes.py.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kbroker.storage.index_file import IndexFile


class WideIndex(IndexFile):
    ENTRY_SIZE = 12  # TimeIndex's entry size


def entries(n: int, start: int = 1) -> bytes:
    return b"".join(struct.pack(">ii", start + i, 100 * i) for i in range(n))


def test_a_missing_file_is_created_empty_and_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 1000)
    assert idx.created and path.exists() and os.path.getsize(path) == 0
    assert (idx.entries, idx.size_in_bytes, idx.misaligned, idx.is_full) == (0, 0, False, False)
    assert idx.buffer == b""
    idx.close()
    assert os.path.getsize(path) == 0


def test_the_maximum_size_is_whole_entries_and_at_least_one(tmp_path: Path) -> None:
    assert IndexFile(str(tmp_path / "a.index"), 0, 1001).max_index_size == 1000
    assert IndexFile(str(tmp_path / "b.index"), 0, 3).max_entries == 1
    wide = WideIndex(str(tmp_path / "c.timeindex"), 0, 1000)
    assert (wide.max_index_size, wide.max_entries) == (996, 83)


def test_an_existing_file_gives_its_entries_and_flags_a_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(entries(5))
    idx = IndexFile(str(path), 0, 1000)
    assert (idx.created, idx.entries, idx.misaligned) == (False, 5, False)
    assert bytes(memoryview(idx.buffer)[:40]) == entries(5)
    idx.close()
    path.write_bytes(entries(5) + b"\x00\x01\x02")
    idx = IndexFile(str(path), 0, 1000)
    assert (idx.entries, idx.misaligned) == (5, True)
    idx.reset()
    assert (idx.entries, idx.misaligned) == (0, False)
    assert os.path.getsize(path) == 43  # reset forgets entries, not bytes
    idx.abandon()


def test_loading_entries_preallocates_and_close_trims_to_them(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 1000)
    idx.load_entries(entries(10))
    assert idx.entries == 10 and idx.size_in_bytes == 80
    assert os.path.getsize(path) == 1000  # preallocated: appends are stores into the mapping
    idx.close()
    assert path.read_bytes() == entries(10)
    idx.close()  # twice is harmless
    with pytest.raises(ValueError, match="closed"):
        memoryview(idx.buffer)


def test_loading_more_than_the_maximum_grows_the_file_to_fit(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 80)
    idx.load_entries(entries(25))
    assert idx.entries == 25 and idx.is_full and os.path.getsize(path) == 200
    idx.load_entries(entries(3, start=50))  # replaces the contents
    assert idx.entries == 3
    idx.close()
    assert path.read_bytes() == entries(3, start=50)


def test_a_crash_leaves_the_preallocated_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 1000)
    idx.load_entries(entries(4))
    idx.flush()
    idx.abandon()
    data = path.read_bytes()
    assert len(data) == 1000 and data[:32] == entries(4) and data[32:] == bytes(968)
    again = IndexFile(str(path), 0, 1000)
    assert again.entries == 125  # the zero tail reads as entries: sanity checks catch it
    again.abandon()


def test_resize_keeps_the_entries_that_fit_mapped_or_not(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 1000)
    idx.load_entries(entries(10))
    idx.resize(41)  # mapped: remapped at the new length (rounded down to entries)
    assert os.path.getsize(path) == 40 and idx.entries == 5
    assert bytes(memoryview(idx.buffer)) == entries(5)
    idx.unmap()
    idx.resize(24)  # not mapped: only the file's length changes
    assert os.path.getsize(path) == 24 and idx.entries == 3
    assert bytes(memoryview(idx.buffer)) == entries(3)  # mapped again on use
    idx.trim_to_valid_size()
    idx.close()
    assert path.read_bytes() == entries(3)


def test_unmap_gives_the_mapping_back_and_the_next_use_maps_it_again(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = IndexFile(str(path), 0, 64)
    idx.load_entries(entries(2))
    memoryview(idx.buffer)[16:24] = struct.pack(">ii", 9, 900)  # a store, as append does
    idx.entries = 3
    idx.unmap()
    idx.flush()  # unmapped: nothing to sync
    assert bytes(memoryview(idx.buffer)[:24]) == entries(2) + struct.pack(">ii", 9, 900)
    idx.close()
    assert path.read_bytes() == entries(2) + struct.pack(">ii", 9, 900)


def test_rename_moves_the_file_and_later_writes_follow_it(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    moved = tmp_path / "00000000000000000000.index.deleted"
    idx = IndexFile(str(path), 0, 1000)
    idx.load_entries(entries(2))
    idx.unmap()
    idx.rename(str(moved))
    assert not path.exists() and idx.path == str(moved)
    idx.load_entries(entries(6))
    idx.close()
    assert moved.read_bytes() == entries(6) and not path.exists()
