"""CRC-32C: every path against known vectors, each other and the `crc32c` package.

Each test is written once and runs against every implementation the CPU has
(the active one, software, and each hardware path), uvloop's mixin idea done
with parametrisation. The whole core can also run on one path:
KBROKER_CRC32C_PATH=avx2-vpclmulqdq scripts/test-sanitize (see use_path below).
"""

from __future__ import annotations

import array
import mmap
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable

import crc32c as reference
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker._core import crc32c as core

Checksum = Callable[..., int]


X86_PATHS = {"sse4.2", "avx2-vpclmulqdq", "avx512-vpclmulqdq"}


def _implementations() -> list[object]:
    paths: list[object] = [
        pytest.param(core.crc32c, id="active"),
        pytest.param(core.crc32c_sw, id="software"),
    ]
    hardware = [
        ("hw", core.crc32c_hw, core.HARDWARE),
        ("sse42", core.crc32c_sse42, "sse4.2" in core.PATHS),
        ("avx2", core.crc32c_avx2, "avx2-vpclmulqdq" in core.PATHS),
        ("avx512", core.crc32c_avx512, "avx512-vpclmulqdq" in core.PATHS),
    ]
    for name, fn, present in hardware:
        skip = pytest.mark.skipif(not present, reason=f"CPU lacks the {name} path")
        paths.append(pytest.param(fn, id=name, marks=skip))
    return paths


IMPLEMENTATIONS = _implementations()
implementations = pytest.mark.parametrize("checksum", IMPLEMENTATIONS)

# (data, CRC): the check value, the RFC 3720 (iSCSI) appendix B.4 vectors.
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)
KNOWN_VECTORS = [
    (b"", 0x00000000),
    (b"a", 0xC1D04330),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (ISCSI_READ_PDU, 0xD9963A56),
]


def _random_bytes(seed: int, length: int) -> bytes:
    return random.Random(seed).randbytes(length)


@implementations
@pytest.mark.parametrize(("data", "expected"), KNOWN_VECTORS)
def test_known_vectors(checksum: Checksum, data: bytes, expected: int) -> None:
    assert checksum(data) == expected


@implementations
def test_every_length_to_4096_matches_the_crc32c_package(checksum: Checksum) -> None:
    buffer = _random_bytes(1, 4096 + 8)
    view = memoryview(buffer)
    for length in range(4097):
        start = length % 8  # every alignment
        chunk = view[start : start + length]
        assert checksum(chunk, length) == reference.crc32c(chunk, length), length


@implementations
def test_every_length_to_300_at_every_offset_to_64(checksum: Checksum) -> None:
    buffer = memoryview(_random_bytes(5, 300 + 64))
    for start in range(64):
        for length in range(301):
            chunk = buffer[start : start + length]
            assert checksum(chunk) == reference.crc32c(chunk), (start, length)


@implementations
def test_random_lengths_and_offsets(checksum: Checksum) -> None:
    # Lengths across every path's thresholds and block sizes (AVX2 hybrid
    # iterations of 544 bytes, blocks of up to 42 of them), at random offsets.
    rng = random.Random(6)
    buffer = memoryview(rng.randbytes(600_000))
    lengths = [rng.randrange(300, 600_000 - 64) for _ in range(60)]
    lengths += [544 * k + d for k in (1, 2, 41, 42, 43, 84, 85) for d in (-33, -1, 0, 1, 31)]
    for length in lengths:
        start = rng.randrange(64)
        chunk = buffer[start : start + length]
        value = rng.randrange(2**32)
        assert checksum(chunk, value) == reference.crc32c(chunk, value), (start, length)


@implementations
@pytest.mark.parametrize("start", [0, 1, 3, 7, 13, 63])
@pytest.mark.parametrize(
    "length",
    [65535, 65536, 65537, 256 * 1024 + 77, 1024 * 1024, 3 * 1024 * 1024 + 5, 16 * 1024 * 1024 + 3],
)
def test_large_unaligned_buffers(checksum: Checksum, start: int, length: int) -> None:
    buffer = memoryview(_random_bytes(length, start + length))[start:]
    assert checksum(buffer) == reference.crc32c(buffer)


@implementations
@given(data=st.binary(max_size=5000), value=st.integers(0, 2**32 - 1))
def test_matches_the_crc32c_package(checksum: Checksum, data: bytes, value: int) -> None:
    assert checksum(data, value) == reference.crc32c(data, value)


