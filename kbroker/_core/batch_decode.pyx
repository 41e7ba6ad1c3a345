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
for `pyarrow.py_buffer`. Nothing here creates a Python object per record; only
a compressed batch calls back into Python, once per batch, through the
`decompress(codec, records_section) -> bytes` the caller hands over (the reader
passes kbroker.records.compression.decompress with its bound; the core imports
nothing above itself). Control batches (transaction markers) are skipped; their
offsets still advance the position.
"""

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from kbroker._core.crc32c cimport crc32c_update
from kbroker._core.growbuf cimport Buf, buf_reserve


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
    RECORD_COUNT_POS,
    TIMESTAMP_TYPE_BIT,
    kb_load_be16,
    kb_load_be32,
    kb_load_be64,
    read_varlong,
)


cdef enum:
    MAX_ARROW_BINARY = 0x7FFFFFFF


class CorruptRecordError(ValueError):
    """A fetched record batch is malformed or fails its CRC."""


# --- growable byte buffers and the zero-copy hand-over -------------------------

cdef inline int buf_put(Buf *b, const void *src, Py_ssize_t n) except -1:
    if b.size + n > b.cap:
        buf_reserve(b, n)
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef inline int put_i32(Buf *b, int32_t v) except -1:
    if b.size + 4 > b.cap:
        buf_reserve(b, 4)
    memcpy(b.data + b.size, &v, 4)
    b.size += 4
    return 0


cdef inline int put_i64(Buf *b, int64_t v) except -1:
    if b.size + 8 > b.cap:
        buf_reserve(b, 8)
    memcpy(b.data + b.size, &v, 8)
    b.size += 8
    return 0


cdef inline int put_bit(Buf *b, Py_ssize_t i, bint valid) except -1:
    """Set bit i of a validity bitmap (LSB first), growing it with zero bytes."""
    cdef Py_ssize_t byte = i >> 3
    if byte >= b.size:
        if byte >= b.cap:
            buf_reserve(b, byte + 1 - b.size)
        memset(b.data + b.size, 0, byte + 1 - b.size)
        b.size = byte + 1
    if valid:
        b.data[byte] |= <unsigned char>(1 << (i & 7))
    return 0


cdef inline int32_t last_i32(Buf *b):
    cdef int32_t v
    memcpy(&v, b.data + b.size - 4, 4)
    return v


cdef class NativeBuffer:
    """Memory taken over from a ColumnarRecords column; exposes the buffer protocol."""

    cdef unsigned char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __dealloc__(self):
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


cdef NativeBuffer take_buf(Buf *b):
    cdef NativeBuffer nb = NativeBuffer.__new__(NativeBuffer)
    nb.data = b.data
    nb.size = b.size
    b.data = NULL
    b.size = 0
    b.cap = 0
    return nb


# --- the decoder ---------------------------------------------------------------

cdef class ColumnarRecords:
    """Arrow column buffers accumulated from fetched record batches of one partition."""

    cdef Buf key_valid, key_offsets, key_data
    cdef Buf value_valid, value_offsets, value_data
    cdef Buf offsets, timestamps, timestamp_types
    cdef Buf header_valid, header_offsets
    cdef Buf header_key_offsets, header_key_data
    cdef Buf header_value_valid, header_value_offsets, header_value_data
    cdef readonly Py_ssize_t num_rows
    cdef readonly Py_ssize_t key_nulls, value_nulls, header_nulls, header_value_nulls
    cdef readonly Py_ssize_t num_headers
    cdef readonly bint include_headers
    cdef readonly bint check_crcs
    cdef readonly Py_ssize_t data_bytes
    cdef object decompress

    def __cinit__(self, bint include_headers=False, bint check_crcs=True, decompress=None):
        self.include_headers = include_headers
        self.check_crcs = check_crcs
        self.decompress = decompress
        self._reset()

    def __dealloc__(self):
        free(self.key_valid.data)
        free(self.key_offsets.data)
        free(self.key_data.data)
        free(self.value_valid.data)
        free(self.value_offsets.data)
        free(self.value_data.data)
        free(self.offsets.data)
        free(self.timestamps.data)
        free(self.timestamp_types.data)
        free(self.header_valid.data)
        free(self.header_offsets.data)
        free(self.header_key_offsets.data)
        free(self.header_key_data.data)
        free(self.header_value_valid.data)
        free(self.header_value_offsets.data)
        free(self.header_value_data.data)

    cdef int _reset(self) except -1:
        self.num_rows = 0
        self.key_nulls = self.value_nulls = self.header_nulls = self.header_value_nulls = 0
        self.num_headers = 0
        self.data_bytes = 0
        put_i32(&self.key_offsets, 0)
        put_i32(&self.value_offsets, 0)
        put_i32(&self.header_offsets, 0)
        put_i32(&self.header_key_offsets, 0)
        put_i32(&self.header_value_offsets, 0)
        return 0

    def add_records(self, records, int64_t start_offset, int64_t end_offset):
        """Append the records with start_offset <= offset < end_offset from `records`
        (whole v2 batches as fetched). Returns (next_offset, first_offset):
        next_offset is where the next Fetch starts (after the last complete batch,
        or end_offset when reached; start_offset when no complete batch was seen),
        first_offset the offset of the first record appended (-1: none)."""
        cdef Py_buffer view
        PyObject_GetBuffer(records, &view, PyBUF_ANY_CONTIGUOUS)
        try:
            return self._add(records, <const unsigned char *>view.buf, view.len,
                             start_offset, end_offset)
        finally:
            PyBuffer_Release(&view)

    cdef tuple _add(self, object records, const unsigned char *buf, Py_ssize_t n,
                    int64_t start, int64_t end):
        cdef Py_ssize_t pos = 0
        cdef int64_t size, base_offset, batch_next, timestamp
        cdef int64_t next_offset = start
        cdef int64_t first = -1
        cdef int attributes, count
        cdef const unsigned char *p
        cdef bytes plain
        while pos + HEADER_SIZE <= n and next_offset < end:
            p = buf + pos
            size = <int64_t>(<int32_t>kb_load_be32(p + LENGTH_POS)) + LOG_OVERHEAD
            if size < HEADER_SIZE:
                raise CorruptRecordError(f"record batch length {size} at byte {pos}")
            if pos + size > n:
                break  # a partial batch at the end of the response
            if p[MAGIC_POS] != 2:
                raise CorruptRecordError(f"record batch magic {p[MAGIC_POS]} (only v2 is read)")
            base_offset = <int64_t>kb_load_be64(p)
            batch_next = base_offset + <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS) + 1
            pos += size
            if batch_next <= start:
                continue
            if self.check_crcs and crc32c_update(0, p + ATTRIBUTES_POS, size - ATTRIBUTES_POS) \
                    != kb_load_be32(p + CRC_POS):
                raise CorruptRecordError(f"CRC mismatch in the batch at offset {base_offset}")
            attributes = kb_load_be16(p + ATTRIBUTES_POS)
            if not attributes & CONTROL_BIT:
                count = <int32_t>kb_load_be32(p + RECORD_COUNT_POS)
                if attributes & TIMESTAMP_TYPE_BIT:
                    timestamp = <int64_t>kb_load_be64(p + MAX_TIMESTAMP_POS)
                else:
                    timestamp = <int64_t>kb_load_be64(p + BASE_TIMESTAMP_POS)
                if attributes & CODEC_MASK:
                    if self.decompress is None:
                        raise CorruptRecordError(f"the batch at offset {base_offset} is "
                                                 "compressed and no decompress was given")
                    section = memoryview(records).cast("B")[pos - size + HEADER_SIZE:pos]
                    try:
                        plain = bytes(self.decompress(attributes & CODEC_MASK, section))
                    except ValueError as e:  # a bad stream, or past the caller's bound
                        raise CorruptRecordError(
                            f"cannot decompress the batch at offset {base_offset}: {e}") from e
                    self._records(<const unsigned char *>PyBytes_AS_STRING(plain),
                                  PyBytes_GET_SIZE(plain), count, base_offset, timestamp,
                                  attributes, start, end, &first)
                else:
                    self._records(p + HEADER_SIZE, size - HEADER_SIZE, count, base_offset,
                                  timestamp, attributes, start, end, &first)
            next_offset = batch_next if batch_next < end else end
        return next_offset, first

    cdef int _records(self, const unsigned char *p, Py_ssize_t n, int count,
                      int64_t base_offset, int64_t timestamp, int attributes,
                      int64_t start, int64_t end, int64_t *first) except -1:
        """Decode `count` records of one batch's (uncompressed) records section."""
        cdef const unsigned char *stop = p + n
        cdef const unsigned char *rec_end
        cdef int64_t length, ts_delta, offset_delta, offset
        cdef bint log_append = attributes & TIMESTAMP_TYPE_BIT
        cdef int i
        for i in range(count):
            if read_varlong(&p, stop, 5, &length) != 0 or length < 3 or length > stop - p:
                raise CorruptRecordError(f"bad record length in the batch at {base_offset}")
            rec_end = p + length
            p += 1  # record attributes (unused)
            if read_varlong(&p, rec_end, 10, &ts_delta) != 0 or \
                    read_varlong(&p, rec_end, 5, &offset_delta) != 0:
                raise CorruptRecordError(f"bad record in the batch at {base_offset}")
            offset = base_offset + offset_delta
            if offset >= end:
                return 0
            if offset >= start:
                if first[0] < 0:
                    first[0] = offset
                self._row(p, rec_end, offset, timestamp if log_append else timestamp + ts_delta,
                          log_append, base_offset)
            p = rec_end
        return 0

    cdef int _row(self, const unsigned char *p, const unsigned char *end, int64_t offset,
                  int64_t timestamp_ms, bint log_append, int64_t base_offset) except -1:
        cdef Py_ssize_t row = self.num_rows
        p = self._binary(p, end, &self.key_valid, &self.key_offsets, &self.key_data,
                         row, &self.key_nulls, base_offset)
        p = self._binary(p, end, &self.value_valid, &self.value_offsets, &self.value_data,
                         row, &self.value_nulls, base_offset)
        put_i64(&self.offsets, offset)
        put_i64(&self.timestamps, timestamp_ms * 1000)
        put_i32(&self.timestamp_types, 1 if log_append else 0)
        if self.include_headers:
            self._headers(p, end, row, base_offset)
        self.num_rows = row + 1
        return 0

    cdef const unsigned char *_binary(self, const unsigned char *p, const unsigned char *end,
                                      Buf *valid, Buf *offsets, Buf *data, Py_ssize_t row,
                                      Py_ssize_t *nulls, int64_t base_offset) except NULL:
        """One length-prefixed (varint, -1 = null) byte string into an Arrow binary column."""
        cdef int64_t length
        if read_varlong(&p, end, 5, &length) != 0 or length < -1 or length > end - p:
            raise CorruptRecordError(f"bad key/value length in the batch at {base_offset}")
        if length < 0:
            nulls[0] += 1
            put_bit(valid, row, False)
            put_i32(offsets, last_i32(offsets))
            return p
        put_bit(valid, row, True)
        if data.size + length > MAX_ARROW_BINARY:
            raise OverflowError("column chunk exceeds 2 GiB; take() more often")
        buf_put(data, p, length)
        put_i32(offsets, <int32_t>data.size)
        self.data_bytes += length
        return p + length

    cdef int _headers(self, const unsigned char *p, const unsigned char *end, Py_ssize_t row,
                      int64_t base_offset) except -1:
        cdef int64_t count, length
        cdef int64_t i
        if read_varlong(&p, end, 5, &count) != 0 or count < 0 or count > end - p:
            raise CorruptRecordError(f"bad header count in the batch at {base_offset}")
        if count == 0:
            put_bit(&self.header_valid, row, False)
            self.header_nulls += 1
            put_i32(&self.header_offsets, <int32_t>self.num_headers)
            return 0
        put_bit(&self.header_valid, row, True)
        for i in range(count):
            if read_varlong(&p, end, 5, &length) != 0 or length < 0 or length > end - p:
                raise CorruptRecordError(f"bad header key in the batch at {base_offset}")
            buf_put(&self.header_key_data, p, length)
            put_i32(&self.header_key_offsets, <int32_t>self.header_key_data.size)
            p += length
            p = self._binary(p, end, &self.header_value_valid, &self.header_value_offsets,
                             &self.header_value_data, self.num_headers,
                             &self.header_value_nulls, base_offset)
            self.num_headers += 1
        put_i32(&self.header_offsets, <int32_t>self.num_headers)
        return 0

    def take(self):
        """Hand over the accumulated columns and start empty. Returns a dict of
        column name -> tuple of buffers (None for an all-valid bitmap), plus counts."""
        cdef dict out = {
            "num_rows": self.num_rows,
            "key": (self._bitmap(&self.key_valid, self.key_nulls),
                    take_buf(&self.key_offsets), take_buf(&self.key_data), self.key_nulls),
            "value": (self._bitmap(&self.value_valid, self.value_nulls),
                      take_buf(&self.value_offsets), take_buf(&self.value_data),
                      self.value_nulls),
            "offset": take_buf(&self.offsets),
            "timestamp": take_buf(&self.timestamps),
            "timestampType": take_buf(&self.timestamp_types),
        }
        if self.include_headers:
            out["headers"] = (
                self._bitmap(&self.header_valid, self.header_nulls),
                take_buf(&self.header_offsets), self.header_nulls, self.num_headers,
                take_buf(&self.header_key_offsets), take_buf(&self.header_key_data),
                self._bitmap(&self.header_value_valid, self.header_value_nulls),
                take_buf(&self.header_value_offsets), take_buf(&self.header_value_data),
                self.header_value_nulls)
        else:
            self._drop_headers()
        self._reset()
        return out

    cdef object _bitmap(self, Buf *b, Py_ssize_t nulls):
        if nulls == 0:
            b.size = 0
            return None
        return take_buf(b)

    cdef void _drop_headers(self):
        self.header_offsets.size = 0
        self.header_key_offsets.size = 0
        self.header_value_offsets.size = 0


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
