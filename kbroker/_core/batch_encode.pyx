# cython: language_level=3
"""The record batch encoder: Python values or Arrow columns to record batch v2 bytes.

The one writer of batches in kbroker. Layout and varints come from records.pxd (the
table is at the top of records.pyx); a batch is written as its records section,
then framed: the 61-byte header, batchLength and the CRC-32C of attributes..end.

    encode_records(records)     the uncompressed records section of Python values
    frame_batch(section, ...)   header + section (compressed or not) + CRC
    encode_batches(columns...)  Arrow columns to uncompressed batches, partitioned
                                by murmur2 (the Spark writer)

Compression is the caller's (kbroker.records.builder): the core does not import it.

    record: length varint | attributes int8 (0) | timestampDelta varlong |
            offsetDelta varint | keyLength varint (-1 null) | key |
            valueLength varint (-1 null) | value | headerCount varint |
            (headerKeyLength varint | headerKey | headerValueLength varint (-1 null) |
             headerValue) * headerCount

Arrow input columns are handed over as buffers (see BinaryColumn):

    key, value        binary: validity bitmap (None: all valid) | int32 offsets | data
    partition         int32 (+ validity): an explicit partition wins when not null
    headers           list<struct<key string, value binary>>
    timestamps        int64 milliseconds (+ validity): a null takes the call's timestamp

Partition of a row: its explicit partition if given; else, by `partitioner`:
PARTITION_BY_KEY (Kafka's default): for a non-null key, murmur2(key) & 0x7fffffff
modulo the partition count - the Java client's default partitioner and librdkafka's
murmur2_random, so keyed rows land where those clients put them; for a null key the
caller's sticky partition for this call. PARTITION_STICKY (UniformStickyPartitioner,
partitioner.ignore.keys): every row to the sticky partition. PARTITION_ROUND_ROBIN
(RoundRobinPartitioner): rows in turn over the partitions, from the sticky one on.

murmur2 (Austin Appleby's MurmurHash2, 32-bit, as Kafka uses it): seed 0x9747b28c,
m = 0x5bd1e995, r = 24; h = seed ^ len; each little-endian 4-byte word k:
k *= m; k ^= k >> r; k *= m; h *= m; h ^= k; then the 1-3 tail bytes are xored in
(byte 2 << 16, byte 1 << 8, byte 0) followed by h *= m; finally h ^= h >> 13;
h *= m; h ^= h >> 15.

Arrow batches: baseOffset 0, partitionLeaderEpoch -1, no producer id (the caller
reframes them for idempotence or compression, see frame_batch); CreateTime
timestamps, the batch's baseTimestamp its first record's and maxTimestamp the
largest. A batch is closed when it would exceed max_batch_bytes (a single larger
record gets a batch of its own).
"""

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from kbroker._core.growbuf cimport Buf, buf_reserve
from kbroker._core.records cimport (
    HEADER_SIZE,
    Header,
    put_varint,
    seal_batch,
    varint_size,
    write_header,
)


cdef extern from "kb_endian.h" nogil:
    uint32_t kb_load_le32(const void *p)


# --- murmur2 -------------------------------------------------------------------