@implementations
@given(data=st.binary(max_size=3000), cut=st.integers(0, 3000))
def test_incremental_equals_one_shot(checksum: Checksum, data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    assert checksum(data[cut:], checksum(data[:cut])) == checksum(data)


@implementations
def test_incremental_across_paths_and_sizes(checksum: Checksum) -> None:
    data = _random_bytes(2, 200_000)
    crc = 0
    for start, end in [(0, 5), (5, 1029), (1029, 70_000), (70_000, 200_000)]:
        crc = checksum(data[start:end], crc)
    assert crc == core.crc32c(data)


@implementations
def test_accepts_any_contiguous_buffer(checksum: Checksum) -> None:
    data = _random_bytes(3, 100_003)
    expected = reference.crc32c(data)
    assert checksum(bytearray(data)) == expected
    assert checksum(memoryview(data)) == expected
    assert checksum(memoryview(b"xx" + data)[2:]) == expected
    assert checksum(array.array("B", data)) == expected
    assert checksum(memoryview(data).cast("B", (len(data),))) == expected


@implementations
def test_reads_an_mmap_in_place(checksum: Checksum) -> None:
    data = _random_bytes(4, 3 * mmap.PAGESIZE + 11)
    with mmap.mmap(-1, len(data)) as region:
        region.write(data)
        assert checksum(region) == reference.crc32c(data)
        assert checksum(memoryview(region)[5:]) == reference.crc32c(data[5:])


@implementations
def test_rejects_what_is_not_a_contiguous_buffer(checksum: Checksum) -> None:
    with pytest.raises(TypeError):
        checksum("text")
    with pytest.raises(BufferError):
        checksum(memoryview(b"abcdef")[::2])
    with pytest.raises(OverflowError):
        checksum(b"x", -1)
    with pytest.raises(OverflowError):
        checksum(b"x", 2**32)


def test_large_buffers_from_many_threads() -> None:
    # GIL released at GIL_RELEASE_BYTES: threads must still get their own answers.
    buffers = [_random_bytes(seed, core.GIL_RELEASE_BYTES * 4 + seed) for seed in range(4)]
    expected = [reference.crc32c(b) for b in buffers]
    results: list[list[int]] = [[] for _ in buffers]

    def work(i: int) -> None:
        results[i] = [core.crc32c(buffers[i]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(buffers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[crc] * 20 for crc in expected]


def test_reports_the_active_path() -> None:
    assert isinstance(core.HARDWARE, bool)
    assert set(core.KNOWN_PATHS) <= X86_PATHS | {"armv8-crc", "software"}
    assert set(core.PATHS) <= set(core.KNOWN_PATHS)
    assert core.PATHS[-1] == "software"
    assert core.HARDWARE == (core.PATHS[0] != "software")
    forced = os.environ.get(core.PATH_VARIABLE)
    assert core.IMPLEMENTATION == (forced or core.PATHS[0])
    assert core.active_path() == core.IMPLEMENTATION
    assert core.GIL_RELEASE_BYTES == 64 * 1024


@pytest.fixture
def restore_path():  # type: ignore[no-untyped-def]
    before = core.active_path()
    yield
    core.use_path(before)


@pytest.mark.parametrize("path", core.PATHS)
def test_use_path_switches_every_module_of_the_core(path: str, restore_path: None) -> None:
    from batches import values_batch

    from kbroker._core import batch_validation
    from kbroker._core.records import RecordValidationError

    core.use_path(path)
    assert core.active_path() == path
    data = _random_bytes(7, 300_000)
    assert core.crc32c(data) == reference.crc32c(data)
    # records.check_frame reaches the C through `cimport crc32c_update`: batch_validation
    # checks batch CRCs on the chosen path too, and still catches a flipped byte.
    batch = bytearray(values_batch(500, 100))
    assert batch_validation.validate_batches(batch).record_count == 500
    batch[-1] ^= 1
    with pytest.raises(RecordValidationError, match="CRC"):
        batch_validation.validate_batches(batch)


def test_use_path_refuses_unknown_and_missing_paths(restore_path: None) -> None:
    before = core.active_path()
    with pytest.raises(ValueError, match="no CRC-32C path"):
        core.use_path("avx1024")
    missing = [name for name in core.KNOWN_PATHS if name not in core.PATHS]
    for name in missing:
        with pytest.raises(RuntimeError, match="lacks"):
            core.use_path(name)
    assert core.active_path() == before


def _import_with_path(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, core.PATH_VARIABLE: value}
    code = "from kbroker._core import crc32c; print(crc32c.IMPLEMENTATION, crc32c.crc32c(b'123456789'))"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("path", core.PATHS)
def test_environment_variable_forces_a_path(path: str) -> None:
    result = _import_with_path(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [path, str(0xE3069283)]


def test_environment_variable_naming_no_path_fails_the_import() -> None:
    result = _import_with_path("fastest")
    assert result.returncode != 0
    assert "ImportError: KBROKER_CRC32C_PATH: no CRC-32C path is called 'fastest'" in result.stderr


@pytest.mark.skipif(core.HARDWARE, reason="this CPU has a hardware path")
def test_hardware_path_refuses_without_the_instructions() -> None:
    with pytest.raises(RuntimeError):
        core.crc32c_hw(b"x")


@pytest.mark.skipif(core.IMPLEMENTATION in X86_PATHS, reason="this CPU has SSE4.2")
def test_x86_paths_refuse_elsewhere() -> None:
    with pytest.raises(RuntimeError):
        core.crc32c_sse42(b"x")
    with pytest.raises(RuntimeError):
        core.crc32c_avx2(b"x")
    with pytest.raises(RuntimeError):
        core.crc32c_avx512(b"x")


def test_cimport_contract_matches_the_pxd() -> None:
    # records.pyx and others `cimport crc32c_update`; Cython checks this signature.
    capi = core.__pyx_capi__  # type: ignore[attr-defined]
    assert set(capi) == {"crc32c_update"}
    assert '"uint32_t (uint32_t, unsigned char const *, size_t)"' in repr(capi["crc32c_update"])
