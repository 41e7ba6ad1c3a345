# cython: language_level=3
"""Record batches (v2) decoded straight into Arrow column buffers, for kbroker.spark.

Input: the records bytes of one partition in a Fetch response, i.e. whole batches
back to back, possibly ending in a partial batch (which is ignored):

    pos  size  field
      0     8  baseOffset
      8     4  batchLength (bytes after this field)
     16     1  magic (must be 2)
     17     4  crc (CRC-32C of bytes 21..end)
     21     2  attributes: bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control
     23     4  lastOffsetDelta
     27     8  baseTimestamp
     35     8  maxTimestamp
     57     4  recordCount
     61     -  records (compressed as one block when codec != 0)

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            keyLength varint (-1: null) | key | valueLength varint (-1: null) | value |
            headerCount varint | headers: keyLength varint | key (UTF-8) |
                                          valueLength varint (-1: null) | value

Varints are zigzag LEB128. Output, per record, in Arrow's layouts (little-endian):

    key, value        binary: validity bitmap | int32 offsets (n + 1) | data
    offset            int64
    timestamp         int64 microseconds since the epoch (record timestamp in ms * 1000;
                      the batch's maxTimestamp for LogAppendTime batches)
    timestampType     int32: 0 CreateTime, 1 LogAppendTime (Kafka's TimestampType ids)
    headers           list<struct<key: string, value: binary>>: list validity (null when
                      a record has no headers) | int32 list offsets | struct children:
                      key offsets + data, value validity + offsets + data

`ColumnarRecords.add_records()` appends a whole Fetch answer per call and
`take()` hands the buffers over as `NativeBuffer`s (zero-copy, buffer protocol)
for `pyarrow.py_buffer`. A NativeBuffer whose last reference goes (the Arrow arrays
wrapping it were freed) hands its memory back to the decoder's `BufferPool`, which
lends it to the next batch's column of the same kind: the columns of a steady stream
of batches reuse memory already mapped and touched, instead of growing fresh buffers
(page faults on every page, and a munmap per batch, for buffers past malloc's mmap
threshold). Memory is lent again only once nothing refers to it, so a batch handed
over is never written to afterwards.

Nothing here creates a Python object per record; only
a compressed batch calls back into Python, once per batch, through the
`decompress(codec, records_section) -> bytes` the caller hands over (the reader
passes kbroker.records.compression.decompress with its bound; the core imports
nothing above itself). Control batches (transaction markers) are skipped; their
offsets still advance the position.

As in records.pyx, the walk over batches and records runs without the GIL and
returns a status (Status below); add_records raises once, at the Python
boundary (raise_status: CorruptRecordError, OverflowError, MemoryError), and
takes the GIL back only to inflate a compressed batch.

read_committed: given the Fetch answer's aborted transactions [(producer_id,
first_offset)], batches of a producer whose aborted transaction has begun are skipped
until that producer's ABORT marker, as Kafka's consumer does (CompletedFetch): per
batch, never per record.
"""

import struct

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from kbroker._core.crc32c cimport crc32c_update
from kbroker._core.growbuf cimport Buf, buf_grow, buf_put


from kbroker._core.records cimport (
    ATTRIBUTES_POS,
    BASE_TIMESTAMP_POS,
    CODEC_MASK,
    CONTROL_BIT,
    CRC_POS,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAX_TIMESTAMP_POS,
    PRODUCER_ID_POS,
    RECORD_COUNT_POS,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Record,
    kb_load_be16,
    kb_load_be32,
    kb_load_be64,
    read_record,
    read_varlong,
)


cdef enum:
    MAX_ARROW_BINARY = 0x7FFFFFFF


class CorruptRecordError(ValueError):
    """A fetched record batch is malformed or fails its CRC."""


# --- statuses: the nogil decoder returns one, add_records raises it -------------