cdef uint32_t murmur2_c(const unsigned char *data, Py_ssize_t length) noexcept nogil:
    cdef uint32_t m = 0x5bd1e995U
    cdef uint32_t h = 0x9747b28cU ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t tail = length & ~(<Py_ssize_t>3)
    while i < tail:
        k = kb_load_le32(data + i)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
        i += 4
    cdef Py_ssize_t rest = length & 3
    if rest == 3:
        h ^= <uint32_t>data[tail + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>data[tail + 1] << 8
    if rest >= 1:
        h ^= <uint32_t>data[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


def murmur2(data) -> int:
    """Kafka's murmur2 of a byte string, as a signed 32-bit int (Utils.murmur2)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        return <int32_t>murmur2_c(<const unsigned char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def partition_for_key(key, int num_partitions) -> int:
    """The partition the Java client and librdkafka's murmur2_random choose for a key."""
    cdef Py_buffer view
    PyObject_GetBuffer(key, &view, PyBUF_ANY_CONTIGUOUS)
    try:
        return (murmur2_c(<const unsigned char *>view.buf, view.len) & 0x7FFFFFFF) % num_partitions
    finally:
        PyBuffer_Release(&view)


# --- column access -------------------------------------------------------------

cdef class BinaryColumn:
    """Borrowed Arrow binary/string column: (validity | None, offsets, data, array offset)."""

    cdef Py_buffer valid_view, offsets_view, data_view
    cdef bint has_valid, has_offsets, has_data
    cdef const unsigned char *valid
    cdef const int32_t *offsets
    cdef const unsigned char *data
    cdef Py_ssize_t start

    def __cinit__(self, valid, offsets, data, Py_ssize_t start):
        self.start = start
        if valid is not None:
            PyObject_GetBuffer(valid, &self.valid_view, PyBUF_ANY_CONTIGUOUS)
            self.has_valid = True
            self.valid = <const unsigned char *>self.valid_view.buf
        PyObject_GetBuffer(offsets, &self.offsets_view, PyBUF_ANY_CONTIGUOUS)
        self.has_offsets = True
        self.offsets = <const int32_t *>self.offsets_view.buf
        if data is not None:
            PyObject_GetBuffer(data, &self.data_view, PyBUF_ANY_CONTIGUOUS)
            self.has_data = True
            self.data = <const unsigned char *>self.data_view.buf

    def __dealloc__(self):
        if self.has_valid:
            PyBuffer_Release(&self.valid_view)
        if self.has_offsets:
            PyBuffer_Release(&self.offsets_view)
        if self.has_data:
            PyBuffer_Release(&self.data_view)

    cdef inline bint is_null(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j = i + self.start
        return self.has_valid and not (self.valid[j >> 3] >> (j & 7)) & 1

    cdef inline const unsigned char *value(self, Py_ssize_t i, Py_ssize_t *length) noexcept:
        cdef Py_ssize_t j = i + self.start
        length[0] = self.offsets[j + 1] - self.offsets[j]
        return self.data + self.offsets[j]


cdef class _FixedColumn:
    """Borrowed Arrow fixed-width column: (validity | None, values, array offset)."""

    cdef Py_buffer valid_view, values_view
    cdef bint has_valid
    cdef const unsigned char *valid
    cdef const void *buffer
    cdef Py_ssize_t start

    def __cinit__(self, valid, values, Py_ssize_t start):
        self.start = start
        if valid is not None:
            PyObject_GetBuffer(valid, &self.valid_view, PyBUF_ANY_CONTIGUOUS)
            self.has_valid = True
            self.valid = <const unsigned char *>self.valid_view.buf
        PyObject_GetBuffer(values, &self.values_view, PyBUF_ANY_CONTIGUOUS)
        self.buffer = self.values_view.buf

    def __dealloc__(self):
        if self.has_valid:
            PyBuffer_Release(&self.valid_view)
        PyBuffer_Release(&self.values_view)

    cdef inline bint is_null(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j = i + self.start
        return self.has_valid and not (self.valid[j >> 3] >> (j & 7)) & 1


cdef class Int32Column(_FixedColumn):
    cdef const int32_t *values

    def __cinit__(self, valid, values, Py_ssize_t start):
        self.values = <const int32_t *>self.buffer


cdef class Int64Column(_FixedColumn):
    cdef const int64_t *values

    def __cinit__(self, valid, values, Py_ssize_t start):
        self.values = <const int64_t *>self.buffer


cdef enum:
    BY_KEY = 0
    STICKY = 1
    ROUND_ROBIN = 2

PARTITION_BY_KEY = BY_KEY
PARTITION_STICKY = STICKY
PARTITION_ROUND_ROBIN = ROUND_ROBIN


cdef class HeadersColumn:
    """list<struct<key, value>>: list validity/offsets + key and value columns of entries."""

    cdef Int32Column lists  # validity + int32 list offsets (values = offsets)
    cdef BinaryColumn keys
    cdef BinaryColumn values

    def __cinit__(self, Int32Column lists, BinaryColumn keys, BinaryColumn values):
        self.lists = lists
        self.keys = keys
        self.values = values


# --- records and batches -------------------------------------------------------

cdef inline Py_ssize_t nullable_size(Py_ssize_t n) noexcept nogil:
    """Bytes of a varint length (-1: null) and its data."""
    return varint_size(n) + (n if n > 0 else 0)


cdef inline unsigned char *put_nullable(unsigned char *p, const unsigned char *src,
                                        Py_ssize_t n) noexcept nogil:
    p = put_varint(p, n)
    if n > 0:
        memcpy(p, src, n)
        p += n
    return p


cdef inline Py_ssize_t record_head_size(int64_t timestamp_delta, int32_t offset_delta,
                                        Py_ssize_t klen, Py_ssize_t vlen,
                                        Py_ssize_t header_count) noexcept nogil:
    """Bytes of a record after its length prefix, up to its headers."""
    return 1 + varint_size(timestamp_delta) + varint_size(offset_delta) + nullable_size(klen) \
        + nullable_size(vlen) + varint_size(header_count)


cdef inline unsigned char *put_record_head(unsigned char *p, Py_ssize_t body_size,
                                           int64_t timestamp_delta, int32_t offset_delta,
                                           const unsigned char *k, Py_ssize_t klen,
                                           const unsigned char *v, Py_ssize_t vlen,
                                           Py_ssize_t header_count) noexcept nogil:
    """A record's length prefix and fields up to headerCount; the headers follow."""
    p = put_varint(p, body_size)
    p[0] = 0  # attributes
    p = put_varint(p + 1, timestamp_delta)
    p = put_varint(p, offset_delta)
    p = put_nullable(p, k, klen)
    p = put_nullable(p, v, vlen)
    return put_varint(p, header_count)


cdef inline const unsigned char *bytes_of(object b, Py_ssize_t *n) except? NULL:
    """Data and length of bytes or None (length -1); TypeError for anything else."""
    cdef bytes data
    if b is None:
        n[0] = -1
        return NULL
    data = <bytes?>b
    n[0] = len(data)
    return <const unsigned char *>PyBytes_AS_STRING(data)


def encode_records(records):
    """The uncompressed records section of `records`: (key, value, timestamp_delta,
    headers) each, key and value bytes or None, headers [(str or bytes, bytes or None)].
    Offset deltas are the records' positions, 0 up."""
    cdef Buf buf
    cdef Py_ssize_t klen = 0, vlen = 0, hk = 0, hv = 0, body
    cdef int32_t offset_delta = 0
    cdef const unsigned char *k
    cdef const unsigned char *v
    cdef unsigned char *p
    cdef list headers
    buf.data = NULL
    buf.size = buf.cap = 0
    try:
        for key, value, timestamp_delta, record_headers in records:
            k = bytes_of(key, &klen)
            v = bytes_of(value, &vlen)
            headers = [(hkey.encode() if isinstance(hkey, str) else hkey, hvalue)
                       for hkey, hvalue in record_headers]
            body = record_head_size(timestamp_delta, offset_delta, klen, vlen, len(headers))
            for hkey, hvalue in headers:
                bytes_of(hkey, &hk)
                bytes_of(hvalue, &hv)
                body += nullable_size(hk) + nullable_size(hv)
            buf_reserve(&buf, varint_size(body) + body)
            p = put_record_head(buf.data + buf.size, body, timestamp_delta, offset_delta,
                                k, klen, v, vlen, len(headers))
            for hkey, hvalue in headers:
                k = bytes_of(hkey, &hk)
                p = put_nullable(p, k, hk)
                v = bytes_of(hvalue, &hv)
                p = put_nullable(p, v, hv)
            buf.size = p - buf.data
            offset_delta += 1
        return PyBytes_FromStringAndSize(<char *>buf.data, buf.size)
    finally:
        free(buf.data)


def frame_batch(const unsigned char[::1] section, int record_count, int64_t base_timestamp,
                int64_t max_timestamp, *, int64_t base_offset=0, int partition_leader_epoch=-1,
                int attributes=0, last_offset_delta=None, int64_t producer_id=-1,
                int producer_epoch=-1, int base_sequence=-1):
    """A whole batch: the header, `section` (the records, compressed as attributes
    say) and the CRC. lastOffsetDelta defaults to record_count - 1."""
    cdef Header h
    cdef Py_ssize_t n = section.shape[0]
    cdef bytes out = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + n)
    cdef unsigned char *p = <unsigned char *>PyBytes_AS_STRING(out)
    h.base_offset = base_offset
    h.partition_leader_epoch = partition_leader_epoch
    h.magic = 2
    h.attributes = <int16_t>attributes
    h.last_offset_delta = record_count - 1 if last_offset_delta is None else last_offset_delta
    h.base_timestamp = base_timestamp
    h.max_timestamp = max_timestamp
    h.producer_id = producer_id
    h.producer_epoch = <int16_t>producer_epoch
    h.base_sequence = base_sequence
    h.record_count = record_count
    write_header(p, &h)
    if n > 0:
        memcpy(p + HEADER_SIZE, &section[0], n)
    seal_batch(p, HEADER_SIZE + n)
    return out


cdef class _Builder:
    """The open batch of one partition (Arrow rows)."""

    cdef Buf buf
    cdef int32_t count
    cdef int64_t base_timestamp, max_timestamp

    def __dealloc__(self):
        free(self.buf.data)

    cdef int start(self) except -1:
        self.buf.size = HEADER_SIZE
        self.count = 0
        return buf_reserve(&self.buf, 0)

    cdef bytes finish(self):
        cdef Header h
        h.base_offset = 0
        h.partition_leader_epoch = -1
        h.magic = 2
        h.attributes = 0
        h.last_offset_delta = self.count - 1
        h.base_timestamp = self.base_timestamp
        h.max_timestamp = self.max_timestamp
        h.producer_id = -1
        h.producer_epoch = -1
        h.base_sequence = -1
        h.record_count = self.count
        write_header(self.buf.data, &h)
        seal_batch(self.buf.data, self.buf.size)
        out = PyBytes_FromStringAndSize(<char *>self.buf.data, self.buf.size)
        self.buf.size = 0
        self.count = 0
        return out


def encode_batches(Py_ssize_t num_rows, BinaryColumn keys, BinaryColumn values,
                   Int32Column partitions, HeadersColumn headers, int num_partitions,
                   int null_key_partition, int64_t timestamp, Py_ssize_t max_batch_bytes,
                   Int64Column timestamps=None, int partitioner=BY_KEY):
    """Encode rows into record batches; returns a list of (partition, batch bytes) in
    row order per partition. keys/partitions/headers/timestamps may be None."""
    cdef list builders = [None] * num_partitions
    cdef list out = []
    cdef _Builder b
    cdef Py_ssize_t i, klen, vlen, h0, h1
    cdef Py_ssize_t total = 0
    cdef const unsigned char *k
    cdef const unsigned char *v
    cdef int partition
    cdef int next_partition = null_key_partition
    cdef int64_t ts
    cdef bint key_null, value_null
    cdef unsigned char *p
    if not 0 <= null_key_partition < num_partitions:
        raise ValueError(f"null_key_partition {null_key_partition} of {num_partitions}")
    if partitioner != BY_KEY and partitioner != STICKY and partitioner != ROUND_ROBIN:
        raise ValueError(f"unknown partitioner {partitioner}")
    for i in range(num_rows):
        key_null = keys is None or keys.is_null(i)
        if not key_null:
            k = keys.value(i, &klen)
        else:
            k = NULL
            klen = -1
        if partitions is not None and not partitions.is_null(i):
            partition = partitions.values[i + partitions.start]
            if not 0 <= partition < num_partitions:
                raise ValueError(f"partition {partition} does not exist "
                                 f"(the topic has {num_partitions})")
        elif partitioner == ROUND_ROBIN:
            partition = next_partition
            next_partition = (next_partition + 1) % num_partitions
        elif not key_null and partitioner == BY_KEY:
            partition = (murmur2_c(k, klen) & 0x7FFFFFFF) % num_partitions
        else:
            partition = null_key_partition
        if timestamps is not None and not timestamps.is_null(i):
            ts = timestamps.values[i + timestamps.start]
        else:
            ts = timestamp
        value_null = values.is_null(i)
        if not value_null:
            v = values.value(i, &vlen)
        else:
            v = NULL
            vlen = -1
        b = builders[partition]
        if b is None:
            b = _Builder()
            b.start()
            builders[partition] = b
        h0 = h1 = 0
        if headers is not None and not headers.lists.is_null(i):
            h0 = headers.lists.values[i + headers.lists.start]
            h1 = headers.lists.values[i + headers.lists.start + 1]
        if b.count > 0:
            total = _record_size(b.count, ts - b.base_timestamp, klen, vlen, headers, h0, h1)
        if b.count > 0 and b.buf.size + total > max_batch_bytes:
            out.append((partition, b.finish()))
            b.start()
        if b.count == 0:
            b.base_timestamp = b.max_timestamp = ts
            total = _record_size(0, 0, klen, vlen, headers, h0, h1)
        elif ts > b.max_timestamp:
            b.max_timestamp = ts
        buf_reserve(&b.buf, total)
        p = _put_record(b.buf.data + b.buf.size, b.count, ts - b.base_timestamp, k, klen, v,
                        vlen, headers, h0, h1)
        b.buf.size = p - b.buf.data
        b.count += 1
    for partition in range(num_partitions):
        b = builders[partition]
        if b is not None and b.count > 0:
            out.append((partition, b.finish()))
    return out


cdef Py_ssize_t _body_size(int32_t offset_delta, int64_t timestamp_delta, Py_ssize_t klen,
                           Py_ssize_t vlen, HeadersColumn headers, Py_ssize_t h0,
                           Py_ssize_t h1):
    """Bytes of one Arrow row's record after its length prefix."""
    cdef Py_ssize_t body, h, hk, hv
    body = record_head_size(timestamp_delta, offset_delta, klen, vlen, h1 - h0)
    for h in range(h0, h1):
        headers.keys.value(h, &hk)
        body += nullable_size(hk)
        if headers.values.is_null(h):
            body += nullable_size(-1)
        else:
            headers.values.value(h, &hv)
            body += nullable_size(hv)
    return body


cdef Py_ssize_t _record_size(int32_t offset_delta, int64_t timestamp_delta, Py_ssize_t klen,
                             Py_ssize_t vlen, HeadersColumn headers, Py_ssize_t h0,
                             Py_ssize_t h1):
    cdef Py_ssize_t body = _body_size(offset_delta, timestamp_delta, klen, vlen, headers, h0,
                                      h1)
    return varint_size(body) + body


cdef unsigned char *_put_record(unsigned char *p, int32_t offset_delta,
                                int64_t timestamp_delta, const unsigned char *k,
                                Py_ssize_t klen,
                                const unsigned char *v, Py_ssize_t vlen,
                                HeadersColumn headers, Py_ssize_t h0, Py_ssize_t h1):
    """Write one Arrow row's record, its length prefix first."""
    cdef Py_ssize_t h, hk, hv
    cdef const unsigned char *hkp
    cdef const unsigned char *hvp
    p = put_record_head(p, _body_size(offset_delta, timestamp_delta, klen, vlen, headers, h0,
                                      h1),
                        timestamp_delta, offset_delta, k, klen, v, vlen, h1 - h0)
    for h in range(h0, h1):
        hkp = headers.keys.value(h, &hk)
        p = put_nullable(p, hkp, hk)
        if headers.values.is_null(h):
            p = put_nullable(p, NULL, -1)
        else:
            hvp = headers.values.value(h, &hv)
            p = put_nullable(p, hvp, hv)
    return p
