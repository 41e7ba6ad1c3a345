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