cdef enum Status:
    ST_OK = 0
    ST_BATCH_LENGTH = 1     # batchLength below the v2 header size
    ST_MAGIC = 2            # magic other than 2
    ST_CRC = 3
    ST_RECORD_LENGTH = 4    # a record's length varint, or the record past the section
    ST_RECORD = 5           # a record's timestampDelta or offsetDelta varint
    ST_BINARY_LENGTH = 6    # a key, value or header value length
    ST_HEADER_COUNT = 7
    ST_HEADER_KEY = 8
    ST_OVERFLOW = 9         # an Arrow binary column past 2 GiB
    ST_NO_MEMORY = 10       # a column buffer could not grow
    ST_COMPRESSED = 11      # not a fault: the batch stopped at needs Python's decompress


# --- growable byte buffers (nogil: 0, or -1 when out of memory) and the zero-copy hand-over

cdef inline int put_i32(Buf *b, int32_t v) noexcept nogil:
    return buf_put(b, &v, 4)


cdef inline int put_i64(Buf *b, int64_t v) noexcept nogil:
    return buf_put(b, &v, 8)


cdef inline int put_bit(Buf *b, Py_ssize_t i, bint valid) noexcept nogil:
    """Set bit i of a validity bitmap (LSB first), growing it with zero bytes."""
    cdef Py_ssize_t byte = i >> 3
    if byte >= b.size:
        if byte >= b.cap and buf_grow(b, byte + 1 - b.size) != 0:
            return -1
        memset(b.data + b.size, 0, byte + 1 - b.size)
        b.size = byte + 1
    if valid:
        b.data[byte] |= <unsigned char>(1 << (i & 7))
    return 0


cdef inline int32_t last_i32(const Buf *b) noexcept nogil:
    cdef int32_t v
    memcpy(&v, b.data + b.size - 4, 4)
    return v


cdef enum:
    # the column buffers of Columns ("slots"), in a fixed order: a BufferPool keeps
    # spares per slot
    KEY_VALID, KEY_OFFSETS, KEY_DATA
    VALUE_VALID, VALUE_OFFSETS, VALUE_DATA
    OFFSETS, TIMESTAMPS, TIMESTAMP_TYPES
    HEADER_VALID, HEADER_OFFSETS
    HEADER_KEY_OFFSETS, HEADER_KEY_DATA
    HEADER_VALUE_VALID, HEADER_VALUE_OFFSETS, HEADER_VALUE_DATA
    NUM_SLOTS


cdef enum:
    POOL_DEPTH = 2          # spare buffers a pool keeps per slot


cdef class BufferPool:
    """Column buffers handed back by their NativeBuffers, lent again to the next batch.

    Spares are kept per column slot (an int32 offsets buffer is lent to an offsets
    column, a data buffer to a data column), at most POOL_DEPTH per slot and at most
    `max_bytes` of capacity in all; a buffer handed back past either is freed. Used
    with the GIL held only (hand-back happens in a NativeBuffer's dealloc, lending at
    the start of add_records), so decoders of several threads may share one pool.
    """

    cdef Buf spare[NUM_SLOTS][POOL_DEPTH]
    cdef int spares[NUM_SLOTS]
    cdef readonly Py_ssize_t max_bytes
    cdef readonly Py_ssize_t held_bytes
    cdef readonly Py_ssize_t lent

    def __cinit__(self, Py_ssize_t max_bytes=256 << 20):
        self.max_bytes = max_bytes

    def __dealloc__(self):
        cdef int slot, i
        for slot in range(NUM_SLOTS):
            for i in range(self.spares[slot]):
                free(self.spare[slot][i].data)

    cdef void give_back(self, int slot, unsigned char *data, Py_ssize_t cap) noexcept:
        if data == NULL:
            return
        if self.spares[slot] >= POOL_DEPTH or self.held_bytes + cap > self.max_bytes:
            free(data)
            return
        self.spare[slot][self.spares[slot]].data = data
        self.spare[slot][self.spares[slot]].cap = cap
        self.spares[slot] += 1
        self.held_bytes += cap

    cdef void lend(self, int slot, Buf *b) noexcept:
        """An empty b (data NULL) takes the spare handed back last, when there is one."""
        cdef Buf *s
        if self.spares[slot] == 0:
            return
        self.spares[slot] -= 1
        s = &self.spare[slot][self.spares[slot]]
        b.data = s.data
        b.cap = s.cap
        b.size = 0
        self.held_bytes -= s.cap
        self.lent += 1


