# The segment scan's state, shared with batch_validation's follower walk (which does the
# scan's accounting on the batches it validates, so each batch's CRC is computed once):
#   from kbroker._core.segment_scan cimport Scan, scan_start, scan_account, scan_free
# scan_account and the others are defined in segment_scan.pyx (a module cimporting them
# links to kbroker._core.segment_scan at run time). The Scan's owner calls scan_free.
from libc.stdint cimport int32_t, int64_t

from kbroker._core.growbuf cimport Buf
from kbroker._core.records cimport Header


cdef struct EpochStart:
    int32_t epoch
    int64_t start_offset


cdef struct Scan:
    # what the caller knows (inputs)
    int64_t base_offset
    int64_t index_interval_bytes
    int64_t max_relative_offset         # INT32_MAX: the segment's index entries are int32
    bint require_contiguous
    # where the walk is (starting values from the caller, results at the end)
    int64_t position
    int64_t last_entry_position
    int64_t next_offset                 # -1: no batch seen yet, no expectation
    int64_t last_time_index_timestamp
    int64_t max_timestamp
    int64_t offset_of_max_timestamp
    int32_t epoch
    int32_t batch_count
    int32_t producer_batches            # batches with a producer id
    # what it found (outputs)
    Buf offset_index
    Buf time_index
    Buf epoch_starts                    # EpochStart after EpochStart


cdef void scan_start(Scan *s, int64_t base_offset, int64_t position,
                     int64_t index_interval_bytes) noexcept nogil
cdef int scan_account(const Header *h, Scan *s) noexcept nogil
cdef void scan_free(Scan *s) noexcept nogil
cdef list epoch_start_list(const Scan *s)
