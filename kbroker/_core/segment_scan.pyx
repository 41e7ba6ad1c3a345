# cython: language_level=3
"""Segment scanning (recovery, index rebuilding): one nogil pass over a segment's bytes.

Each batch is checked whole (records.check_frame: header sanity and CRC-32C) and then
accounted for (scan_account: offsets increasing, the sparse index entries, leader epoch
changes); batch_validation's follower walk shares the accounting through
segment_scan.pxd, without the segment's bound (Scan.max_relative_offset: no offset
more than INT32_MAX above the base offset; a follower's offsets are 64-bit). Index
entries are written big-endian into growable buffers, as they lie in the index files:

    offset index entry   relative offset int32 | position int32
    time index entry     max timestamp so far int64 | relative offset int32

and each leader epoch change as an EpochStart. Python sees them once, at the end.
"""

from libc.stdint cimport int64_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdlib cimport free
from libc.string cimport memset

from kbroker._core.growbuf cimport buf_put
from kbroker._core.records cimport (
    LOG_OVERHEAD,
    ST_NO_MEMORY,
    ST_OFFSET_ORDER,
    ST_OK,
    Header,
    check_frame,
    kb_store_be32,
    kb_store_be64,
    status_message,
)


cdef void scan_start(Scan *s, int64_t base_offset, int64_t position,
                     int64_t index_interval_bytes) noexcept nogil:
    """A scan of the segment based at base_offset from `position`, with no batch seen."""
    memset(s, 0, sizeof(Scan))
    s.base_offset = base_offset
    s.index_interval_bytes = index_interval_bytes
    s.max_relative_offset = 0x7FFFFFFF
    s.position = s.last_entry_position = position
    s.next_offset = -1
    s.last_time_index_timestamp = -1
    s.max_timestamp = -1
    s.offset_of_max_timestamp = -1
    s.epoch = -1


cdef void scan_free(Scan *s) noexcept nogil:
    free(s.offset_index.data)
    free(s.time_index.data)
    free(s.epoch_starts.data)


cdef int scan_index_entry(Scan *s, int64_t last_offset) noexcept nogil:
    """The index entries for the batch at s.position (Kafka's LogSegment.recover)."""
    cdef unsigned char entry[12]
    kb_store_be32(entry, <uint32_t>(last_offset - s.base_offset))
    kb_store_be32(entry + 4, <uint32_t>s.position)
    if buf_put(&s.offset_index, entry, 8) != 0:
        return ST_NO_MEMORY
    if s.max_timestamp > s.last_time_index_timestamp:
        kb_store_be64(entry, <uint64_t>s.max_timestamp)
        kb_store_be32(entry + 8, <uint32_t>(s.offset_of_max_timestamp - s.base_offset))
        if buf_put(&s.time_index, entry, 12) != 0:
            return ST_NO_MEMORY
        s.last_time_index_timestamp = s.max_timestamp
    s.last_entry_position = s.position
    return ST_OK


cdef int scan_account(const Header *h, Scan *s) noexcept nogil:
    """Account for the checked batch h at s.position; ST_OFFSET_ORDER when its offsets do
    not follow the batches before it (nothing accounted then), ST_NO_MEMORY."""
    cdef EpochStart e
    cdef int st
    cdef int64_t last_offset = h.base_offset + h.last_offset_delta
    if (h.base_offset < s.base_offset or h.last_offset_delta < 0
            or last_offset - s.base_offset > s.max_relative_offset
            or (s.next_offset >= 0 and h.base_offset < s.next_offset)
            or (s.require_contiguous and s.next_offset >= 0 and h.base_offset != s.next_offset)):
        return ST_OFFSET_ORDER
    if h.max_timestamp > s.max_timestamp:
        s.max_timestamp = h.max_timestamp
        s.offset_of_max_timestamp = last_offset
    if s.position - s.last_entry_position > s.index_interval_bytes:
        st = scan_index_entry(s, last_offset)
        if st != ST_OK:
            return st
    if h.partition_leader_epoch >= 0 and h.partition_leader_epoch > s.epoch:
        s.epoch = h.partition_leader_epoch
        e.epoch = s.epoch
        e.start_offset = h.base_offset
        if buf_put(&s.epoch_starts, &e, sizeof(e)) != 0:
            return ST_NO_MEMORY
    if h.producer_id >= 0:
        s.producer_batches += 1
    s.next_offset = last_offset + 1
    s.batch_count += 1
    s.position += <int64_t>h.batch_length + LOG_OVERHEAD
    return ST_OK