cdef class NativeBuffer:
    """Memory taken over from a ColumnarRecords column; exposes the buffer protocol.
    Freed, or handed back to its pool, when its last reference goes."""

    cdef unsigned char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t cap
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]
    cdef BufferPool pool
    cdef int slot

    def __dealloc__(self):
        if self.pool is not None:
            self.pool.give_back(self.slot, self.data, self.cap)
        else:
            free(self.data)

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer *view, int flags):
        self.shape[0] = self.size
        self.strides[0] = 1
        view.buf = self.data if self.data != NULL else <void *>&self.shape[0]
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef NativeBuffer take_buf(Buf *b, BufferPool pool, int slot):
    cdef NativeBuffer nb = NativeBuffer.__new__(NativeBuffer)
    nb.data = b.data
    nb.size = b.size
    nb.cap = b.cap
    nb.pool = pool
    nb.slot = slot
    b.data = NULL
    b.size = 0
    b.cap = 0
    return nb


# --- the decoder: columns, and the nogil walk that fills them ------------------

cdef struct Columns:
    Buf key_valid, key_offsets, key_data
    Buf value_valid, value_offsets, value_data
    Buf offsets, timestamps, timestamp_types
    Buf header_valid, header_offsets
    Buf header_key_offsets, header_key_data
    Buf header_value_valid, header_value_offsets, header_value_data
    Py_ssize_t num_rows
    Py_ssize_t key_nulls, value_nulls, header_nulls, header_value_nulls
    Py_ssize_t num_headers
    Py_ssize_t data_bytes
    bint include_headers


cdef struct Walk:
    # the request
    int64_t start
    int64_t end
    bint check_crcs
    # progress
    Py_ssize_t position     # of the next batch
    int64_t next_offset     # where the next Fetch starts
    int64_t first           # offset of the first record appended (-1: none)
    # the batch the walk is in (the one a fault or ST_COMPRESSED names)
    Py_ssize_t batch_position
    int64_t batch_size
    int magic
    int64_t base_offset
    int64_t batch_next      # its last offset + 1
    int attributes
    int32_t count
    int64_t timestamp       # baseTimestamp, or maxTimestamp for LogAppendTime
    # read_committed: the aborted transactions, (producer id, first offset) pairs in
    # first-offset order, and the producers whose aborted transaction has begun
    const int64_t *aborted
    Py_ssize_t aborted_count
    Py_ssize_t next_aborted
    Buf aborted_producers   # int64 producer ids


cdef int put_binary(Columns *c, const unsigned char **pp, const unsigned char *end, Buf *valid,
                    Buf *offsets, Buf *data, Py_ssize_t row, Py_ssize_t *nulls) noexcept nogil:
    """One length-prefixed (varint, -1 = null) byte string into an Arrow binary column."""
    cdef int64_t length
    if read_varlong(pp, end, 5, &length) != 0 or length < -1 or length > end - pp[0]:
        return ST_BINARY_LENGTH
    if length < 0:
        nulls[0] += 1
        if put_bit(valid, row, False) != 0 or put_i32(offsets, last_i32(offsets)) != 0:
            return ST_NO_MEMORY
        return ST_OK
    if put_bit(valid, row, True) != 0:
        return ST_NO_MEMORY
    if data.size + length > MAX_ARROW_BINARY:
        return ST_OVERFLOW
    if buf_put(data, pp[0], length) != 0 or put_i32(offsets, <int32_t>data.size) != 0:
        return ST_NO_MEMORY
    c.data_bytes += length
    pp[0] += length
    return ST_OK


