"""CRC-32C (Castagnoli), the checksum of Kafka's record batch v2.

The C in native/crc32c.c does the work; it picks its fastest path once, when
this module loads. Python callers use crc32c(); Cython modules cimport
crc32c_update (see crc32c.pxd) and call it without the GIL.

Every function takes the CRC of the bytes before `data` (0 to start), so
crc32c(b, crc32c(a)) == crc32c(a + b). `data` is any C-contiguous buffer
(bytes, bytearray, memoryview, mmap, array); it is read in place, never copied.
The GIL is released for buffers of GIL_RELEASE_BYTES or more.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint32_t


cdef extern from "crc32c.h" nogil:
    uint32_t kb_crc32c(uint32_t crc, const void *data, size_t length)
    uint32_t kb_crc32c_sw(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_hw_available()
    uint32_t kb_crc32c_hw(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_sse42_available()
    uint32_t kb_crc32c_sse42(uint32_t crc, const void *data, size_t length)
    int kb_crc32c_avx512_available()
    uint32_t kb_crc32c_avx512(uint32_t crc, const void *data, size_t length)
    const char *kb_crc32c_implementation()


ctypedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t length) noexcept nogil

cdef enum:
    _GIL_RELEASE_BYTES = 64 * 1024

GIL_RELEASE_BYTES = _GIL_RELEASE_BYTES
HARDWARE = bool(kb_crc32c_hw_available())
IMPLEMENTATION = kb_crc32c_implementation().decode("ascii")


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
    """CRC-32C of `data` continuing from `value`, on the fastest path."""
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


def crc32c_avx512(data, uint32_t value=0):
    """CRC-32C on the AVX-512 VPCLMULQDQ folding path (tests and benchmarks)."""
    _require(kb_crc32c_avx512_available(), "AVX-512 VPCLMULQDQ")
    return _checksum(kb_crc32c_avx512, data, value)