cdef int scan_batch(const unsigned char *p, int64_t avail, Scan *s) noexcept nogil:
    """Check the batch at p (s.position) and account for it; a status on the first fault."""
    cdef Header h
    cdef int st = check_frame(p, avail, &h)
    if st != ST_OK:
        return st
    return scan_account(&h, s)


cdef int scan_all(const unsigned char *buf, int64_t n, Scan *s) noexcept nogil:
    """Walk batches from s.position to the end of buf; stop at the first bad one."""
    cdef int st
    while s.position < n:
        st = scan_batch(buf + s.position, n - s.position, s)
        if st != ST_OK:
            return st
    return ST_OK


cdef class SegmentScan:
    """Result of scan_segment: the valid prefix and the index entries to write for it."""

    cdef readonly long long valid_bytes
    cdef readonly int batch_count
    cdef readonly long long next_offset
    cdef readonly long long max_timestamp
    cdef readonly long long offset_of_max_timestamp
    cdef readonly long long bytes_since_last_index_entry
    cdef readonly bytes offset_index_entries
    cdef readonly bytes time_index_entries
    cdef readonly list epoch_starts
    cdef readonly int producer_batches
    cdef readonly object error

    def __repr__(self):
        return (f"SegmentScan(valid_bytes={self.valid_bytes}, batch_count={self.batch_count}, "
                f"next_offset={self.next_offset}, error={self.error!r})")


cdef list epoch_start_list(const Scan *s):
    """[(epoch, start_offset)] of the leader epoch changes the scan saw."""
    cdef const EpochStart *e = <const EpochStart *>s.epoch_starts.data
    cdef Py_ssize_t i
    return [(e[i].epoch, e[i].start_offset)
            for i in range(s.epoch_starts.size // <Py_ssize_t>sizeof(EpochStart))]


cdef SegmentScan scan_result(const Scan *s, int st):
    cdef SegmentScan r = SegmentScan.__new__(SegmentScan)
    r.valid_bytes = s.position
    r.batch_count = s.batch_count
    r.producer_batches = s.producer_batches
    r.next_offset = s.next_offset
    r.max_timestamp = s.max_timestamp
    r.offset_of_max_timestamp = s.offset_of_max_timestamp
    r.bytes_since_last_index_entry = s.position - s.last_entry_position
    r.offset_index_entries = PyBytes_FromStringAndSize(<const char *>s.offset_index.data,
                                                       s.offset_index.size)
    r.time_index_entries = PyBytes_FromStringAndSize(<const char *>s.time_index.data,
                                                     s.time_index.size)
    r.epoch_starts = epoch_start_list(s)
    r.error = None if st == ST_OK else status_message(st)
    return r


def scan_segment(const unsigned char[::1] buf, long long base_offset, long long start_position=0,
                 long long expected_next_offset=-1, long long index_interval_bytes=4096,
                 long long last_time_index_timestamp=-1, long long max_timestamp=-1,
                 long long offset_of_max_timestamp=-1, int last_epoch=-1,
                 bint require_contiguous=False, long long max_relative_offset=0x7FFFFFFF):
    """Walk a segment's bytes from start_position, batch by batch, checking CRCs.

    Stops at the first invalid or torn batch. Builds the sparse offset index entries
    (relative last offset int32, position int32) and time index entries (max timestamp
    so far int64, relative offset int32) as Kafka's LogSegment.recover does, and the
    leader epoch changes [(epoch, start_offset)] seen after `last_epoch`. A batch whose
    last offset is more than max_relative_offset above base_offset (the int32 of the index
    entries) is out of order. One pass without the GIL.
    """
    cdef int64_t n = buf.shape[0]
    cdef const unsigned char *b = &buf[0] if n > 0 else NULL
    cdef Scan s
    cdef int st
    if start_position < 0 or start_position > n:
        raise ValueError(f"start_position {start_position} outside the {n} bytes given")
    scan_start(&s, base_offset, start_position, index_interval_bytes)
    s.require_contiguous = require_contiguous
    s.max_relative_offset = max_relative_offset
    s.next_offset = expected_next_offset
    s.last_time_index_timestamp = last_time_index_timestamp
    s.max_timestamp = max_timestamp
    s.offset_of_max_timestamp = offset_of_max_timestamp
    s.epoch = last_epoch
    try:
        with nogil:
            st = scan_all(b, n, &s)
        if st == ST_NO_MEMORY:
            raise MemoryError()
        return scan_result(&s, st)
    finally:
        scan_free(&s)
