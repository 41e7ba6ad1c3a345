# The log cleaner's offset map (offset_map.pyx): key hash -> latest offset, shared by
# cimport with compaction.pyx, which fills and reads it without the GIL.
from libc.stdint cimport int64_t, uint64_t


cdef struct Slot:
    uint64_t hash1      # the key's 128-bit hash; 0, 0: an empty slot
    uint64_t hash2
    int64_t offset


cdef class OffsetMap:
    cdef Slot *table
    cdef readonly Py_ssize_t slots
    cdef readonly Py_ssize_t max_slots
    cdef readonly Py_ssize_t size
    cdef readonly long long latest_offset
    cdef readonly long long lookups
    cdef readonly long long probes

    cdef Slot *_find(self, uint64_t h1, uint64_t h2) noexcept nogil
    cdef int _grow(self) noexcept nogil
    cdef int put_c(self, const unsigned char *key, Py_ssize_t length, int64_t offset) noexcept nogil
    cdef int64_t get_c(self, const unsigned char *key, Py_ssize_t length) noexcept nogil