cdef int put_headers(Columns *c, const unsigned char *p, const unsigned char *end,
                     Py_ssize_t row) noexcept nogil:
    cdef int64_t count, length, i
    cdef int st
    if read_varlong(&p, end, 5, &count) != 0 or count < 0 or count > end - p:
        return ST_HEADER_COUNT
    if count == 0:
        c.header_nulls += 1
        if (put_bit(&c.header_valid, row, False) != 0
                or put_i32(&c.header_offsets, <int32_t>c.num_headers) != 0):
            return ST_NO_MEMORY
        return ST_OK
    if put_bit(&c.header_valid, row, True) != 0:
        return ST_NO_MEMORY
    for i in range(count):
        if read_varlong(&p, end, 5, &length) != 0 or length < 0 or length > end - p:
            return ST_HEADER_KEY
        if (buf_put(&c.header_key_data, p, length) != 0
                or put_i32(&c.header_key_offsets, <int32_t>c.header_key_data.size) != 0):
            return ST_NO_MEMORY
        p += length
        st = put_binary(c, &p, end, &c.header_value_valid, &c.header_value_offsets,
                        &c.header_value_data, c.num_headers, &c.header_value_nulls)
        if st != ST_OK:
            return st
        c.num_headers += 1
    if put_i32(&c.header_offsets, <int32_t>c.num_headers) != 0:
        return ST_NO_MEMORY
    return ST_OK


cdef int put_row(Columns *c, const unsigned char *p, const unsigned char *end, int64_t offset,
                 int64_t timestamp_ms, bint log_append) noexcept nogil:
    cdef Py_ssize_t row = c.num_rows
    cdef int st = put_binary(c, &p, end, &c.key_valid, &c.key_offsets, &c.key_data, row,
                             &c.key_nulls)
    if st == ST_OK:
        st = put_binary(c, &p, end, &c.value_valid, &c.value_offsets, &c.value_data, row,
                        &c.value_nulls)
    if st != ST_OK:
        return st
    if (put_i64(&c.offsets, offset) != 0 or put_i64(&c.timestamps, timestamp_ms * 1000) != 0
            or put_i32(&c.timestamp_types, 1 if log_append else 0) != 0):
        return ST_NO_MEMORY
    if c.include_headers:
        st = put_headers(c, p, end, row)
        if st != ST_OK:
            return st
    c.num_rows = row + 1
    return ST_OK


cdef int put_records(Columns *c, const unsigned char *p, Py_ssize_t n, Walk *w) noexcept nogil:
    """The records of w's batch (an uncompressed records section of n bytes at p) within
    w.start <= offset < w.end."""
    cdef const unsigned char *stop = p + n
    cdef const unsigned char *rec_end
    cdef int64_t length, ts_delta, offset_delta, offset
    cdef bint log_append = w.attributes & TIMESTAMP_TYPE_BIT
    cdef int32_t i
    cdef int st
    for i in range(w.count):
        if read_varlong(&p, stop, 5, &length) != 0 or length < 3 or length > stop - p:
            return ST_RECORD_LENGTH
        rec_end = p + length
        p += 1  # record attributes (unused)
        if read_varlong(&p, rec_end, 10, &ts_delta) != 0 or \
                read_varlong(&p, rec_end, 5, &offset_delta) != 0:
            return ST_RECORD
        offset = w.base_offset + offset_delta
        if offset >= w.end:
            return ST_OK
        if offset >= w.start:
            if w.first < 0:
                w.first = offset
            st = put_row(c, p, rec_end, offset,
                         w.timestamp if log_append else w.timestamp + ts_delta, log_append)
            if st != ST_OK:
                return st
        p = rec_end
    return ST_OK


