"""OffsetIndex and TimeIndex: preallocation, lookup, truncation, trimming, sanity checks."""

from __future__ import annotations

import os

import pytest

from kbroker.storage.errors import CorruptIndexError
from kbroker.storage.offset_index import OffsetIndex
from kbroker.storage.time_index import TimeIndex


def test_offset_index_lookup_and_preallocation(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1000)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 50):
        idx.append(100 + i * 10, i * 64)
    assert os.path.getsize(path) == 1000  # preallocated, rounded to entries
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 64)
    assert idx.lookup(115) == (110, 64)
    assert idx.lookup(10_000) == (590, 49 * 64)
    assert idx.max_entries == 125
    idx.sanity_check(log_size=50 * 64)
    with pytest.raises(CorruptIndexError):
        idx.append(590, 5000)
    idx.truncate_to(305)
    assert idx.entries == 20
    idx.truncate_to(300)
    assert idx.entries == 19 and idx.last_entry == (290, 19 * 64)
    idx.close()
    assert os.path.getsize(path) == 19 * 8  # trimmed on close
    again = OffsetIndex(path, 100, 1000)
    assert again.entries == 19 and again.lookup(305) == (290, 19 * 64)
    again.close()


def test_offset_index_sanity_checks(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "00000000000000000000.index")
    with open(path, "wb") as f:
        f.write(b"\x00" * 80)  # a crash left a preallocated, zero-filled file
    idx = OffsetIndex(path, 0, 1000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(1000)
    idx.close()
    with open(path, "wb") as f:
        f.write(b"\x00" * 13)
    idx = OffsetIndex(path, 0, 1000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(1000)
    idx.load_entries(b"\x00\x00\x00\x05\x00\x00\x01\x00")
    idx.sanity_check(1000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(100)  # position beyond the log
    idx.close()


def test_time_index(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "00000000000000000000.timeindex")
    idx = TimeIndex(path, 0, 120)
    assert idx.lookup(5) == (-1, 0)
    idx.maybe_append(1000, 5)
    idx.maybe_append(1000, 9)  # not larger: skipped
    idx.maybe_append(2000, 12)
    idx.maybe_append(3000, 30)
    assert idx.entries == 3
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(1500) == (1000, 5)
    assert idx.lookup(5000) == (3000, 30)
    idx.sanity_check(30)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(20)
    idx.truncate_to(12)
    assert idx.entries == 1
    for i in range(9):
        idx.maybe_append(4000 + i, 40 + i)
    assert idx.is_full
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(9000, 90)
    idx.maybe_append(9000, 90, skip_full_check=True)
    idx.close()
    assert os.path.getsize(path) == 11 * 12
