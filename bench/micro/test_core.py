"""The core's per-byte work: CRC-32C on each path, batch validation, offset assignment,
offset index lookup."""

from __future__ import annotations

import os
import random
from pathlib import Path

import crc32c as crc32c_package
import pytest
from micro_inputs import timed

from kbroker._core import batch_validation, crc32c
from kbroker.storage.offset_index import OffsetIndex

# ---- CRC-32C: each path this CPU has, and the crc32c package as the yardstick ----

_PATH_FUNCTIONS = {
    "avx512-vpclmulqdq": crc32c.crc32c_avx512,
    "avx2-vpclmulqdq": crc32c.crc32c_avx2,
    "sse4.2": crc32c.crc32c_sse42,
    "software": crc32c.crc32c_sw,
}
_CRC_SIDES = {"crc32c-package": crc32c_package.crc32c}
_CRC_SIDES.update({name: fn for name, fn in _PATH_FUNCTIONS.items() if name in crc32c.PATHS})
_CRC_SIZES = {"4KiB": 4096, "1MiB": 1 << 20}


@pytest.mark.parametrize("side", list(_CRC_SIDES))
@pytest.mark.parametrize("size", list(_CRC_SIZES))
def test_crc32c(benchmark, side: str, size: str) -> None:  # type: ignore[no-untyped-def]
    data = random.Random(size).randbytes(_CRC_SIZES[size])
    benchmark.group = f"crc32c {size}"
    benchmark.extra_info["bytes"] = len(data)
    assert timed(benchmark, _CRC_SIDES[side], data) == crc32c_package.crc32c(data)


# ---- batch validation and offset assignment (Log.append's calls, in its order) ----


def test_validate_batches(benchmark, produce_payload) -> None:  # type: ignore[no-untyped-def]
    name, data, count = produce_payload
    benchmark.group = "validate_batches"
    benchmark.extra_info["bytes"] = len(data)
    view = memoryview(data)
    info = timed(benchmark, batch_validation.validate_batches, view, 1 << 20, now_ms=0,
                 check_timestamps=False)
    assert info.record_count == count


def test_assign_offsets(benchmark, produce_payload) -> None:  # type: ignore[no-untyped-def]
    name, data, count = produce_payload
    benchmark.group = "assign_offsets"
    buf = bytearray(data)
    last = timed(benchmark, batch_validation.assign_offsets, buf, 1_000_000, 7)
    assert last == 1_000_000 + count - 1
    assert batch_validation.validate_batches(buf).record_count == count  # the CRC still holds


def test_assign_offsets_pieces(benchmark, produce_payload) -> None:  # type: ignore[no-untyped-def]
    # the read-only payload path: patched 16-byte heads + untouched rest for pwritev
    name, data, count = produce_payload
    benchmark.group = "assign_offsets"
    pieces, last = timed(benchmark, batch_validation.assign_offsets_pieces, memoryview(data), 1_000_000, 7)
    assert last == 1_000_000 + count - 1
    assert b"".join(pieces)[:8] == (1_000_000).to_bytes(8, "big")


# ---- offset index lookup (Log.read's first step) ----

_INDEX_ENTRIES = 131_072  # a full 1 MiB .index: a 1 GiB segment at one entry per 8 KiB


@pytest.fixture(scope="module")
def offset_index(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = Path(tmp_path_factory.mktemp("index")) / "00000000000000000000.index"
    index = OffsetIndex(str(path), 0, _INDEX_ENTRIES * 8)
    for slot in range(_INDEX_ENTRIES):
        index.append(slot * 100, slot * 8192)
    yield index
    index.close()
    os.unlink(path)


def test_offset_index_lookup(benchmark, offset_index) -> None:  # type: ignore[no-untyped-def]
    benchmark.group = "offset index lookup"
    targets = [random.Random(9).randrange(_INDEX_ENTRIES * 100) for _ in range(1000)]

    def lookups() -> tuple[int, int]:
        found = (0, 0)
        for target in targets:
            found = offset_index.lookup(target)
        return found

    benchmark.extra_info["lookups_per_round"] = len(targets)
    offset, position = timed(benchmark, lookups)
    assert offset == targets[-1] // 100 * 100 and position == targets[-1] // 100 * 8192