cdef bint is_abort_marker(const unsigned char *p, int64_t size) noexcept nogil:
    """Whether the control batch of `size` bytes at p holds an ABORT marker (its record's
    key: version int16 | type int16, 0 = ABORT)."""
    cdef Record r
    cdef const unsigned char *q = p + HEADER_SIZE
    if (kb_load_be16(p + ATTRIBUTES_POS) & CODEC_MASK) != 0:
        return False
    if read_record(&q, p + size, &r) != 0 or r.key_length < 4:
        return False
    return <int16_t>kb_load_be16(r.key + 2) == 0


cdef Py_ssize_t find_producer(const Buf *producers, int64_t producer_id) noexcept nogil:
    cdef const int64_t *ids = <const int64_t *>producers.data
    cdef Py_ssize_t i
    for i in range(producers.size // <Py_ssize_t>sizeof(int64_t)):
        if ids[i] == producer_id:
            return i
    return -1


cdef int in_aborted_transaction(const unsigned char *p, Walk *w) noexcept nogil:
    """read_committed, for w's batch at p: 1 when it belongs to an aborted transaction
    (skip it), 0 otherwise, -1 out of memory. An ABORT marker ends its producer's."""
    cdef int64_t producer_id = <int64_t>kb_load_be64(p + PRODUCER_ID_POS)
    cdef int attributes = kb_load_be16(p + ATTRIBUTES_POS)
    cdef Py_ssize_t i, n
    if producer_id < 0:
        return 0
    while w.next_aborted < w.aborted_count and w.aborted[2 * w.next_aborted + 1] < w.batch_next:
        if find_producer(&w.aborted_producers, w.aborted[2 * w.next_aborted]) < 0:
            if buf_put(&w.aborted_producers, &w.aborted[2 * w.next_aborted], sizeof(int64_t)) != 0:
                return -1
        w.next_aborted += 1
    i = find_producer(&w.aborted_producers, producer_id)
    if attributes & CONTROL_BIT:
        if i >= 0 and is_abort_marker(p, w.batch_size):
            n = w.aborted_producers.size // <Py_ssize_t>sizeof(int64_t)
            (<int64_t *>w.aborted_producers.data)[i] = (<int64_t *>w.aborted_producers.data)[n - 1]
            w.aborted_producers.size -= sizeof(int64_t)
        return 0
    return 1 if (attributes & TRANSACTIONAL_BIT) and i >= 0 else 0


cdef inline void batch_done(Walk *w) noexcept nogil:
    w.next_offset = w.batch_next if w.batch_next < w.end else w.end


cdef int put_batches(Columns *c, const unsigned char *buf, Py_ssize_t n, Walk *w) noexcept nogil:
    """Decode batches from w.position until the range, the complete batches or the data end;
    stop with ST_COMPRESSED at a compressed one (w.position is already past it)."""
    cdef const unsigned char *p
    cdef int st
    while w.position + HEADER_SIZE <= n and w.next_offset < w.end:
        p = buf + w.position
        w.batch_position = w.position
        w.batch_size = <int64_t>(<int32_t>kb_load_be32(p + LENGTH_POS)) + LOG_OVERHEAD
        if w.batch_size < HEADER_SIZE:
            return ST_BATCH_LENGTH
        if w.position + w.batch_size > n:
            break  # a partial batch at the end of the response
        if p[MAGIC_POS] != 2:
            w.magic = p[MAGIC_POS]
            return ST_MAGIC
        w.base_offset = <int64_t>kb_load_be64(p)
        w.batch_next = w.base_offset + <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS) + 1
        w.position += w.batch_size
        if w.aborted_count:
            st = in_aborted_transaction(p, w)
            if st < 0:
                return ST_NO_MEMORY
            if st:
                if w.batch_next > w.start:
                    batch_done(w)
                continue
        if w.batch_next <= w.start:
            continue
        if w.check_crcs and crc32c_update(0, p + ATTRIBUTES_POS, w.batch_size - ATTRIBUTES_POS) \
                != kb_load_be32(p + CRC_POS):
            return ST_CRC
        w.attributes = kb_load_be16(p + ATTRIBUTES_POS)
        if not w.attributes & CONTROL_BIT:
            w.count = <int32_t>kb_load_be32(p + RECORD_COUNT_POS)
            if w.attributes & TIMESTAMP_TYPE_BIT:
                w.timestamp = <int64_t>kb_load_be64(p + MAX_TIMESTAMP_POS)
            else:
                w.timestamp = <int64_t>kb_load_be64(p + BASE_TIMESTAMP_POS)
            if w.attributes & CODEC_MASK:
                return ST_COMPRESSED
            st = put_records(c, p + HEADER_SIZE, w.batch_size - HEADER_SIZE, w)
            if st != ST_OK:
                return st
        batch_done(w)
    return ST_OK


