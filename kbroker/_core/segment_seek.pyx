# cython: language_level=3
"""Seeks in a segment: header walks over a segment file descriptor (offset -> position,
timestamp -> position, the tail's next offset and max timestamp), and the timestamps of
one batch's records (ListOffsets by timestamp inside a batch).

The walks read batch headers only (no CRC), through a 16 KiB read-ahead Cursor
(segment_seek.pxd; record_decode's read_producer_batches walks with it too), without
the GIL; a short read ends a walk where the file's whole batches end.
"""

from libc.stdint cimport int32_t, int64_t
from posix.unistd cimport pread

from kbroker._core.records cimport (
    HEADER_SIZE,
    LAST_OFFSET_DELTA_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_POS,
    kb_load_be32,
    kb_load_be64,
    read_varlong,
)

from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode


cdef const unsigned char *cursor_header(Cursor *c, int64_t pos, int64_t end) noexcept nogil:
    """The 61 header bytes at pos (reading ahead), or NULL on a short file / error."""
    cdef int64_t want, got
    cdef ssize_t r
    if pos >= c.buf_pos and pos + HEADER_SIZE <= c.buf_pos + c.buf_len:
        return c.buf + (pos - c.buf_pos)
    want = end - pos
    if want > CURSOR_BUF:
        want = CURSOR_BUF
    if want < HEADER_SIZE:
        return NULL
    got = 0
    while got < want:
        r = pread(c.fd, c.buf + got, want - got, pos + got)
        if r <= 0:
            break
        got += r
    c.buf_pos = pos
    c.buf_len = got
    if got < HEADER_SIZE:
        return NULL
    return c.buf


cdef enum WalkMode:
    WALK_ALL = 0         # to the end: count, next offset, max timestamp
    WALK_TO_OFFSET = 1   # stop at the first batch whose last offset >= target
    WALK_TO_TIMESTAMP = 2  # stop at the first batch whose maxTimestamp >= target

cdef struct Walk:
    bint found
    int64_t position     # where the walk stopped (the found batch, or the end)
    int64_t base_offset  # of the found batch
    int64_t last_offset
    int64_t size
    int64_t timestamp    # maxTimestamp of the found batch
    int32_t count        # batches passed
    int64_t next_offset  # after the last batch passed (-1: none)
    int64_t max_timestamp
    int64_t offset_of_max_timestamp


cdef void walk_headers(int fd, int64_t start, int64_t end, int mode, int64_t target,
                       Walk *w) noexcept nogil:
    """Walk batch headers (no CRC) through a read-ahead buffer; see WalkMode."""
    cdef Cursor c
    cdef const unsigned char *p
    cdef int64_t pos = start, size, base, last, ts
    cursor_start(&c, fd)
    w.found = False
    w.count = 0
    w.next_offset = -1
    w.max_timestamp = -1
    w.offset_of_max_timestamp = -1
    while pos < end:
        p = cursor_header(&c, pos, end)
        if p == NULL:
            break
        size = <int64_t>(<int32_t>kb_load_be32(p + LENGTH_POS)) + LOG_OVERHEAD
        if size < HEADER_SIZE or (mode == WALK_ALL and pos + size > end):
            break
        base = <int64_t>kb_load_be64(p)
        last = base + <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS)
        ts = <int64_t>kb_load_be64(p + MAX_TIMESTAMP_POS)
        if (mode == WALK_TO_OFFSET and last >= target) or (mode == WALK_TO_TIMESTAMP and ts >= target):
            w.found = True
            w.base_offset = base
            w.last_offset = last
            w.size = size
            w.timestamp = ts
            break
        if ts > w.max_timestamp:
            w.max_timestamp = ts
            w.offset_of_max_timestamp = last
        w.next_offset = last + 1
        w.count += 1
        pos += size
    w.position = pos


def find_batch(int fd, long long start_position, long long end_position, long long target_offset):
    """First batch at or after start_position whose last offset >= target_offset.

    Returns (position, base_offset, last_offset, size) or None when none exists before
    end_position. Reads headers only, through a small read-ahead buffer.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_TO_OFFSET, target_offset, &w)
    if not w.found:
        return None
    return (w.position, w.base_offset, w.last_offset, w.size)


def find_batch_by_timestamp(int fd, long long start_position, long long end_position,
                            long long target_timestamp):
    """First batch at or after start_position whose maxTimestamp >= target_timestamp.

    Returns (position, base_offset, last_offset, size, max_timestamp) or None.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_TO_TIMESTAMP, target_timestamp, &w)
    if not w.found:
        return None
    return (w.position, w.base_offset, w.last_offset, w.size, w.timestamp)


def record_timestamps(const unsigned char[::1] records, int count, long long base_timestamp):
    """(offset_delta, timestamp) of each record of an uncompressed records section.

    For ListOffsets by timestamp inside one batch (rare path); compressed batches are
    decompressed by the caller first.
    """
    cdef int64_t n = records.shape[0]
    cdef const unsigned char *p = &records[0] if n > 0 else NULL
    cdef const unsigned char *end = p + n
    cdef const unsigned char *q
    cdef int64_t length, ts_delta, offset_delta
    cdef list out = []
    cdef int i
    for i in range(count):
        if read_varlong(&p, end, 5, &length) != 0 or length < 3 or length > end - p:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "bad record length", 0)
        q = p + 1
        if read_varlong(&q, p + length, 10, &ts_delta) != 0 or \
                read_varlong(&q, p + length, 5, &offset_delta) != 0:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "bad record header", 0)
        out.append((offset_delta, base_timestamp + ts_delta))
        p += length
    return out


def scan_headers(int fd, long long start_position, long long end_position):
    """Walk batch headers (no CRC) from start_position to end_position.

    Returns (batch_count, next_offset, max_timestamp, offset_of_max_timestamp, end):
    next_offset is -1 without batches; end is where the walk stopped (== end_position
    unless the file holds a partial batch there). Used to find a loaded segment's next
    offset and the max timestamp of its tail after the last index entry.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_ALL, 0, &w)
    return (w.count, w.next_offset, w.max_timestamp, w.offset_of_max_timestamp, w.position)

