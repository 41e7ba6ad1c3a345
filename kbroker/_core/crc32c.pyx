"""CRC-32C (Castagnoli), the checksum of Kafka's record batch v2.

The C in native/crc32c.c does the work; it picks its fastest path when this
module loads. The environment variable KBROKER_CRC32C_PATH names another path
instead (one of PATHS: tests and benchmarks; an unknown path, or one this CPU
lacks, fails the import), and use_path() switches the active path at run time.
Python callers use crc32c(); Cython modules cimport crc32c_update (see
crc32c.pxd) and call it without the GIL.

Every function takes the CRC of the bytes before `data` (0 to start), so
crc32c(b, crc32c(a)) == crc32c(a + b). `data` is any C-contiguous buffer
(bytes, bytearray, memoryview, mmap, array); it is read in place, never copied.
The GIL is released for buffers of GIL_RELEASE_BYTES or more.
"""

import os

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint32_t


cdef extern from "crc32c.h" nogil:
    uint32_t kb_crc32c(uint32_t crc, const void *data, size_t length)
    uint32_t kb_crc32c_sw(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_hw_available()
    uint32_t kb_crc32c_hw(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_sse42_available()
    uint32_t kb_crc32c_sse42(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_avx2_available()
    uint32_t kb_crc32c_avx2(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_avx512_available()
    uint32_t kb_crc32c_avx512(uint32_t crc, const void *data, size_t length)
    const char *kb_crc32c_implementation()
    int kb_crc32c_use(const char *name)
    const char *kb_crc32c_path_name(size_t i)
    int kb_crc32c_path_available(size_t i)


ctypedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t length) noexcept nogil

cdef enum:
    _GIL_RELEASE_BYTES = 64 * 1024

GIL_RELEASE_BYTES = _GIL_RELEASE_BYTES
PATH_VARIABLE = "KBROKER_CRC32C_PATH"


def _paths():
    cdef size_t i = 0
    known, present = [], []
    while kb_crc32c_path_name(i) != NULL:
        name = kb_crc32c_path_name(i).decode("ascii")
        known.append(name)
        if kb_crc32c_path_available(i):
            present.append(name)
        i += 1
    return tuple(known), tuple(present)


# Every path this build knows, and those this CPU has, best first.
KNOWN_PATHS, PATHS = _paths()
HARDWARE = bool(kb_crc32c_hw_available())


def active_path():
    """Name of the path crc32c() and the core's other modules use now."""
    return kb_crc32c_implementation().decode("ascii")


def use_path(str name):
    """Make `name` (one of PATHS) the active path; returns the previous one.

    For tests and benchmarks: every module of the core switches at once.
    ValueError for a name no path has, RuntimeError for a path this CPU lacks.
    """
    previous = active_path()
    status = kb_crc32c_use(name.encode("ascii", "replace"))
    if status == -1:
        raise ValueError(f"no CRC-32C path is called {name!r}; known: {', '.join(KNOWN_PATHS)}")
    if status == -2:
        raise RuntimeError(f"this CPU lacks the {name} CRC-32C path; it has: {', '.join(PATHS)}")
    return previous


if os.environ.get(PATH_VARIABLE):
    try:
        use_path(os.environ[PATH_VARIABLE])
    except (ValueError, RuntimeError) as error:
        raise ImportError(f"{PATH_VARIABLE}: {error}") from None

# The active path once this module loaded (the environment variable applied).
IMPLEMENTATION = active_path()


cdef uint32_t crc32c_update(uint32_t crc, const unsigned char *data, size_t length) noexcept nogil:
    return kb_crc32c(crc, data, length)


cdef object _checksum(crc_fn fn, object data, uint32_t value):
    cdef Py_buffer view
    cdef uint32_t crc
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= _GIL_RELEASE_BYTES:
            with nogil:
                crc = fn(value, view.buf, <size_t>view.len)
        else:
            crc = fn(value, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


cdef _require(int available, str path):
    if not available:
        raise RuntimeError(f"this CPU lacks the {path} CRC-32C instructions")


def crc32c(data, uint32_t value=0):
    """CRC-32C of `data` continuing from `value`, on the active path."""
    return _checksum(kb_crc32c, data, value)


def crc32c_sw(data, uint32_t value=0):
    """CRC-32C on the portable software path (slicing-by-8)."""
    return _checksum(kb_crc32c_sw, data, value)


def crc32c_hw(data, uint32_t value=0):
    """CRC-32C on the best hardware path; RuntimeError if the CPU has none."""
    _require(kb_crc32c_hw_available(), "SSE4.2/PCLMULQDQ or ARMv8 CRC32/PMULL")
    return _checksum(kb_crc32c_hw, data, value)


def crc32c_sse42(data, uint32_t value=0):
    """CRC-32C on the SSE4.2 three-stream path (tests and benchmarks)."""
    _require(kb_crc32c_sse42_available(), "SSE4.2/PCLMULQDQ")
    return _checksum(kb_crc32c_sse42, data, value)


def crc32c_avx2(data, uint32_t value=0):
    """CRC-32C on the AVX2 VPCLMULQDQ folding path (tests and benchmarks)."""
    _require(kb_crc32c_avx2_available(), "AVX2 VPCLMULQDQ")
    return _checksum(kb_crc32c_avx2, data, value)


def crc32c_avx512(data, uint32_t value=0):
    """CRC-32C on the AVX-512 VPCLMULQDQ folding path (tests and benchmarks)."""
    _require(kb_crc32c_avx512_available(), "AVX-512 VPCLMULQDQ")
    return _checksum(kb_crc32c_avx512, data, value)