cdef int raise_status(int st, const Walk *w) except -1:
    """The exception a fault status stands for (the one place the decoder raises)."""
    if st == ST_NO_MEMORY:
        raise MemoryError()
    if st == ST_OVERFLOW:
        raise OverflowError("column chunk exceeds 2 GiB; take() more often")
    if st == ST_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {w.batch_size} at byte {w.batch_position}")
    if st == ST_MAGIC:
        raise CorruptRecordError(f"record batch magic {w.magic} (only v2 is read)")
    if st == ST_CRC:
        raise CorruptRecordError(f"CRC mismatch in the batch at offset {w.base_offset}")
    what = {ST_RECORD_LENGTH: "bad record length", ST_RECORD: "bad record",
            ST_BINARY_LENGTH: "bad key/value length", ST_HEADER_COUNT: "bad header count",
            ST_HEADER_KEY: "bad header key"}[st]
    raise CorruptRecordError(f"{what} in the batch at {w.base_offset}")


cdef class ColumnarRecords:
    """Arrow column buffers accumulated from fetched record batches of one partition.

    add_records decodes without the GIL; a second thread using the same object
    meanwhile gets a RuntimeError rather than a race. Column memory comes from `pool`
    (a BufferPool of its own when none is given) whenever a spare is there.
    """

    cdef Columns c
    cdef Buf *slots[NUM_SLOTS]
    cdef bint busy
    cdef readonly bint include_headers
    cdef readonly bint check_crcs
    cdef readonly BufferPool pool
    cdef object decompress

    def __cinit__(self, bint include_headers=False, bint check_crcs=True, decompress=None,
                  BufferPool pool=None):
        self.include_headers = include_headers
        self.c.include_headers = include_headers
        self.check_crcs = check_crcs
        self.decompress = decompress
        self.pool = pool if pool is not None else BufferPool()
        self.slots[KEY_VALID] = &self.c.key_valid
        self.slots[KEY_OFFSETS] = &self.c.key_offsets
        self.slots[KEY_DATA] = &self.c.key_data
        self.slots[VALUE_VALID] = &self.c.value_valid
        self.slots[VALUE_OFFSETS] = &self.c.value_offsets
        self.slots[VALUE_DATA] = &self.c.value_data
        self.slots[OFFSETS] = &self.c.offsets
        self.slots[TIMESTAMPS] = &self.c.timestamps
        self.slots[TIMESTAMP_TYPES] = &self.c.timestamp_types
        self.slots[HEADER_VALID] = &self.c.header_valid
        self.slots[HEADER_OFFSETS] = &self.c.header_offsets
        self.slots[HEADER_KEY_OFFSETS] = &self.c.header_key_offsets
        self.slots[HEADER_KEY_DATA] = &self.c.header_key_data
        self.slots[HEADER_VALUE_VALID] = &self.c.header_value_valid
        self.slots[HEADER_VALUE_OFFSETS] = &self.c.header_value_offsets
        self.slots[HEADER_VALUE_DATA] = &self.c.header_value_data

    def __dealloc__(self):
        cdef int slot
        for slot in range(NUM_SLOTS):
            if self.pool is not None:
                self.pool.give_back(slot, self.slots[slot].data, self.slots[slot].cap)
            else:
                free(self.slots[slot].data)

    @property
    def num_rows(self):
        return self.c.num_rows

    @property
    def key_nulls(self):
        return self.c.key_nulls

    @property
    def value_nulls(self):
        return self.c.value_nulls

    @property
    def header_nulls(self):
        return self.c.header_nulls

    @property
    def header_value_nulls(self):
        return self.c.header_value_nulls

    @property
    def num_headers(self):
        return self.c.num_headers

    @property
    def data_bytes(self):
        return self.c.data_bytes

    cdef void _reset(self) noexcept:
        self.c.num_rows = 0
        self.c.key_nulls = self.c.value_nulls = self.c.header_nulls = 0
        self.c.header_value_nulls = 0
        self.c.num_headers = 0
        self.c.data_bytes = 0

    cdef int _prepare(self) except -1:
        """Before rows are added or taken: buffers handed over are replaced by the pool's
        spares (when it has some), and each empty offsets column starts with its 0."""
        cdef int slot
        for slot in range(NUM_SLOTS):
            if self.slots[slot].data == NULL:
                self.pool.lend(slot, self.slots[slot])
        for slot in (KEY_OFFSETS, VALUE_OFFSETS, HEADER_OFFSETS, HEADER_KEY_OFFSETS,
                     HEADER_VALUE_OFFSETS):
            if self.slots[slot].size == 0 and put_i32(self.slots[slot], 0) != 0:
                raise MemoryError()
        return 0

    cdef int _enter(self) except -1:
        if self.busy:
            raise RuntimeError("ColumnarRecords is in use by another thread")
        self.busy = True
        return 0

    def add_records(self, records, int64_t start_offset, int64_t end_offset, aborted=None):
        """Append the records with start_offset <= offset < end_offset from `records`
        (whole v2 batches as fetched). Returns (next_offset, first_offset):
        next_offset is where the next Fetch starts (after the last complete batch,
        or end_offset when reached; start_offset when no complete batch was seen),
        first_offset the offset of the first record appended (-1: none). `aborted`:
        the aborted transactions of a read_committed Fetch, [(producer_id, first_offset)]."""
        cdef Py_buffer view
        cdef Walk w
        cdef bytes pairs = b""
        if aborted:
            ordered = sorted(aborted, key=lambda t: t[1])
            pairs = struct.pack(f"={2 * len(ordered)}q", *(v for t in ordered for v in t))
        self._enter()
        try:
            self._prepare()
            PyObject_GetBuffer(records, &view, PyBUF_ANY_CONTIGUOUS)
            try:
                memset(&w, 0, sizeof(w))
                w.start = start_offset
                w.end = end_offset
                w.check_crcs = self.check_crcs
                w.next_offset = start_offset
                w.first = -1
                w.aborted = <const int64_t *>PyBytes_AS_STRING(pairs)
                w.aborted_count = PyBytes_GET_SIZE(pairs) // (2 * <Py_ssize_t>sizeof(int64_t))
                self._add(records, <const unsigned char *>view.buf, view.len, &w)
                return w.next_offset, w.first
            finally:
                PyBuffer_Release(&view)
                free(w.aborted_producers.data)
        finally:
            self.busy = False

    cdef int _add(self, object records, const unsigned char *buf, Py_ssize_t n,
                  Walk *w) except -1:
        """Walk without the GIL; come back for each compressed batch (Python inflates it)."""
        cdef int st
        cdef bytes plain
        cdef const unsigned char *section
        cdef Py_ssize_t size
        while True:
            with nogil:
                st = put_batches(&self.c, buf, n, w)
            if st != ST_COMPRESSED:
                break
            plain = self._inflate(records, w)
            section = <const unsigned char *>PyBytes_AS_STRING(plain)
            size = PyBytes_GET_SIZE(plain)
            with nogil:
                st = put_records(&self.c, section, size, w)
            if st != ST_OK:
                break
            batch_done(w)
        if st != ST_OK:
            raise_status(st, w)
        return 0

    cdef bytes _inflate(self, object records, const Walk *w):
        """The records section of w's compressed batch, through the caller's decompress."""
        if self.decompress is None:
            raise CorruptRecordError(f"the batch at offset {w.base_offset} is "
                                     "compressed and no decompress was given")
        section = memoryview(records).cast("B")[w.batch_position + HEADER_SIZE:w.position]
        try:
            return bytes(self.decompress(w.attributes & CODEC_MASK, section))
        except ValueError as e:  # a bad stream, or past the caller's bound
            raise CorruptRecordError(
                f"cannot decompress the batch at offset {w.base_offset}: {e}") from e

    def take(self):
        """Hand over the accumulated columns and start empty. Returns a dict of
        column name -> tuple of buffers (None for an all-valid bitmap), plus counts."""
        self._enter()
        try:
            return self._take()
        finally:
            self.busy = False

    cdef dict _take(self):
        cdef Columns *c = &self.c
        cdef dict out
        self._prepare()
        out = {
            "num_rows": c.num_rows,
            "key": (self._bitmap(KEY_VALID, c.key_nulls), self._hand_over(KEY_OFFSETS),
                    self._hand_over(KEY_DATA), c.key_nulls),
            "value": (self._bitmap(VALUE_VALID, c.value_nulls), self._hand_over(VALUE_OFFSETS),
                      self._hand_over(VALUE_DATA), c.value_nulls),
            "offset": self._hand_over(OFFSETS),
            "timestamp": self._hand_over(TIMESTAMPS),
            "timestampType": self._hand_over(TIMESTAMP_TYPES),
        }
        if self.include_headers:
            out["headers"] = (
                self._bitmap(HEADER_VALID, c.header_nulls),
                self._hand_over(HEADER_OFFSETS), c.header_nulls, c.num_headers,
                self._hand_over(HEADER_KEY_OFFSETS), self._hand_over(HEADER_KEY_DATA),
                self._bitmap(HEADER_VALUE_VALID, c.header_value_nulls),
                self._hand_over(HEADER_VALUE_OFFSETS), self._hand_over(HEADER_VALUE_DATA),
                c.header_value_nulls)
        else:
            self._drop_headers()
        self._reset()
        return out

    cdef NativeBuffer _hand_over(self, int slot):
        return take_buf(self.slots[slot], self.pool, slot)

    cdef object _bitmap(self, int slot, Py_ssize_t nulls):
        if nulls == 0:
            self.slots[slot].size = 0
            return None
        return self._hand_over(slot)

    cdef void _drop_headers(self):
        self.c.header_offsets.size = 0
        self.c.header_key_offsets.size = 0
        self.c.header_value_offsets.size = 0


def scan_next_offset(records, int64_t start_offset):
    """Where the Fetch after this one starts: past the last complete batch in `records`
    (start_offset when there is none). Reads batch headers only, for pipelining."""
    cdef Py_buffer view
    cdef const unsigned char *buf
    cdef Py_ssize_t pos = 0
    cdef int64_t size, batch_next
    cdef int64_t next_offset = start_offset
    PyObject_GetBuffer(records, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        buf = <const unsigned char *>view.buf
        while pos + HEADER_SIZE <= view.len:
            size = <int64_t>(<int32_t>kb_load_be32(buf + pos + LENGTH_POS)) + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > view.len:
                break
            batch_next = <int64_t>kb_load_be64(buf + pos) + \
                <int32_t>kb_load_be32(buf + pos + LAST_OFFSET_DELTA_POS) + 1
            if batch_next > next_offset:
                next_offset = batch_next
            pos += size
    finally:
        PyBuffer_Release(&view)
    return next_offset
