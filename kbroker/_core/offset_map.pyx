# cython: language_level=3
"""The log cleaner's offset map (Kafka's SkimpyOffsetMap): for each key of the dirty
section of a log, the offset of its latest record.

Keys are not stored, only a 128-bit hash of each (Kafka keeps 16 bytes of MD5; here
MurmurHash3 x64 128, seed 0), so a slot is 24 bytes and `memory` bytes hold
memory // 24 slots. Two keys with the same hash would share a slot: with 128 bits the
odds are negligible, as Kafka accepts for MD5.

    slot: hash1 uint64 | hash2 uint64 | offset int64     (hash1 = hash2 = 0: empty)

Open addressing with linear probing from hash1 % slots. The table starts small and
doubles (rehashing, without the GIL) whenever it is half full, up to `memory` bytes
(max_slots): a cleaning uses memory for the keys it meets, its probes stay within the
CPU caches as long as the keys fit, and freeing it is cheap. At max_slots the cleaner
fills it up to log.cleaner.io.buffer.load.factor (beyond it, probes grow long), so a probe
always ends at the key or an empty slot. `latest_offset` is the last offset put (or
advanced to with update_latest_offset): records above it were not seen when the map was
built, and the cleaner keeps them.

The map is freed with the cleaning that made it: release() frees it without the GIL
(unmapping a large table takes milliseconds the event loop must not wait for).

MurmurHash3 x64 128 (Austin Appleby, public domain): 16-byte little-endian blocks k1, k2:
k1 *= c1; k1 = rotl(k1, 31); k1 *= c2; h1 ^= k1; h1 = rotl(h1, 27); h1 += h2;
h1 = h1 * 5 + 0x52dce729; k2 *= c2; k2 = rotl(k2, 33); k2 *= c1; h2 ^= k2;
h2 = rotl(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5; then the 1-15 tail bytes the
same way without the mixing into h; h1 ^= len; h2 ^= len; h1 += h2; h2 += h1;
fmix64 both; h1 += h2; h2 += h1. c1 = 0x87c37b91114253d5, c2 = 0x4cf5ad432745937f.
"""

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free

SLOT_SIZE = sizeof(Slot)

cdef enum:
    INITIAL_SLOTS = 1 << 14


cdef extern from "kb_endian.h" nogil:
    uint64_t kb_load_le64(const void *p)


