# cython: language_level=3
"""Binary search and sanity checks over Kafka's sparse segment indexes (mmap'd files).

Offset index (.index), 8-byte entries, big-endian:
    relativeOffset int32 | position int32
  relativeOffset = offset - segment base offset; position = byte position in the .log
  of a batch whose offsets are all >= the entry's predecessors'.

Time index (.timeindex), 12-byte entries, big-endian:
    timestamp int64 | relativeOffset int32
  timestamps strictly increase from entry to entry.

Each call scans or searches a whole index in C; Python makes one call per lookup.
"""

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef extern from "kb_endian.h" nogil:
    uint32_t kb_load_be32(const void *p)
    uint64_t kb_load_be64(const void *p)


cdef int64_t largest_at_most(const unsigned char *p, int64_t entries, int stride, bint key64,
                             int64_t target) noexcept nogil:
    """Slot of the largest entry whose key (int32 or int64 at the entry's start) <= target."""
    cdef int64_t lo = 0, hi = entries - 1, mid, found = -1, key
    while lo <= hi:
        mid = (lo + hi) >> 1
        if key64:
            key = <int64_t>kb_load_be64(p + mid * stride)
        else:
            key = <int32_t>kb_load_be32(p + mid * stride)
        if key <= target:
            found = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return found


def offset_index_lookup(const unsigned char[::1] buf, long long entries, long long target_relative):
    """Slot of the largest entry whose relative offset <= target_relative, or -1."""
    cdef int64_t found = -1
    if entries > 0:
        with nogil:
            found = largest_at_most(&buf[0], entries, 8, False, target_relative)
    return found


def time_index_lookup(const unsigned char[::1] buf, long long entries, long long target_timestamp):
    """Slot of the largest entry whose timestamp <= target_timestamp, or -1."""
    cdef int64_t found = -1
    if entries > 0:
        with nogil:
            found = largest_at_most(&buf[0], entries, 12, True, target_timestamp)
    return found


def check_offset_index(const unsigned char[::1] buf, long long entries, long long log_size):
    """True when relative offsets strictly increase and positions increase within the log."""
    cdef int64_t i
    cdef int32_t prev_off = -1, prev_pos = -1, off, pos
    cdef const unsigned char *p
    cdef bint ok = True
    if entries <= 0:
        return True
    p = &buf[0]
    with nogil:
        for i in range(entries):
            off = <int32_t>kb_load_be32(p + i * 8)
            pos = <int32_t>kb_load_be32(p + i * 8 + 4)
            if off <= prev_off or pos <= prev_pos or pos >= log_size:
                ok = False
                break
            prev_off = off
            prev_pos = pos
    return ok


def check_time_index(const unsigned char[::1] buf, long long entries, long long max_relative):
    """True when timestamps strictly increase and relative offsets are within [0, max]."""
    cdef int64_t i, ts, prev_ts = -0x7FFFFFFFFFFFFFFF
    cdef int32_t off, prev_off = -1
    cdef const unsigned char *p
    cdef bint ok = True
    if entries <= 0:
        return True
    p = &buf[0]
    with nogil:
        for i in range(entries):
            ts = <int64_t>kb_load_be64(p + i * 12)
            off = <int32_t>kb_load_be32(p + i * 12 + 8)
            if ts <= prev_ts or off < prev_off or off < 0 or off > max_relative:
                ok = False
                break
            prev_ts = ts
            prev_off = off
    return ok


# -- MappedFile: an index file mapped without holding a descriptor -----------------------

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_FillInfo
from posix.fcntl cimport O_CREAT, O_RDWR, open as c_open
from posix.mman cimport MADV_RANDOM, MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE
from posix.mman cimport madvise, mmap, msync, munmap
from posix.unistd cimport close as c_close, ftruncate

import os as _os


cdef class MappedFile:
    """A whole file mapped shared and writable, its descriptor closed once mapped.

    Kafka's AbstractIndex closes its file after mapping an index; Python's mmap.mmap
    keeps a duplicate descriptor for the mapping's life (until Python 3.13's trackfd),
    which cost a descriptor per open index. This one maps with mmap(2), closes the
    descriptor at once, and reopens the file only to change its length (resize).
    The mapping is a writable buffer; it cannot resize or close while a buffer of it
    is exported (BufferError, as mmap.mmap). No readahead on faults (MADV_RANDOM): an
    index's preallocated tail is a hole, and readahead would fill it page by page.
    """

    cdef unsigned char *data
    cdef Py_ssize_t length
    cdef int exports

    def __cinit__(self, str path, Py_ssize_t length):
        self.data = NULL
        self.length = 0
        self.exports = 0
        self._map(path, length)

    cdef _map(self, str path, Py_ssize_t length):
        cdef bytes bpath = _os.fsencode(path)
        cdef int fd = c_open(bpath, O_RDWR | O_CREAT, 0o644)
        cdef void *p
        if fd < 0:
            raise OSError(_errno(), _os.strerror(_errno()), path)
        try:
            if _os.fstat(fd).st_size != length and ftruncate(fd, length) != 0:
                raise OSError(_errno(), _os.strerror(_errno()), path)
            p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            if p == MAP_FAILED:
                raise OSError(_errno(), _os.strerror(_errno()), path)
        finally:
            c_close(fd)
        madvise(p, length, MADV_RANDOM)
        self.data = <unsigned char *>p
        self.length = length

    def resize(self, str path, Py_ssize_t length):
        """Set the file's length (it is reopened by `path`) and map it whole again."""
        self._unmap()
        self._map(path, length)

    def flush(self):
        if self.data != NULL and msync(self.data, self.length, MS_SYNC) != 0:
            raise OSError(_errno(), _os.strerror(_errno()))

    def close(self):
        self._unmap()

    @property
    def closed(self):
        return self.data == NULL

    cdef _unmap(self):
        if self.exports:
            raise BufferError("cannot close or resize a mapping with exported buffers")
        if self.data != NULL:
            munmap(self.data, self.length)
            self.data = NULL
            self.length = 0

    def __len__(self):
        return self.length

    def __getbuffer__(self, Py_buffer *view, int flags):
        if self.data == NULL:
            raise ValueError("mapping closed")
        PyBuffer_FillInfo(view, self, self.data, self.length, 0, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1

    def __dealloc__(self):
        if self.data != NULL:
            munmap(self.data, self.length)


cdef extern from "errno.h":
    int errno


cdef inline int _errno():
    return errno