cdef inline uint64_t rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t fmix64(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= 0xc4ceb9fe1a85ec53ULL
    k ^= k >> 33
    return k


cdef void murmur3_128(const unsigned char *data, Py_ssize_t length, uint64_t *out1,
                      uint64_t *out2) noexcept nogil:
    cdef uint64_t c1 = 0x87c37b91114253d5ULL
    cdef uint64_t c2 = 0x4cf5ad432745937fULL
    cdef uint64_t h1 = 0, h2 = 0, k1, k2
    cdef Py_ssize_t blocks = length // 16, i
    cdef const unsigned char *tail = data + blocks * 16
    cdef int rest = length & 15
    for i in range(blocks):
        k1 = kb_load_le64(data + i * 16)
        k2 = kb_load_le64(data + i * 16 + 8)
        k1 *= c1
        k1 = rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
        h1 = rotl64(h1, 27)
        h1 += h2
        h1 = h1 * 5 + 0x52dce729
        k2 *= c2
        k2 = rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
        h2 = rotl64(h2, 31)
        h2 += h1
        h2 = h2 * 5 + 0x38495ab5
    k1 = 0
    k2 = 0
    for i in range(rest - 1, 7, -1):
        k2 ^= <uint64_t>tail[i] << ((i - 8) * 8)
    if rest > 8:
        k2 *= c2
        k2 = rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
    for i in range((rest if rest < 8 else 8) - 1, -1, -1):
        k1 ^= <uint64_t>tail[i] << (i * 8)
    if rest > 0:
        k1 *= c1
        k1 = rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
    h1 ^= <uint64_t>length
    h2 ^= <uint64_t>length
    h1 += h2
    h2 += h1
    h1 = fmix64(h1)
    h2 = fmix64(h2)
    h1 += h2
    h2 += h1
    out1[0] = h1
    out2[0] = h2


def murmur3_x64_128(data) -> tuple:
    """(h1, h2) of MurmurHash3 x64 128 with seed 0 (tests compare it with reference values)."""
    cdef Py_buffer view
    cdef uint64_t h1, h2
    PyObject_GetBuffer(data, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        murmur3_128(<const unsigned char *>view.buf, view.len, &h1, &h2)
    finally:
        PyBuffer_Release(&view)
    return h1, h2


cdef class OffsetMap:
    """Key -> latest offset for one cleaning; see the module docstring."""

    def __cinit__(self, long long memory):
        self.max_slots = max(memory // <long long>sizeof(Slot), 1)
        self.slots = min(self.max_slots, INITIAL_SLOTS)
        self.table = <Slot *>calloc(self.slots, sizeof(Slot))
        if self.table == NULL:
            raise MemoryError(f"offset map of {self.slots} slots")
        self.size = 0
        self.latest_offset = -1

    def __dealloc__(self):
        free(self.table)

    def release(self) -> None:
        """Free the table now, without the GIL (the map is empty afterwards)."""
        cdef Slot *table = self.table
        self.table = <Slot *>calloc(1, sizeof(Slot))
        self.slots = 1
        self.size = 0
        with nogil:
            free(table)

    cdef Slot *_find(self, uint64_t h1, uint64_t h2) noexcept nogil:
        """The slot holding this hash, or the empty slot where it would go (NULL: full)."""
        cdef Py_ssize_t i = <Py_ssize_t>(h1 % <uint64_t>self.slots), n
        cdef Slot *s
        self.lookups += 1
        for n in range(self.slots):
            s = &self.table[i]
            self.probes += 1
            if (s.hash1 == h1 and s.hash2 == h2) or (s.hash1 == 0 and s.hash2 == 0):
                return s
            i += 1
            if i == self.slots:
                i = 0
        return NULL

    cdef int _grow(self) noexcept nogil:
        """Double the table (at most max_slots), rehashing every key: 0, or -1 when no
        memory (the map stays as it was)."""
        cdef Py_ssize_t slots = min(self.slots * 2, self.max_slots), i, j
        cdef Slot *old = self.table
        cdef Py_ssize_t old_slots = self.slots
        cdef Slot *table = <Slot *>calloc(slots, sizeof(Slot))
        if table == NULL:
            return -1
        for i in range(old_slots):
            if old[i].hash1 == 0 and old[i].hash2 == 0:
                continue
            j = <Py_ssize_t>(old[i].hash1 % <uint64_t>slots)
            while table[j].hash1 != 0 or table[j].hash2 != 0:
                j += 1
                if j == slots:
                    j = 0
            table[j] = old[i]
        self.table = table
        self.slots = slots
        free(old)
        return 0

    cdef int put_c(self, const unsigned char *key, Py_ssize_t length, int64_t offset) noexcept nogil:
        """Record `offset` as the key's latest: 0, or -1 when the map is full."""
        cdef uint64_t h1, h2
        murmur3_128(key, length, &h1, &h2)
        if h1 == 0 and h2 == 0:
            h2 = 1  # the empty slot's mark
        if self.size * 2 >= self.slots and self.slots < self.max_slots:
            self._grow()
        cdef Slot *s = self._find(h1, h2)
        if s == NULL:
            return -1
        if s.hash1 == 0 and s.hash2 == 0:
            s.hash1 = h1
            s.hash2 = h2
            self.size += 1
        s.offset = offset
        self.latest_offset = offset
        return 0

    cdef int64_t get_c(self, const unsigned char *key, Py_ssize_t length) noexcept nogil:
        """The key's latest offset, or -1."""
        cdef uint64_t h1, h2
        murmur3_128(key, length, &h1, &h2)
        if h1 == 0 and h2 == 0:
            h2 = 1
        cdef Slot *s = self._find(h1, h2)
        if s == NULL or (s.hash1 == 0 and s.hash2 == 0):
            return -1
        return s.offset

    def put(self, key, long long offset) -> None:
        cdef Py_buffer view
        cdef int st
        PyObject_GetBuffer(key, &view, PyBUF_ANY_CONTIGUOUS)
        try:
            st = self.put_c(<const unsigned char *>view.buf, view.len, offset)
        finally:
            PyBuffer_Release(&view)
        if st != 0:
            raise OverflowError(f"the offset map's {self.slots} slots are full")

    def get(self, key) -> int:
        cdef Py_buffer view
        PyObject_GetBuffer(key, &view, PyBUF_ANY_CONTIGUOUS)
        try:
            return self.get_c(<const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    def update_latest_offset(self, long long offset) -> None:
        self.latest_offset = offset

    @property
    def utilization(self) -> float:
        """How full the map may yet get: keys over the most slots it may have."""
        return self.size / self.max_slots

    def __len__(self):
        return self.size

    def __repr__(self):
        return (f"OffsetMap(slots={self.slots}, max_slots={self.max_slots}, size={self.size}, "
                f"latest_offset={self.latest_offset})")
