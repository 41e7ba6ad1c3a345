# cython: language_level=3
"""Arrow columns to Kafka record batches (v2, uncompressed), partitioned by murmur2.

Input columns are Arrow layouts handed over as buffers (see BinaryColumn):

    key, value        binary: validity bitmap (None: all valid) | int32 offsets | data
    partition         int32 (+ validity): an explicit partition wins when not null
    headers           list<struct<key string, value binary>>

Partition of a row: its explicit partition if given; else, for a non-null key,
murmur2(key) & 0x7fffffff modulo the partition count - the Java client's default
partitioner and librdkafka's murmur2_random, so keyed rows land where those clients
put them; else (null key) the caller's sticky partition for this call.

murmur2 (Austin Appleby's MurmurHash2, 32-bit, as Kafka uses it): seed 0x9747b28c,
m = 0x5bd1e995, r = 24; h = seed ^ len; each little-endian 4-byte word k:
k *= m; k ^= k >> r; k *= m; h *= m; h ^= k; then the 1-3 tail bytes are xored in
(byte 2 << 16, byte 1 << 8, byte 0) followed by h *= m; finally h ^= h >> 13;
h *= m; h ^= h >> 15.

Output batch (big-endian header, 61 bytes; see kbroker/_core/records.pyx):

    baseOffset 0 | batchLength | partitionLeaderEpoch -1 | magic 2 | crc (CRC-32C of
    attributes..end) | attributes 0 | lastOffsetDelta | baseTimestamp | maxTimestamp |
    producerId -1 | producerEpoch -1 | baseSequence -1 | recordCount | records

    record: length varint | attributes 0 | timestampDelta varlong 0 | offsetDelta varint |
            keyLength varint (-1 null) | key | valueLength varint | value |
            headerCount varint | (keyLength varint | key | valueLength varint | value)*

All records of one call share one timestamp (CreateTime). A batch is closed when
it would exceed max_batch_bytes (a single larger record gets a batch of its own).
"""

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from kbroker._core.crc32c cimport crc32c_update
from kbroker._core.growbuf cimport Buf, buf_reserve


cdef extern from "kb_endian.h" nogil:
    void kb_store_be16(void *p, unsigned short v)
    void kb_store_be32(void *p, uint32_t v)
    void kb_store_be64(void *p, uint64_t v)
    uint32_t kb_load_le32(const void *p)


cdef enum:
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12


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


cdef class Int32Column:
    cdef Py_buffer valid_view, values_view
    cdef bint has_valid
    cdef const unsigned char *valid
    cdef const int32_t *values
    cdef Py_ssize_t start

    def __cinit__(self, valid, values, Py_ssize_t start):
        self.start = start
        if valid is not None:
            PyObject_GetBuffer(valid, &self.valid_view, PyBUF_ANY_CONTIGUOUS)
            self.has_valid = True
            self.valid = <const unsigned char *>self.valid_view.buf
        PyObject_GetBuffer(values, &self.values_view, PyBUF_ANY_CONTIGUOUS)
        self.values = <const int32_t *>self.values_view.buf

    def __dealloc__(self):
        if self.has_valid:
            PyBuffer_Release(&self.valid_view)
        PyBuffer_Release(&self.values_view)

    cdef inline bint is_null(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j = i + self.start
        return self.has_valid and not (self.valid[j >> 3] >> (j & 7)) & 1


cdef class HeadersColumn:
    """list<struct<key, value>>: list validity/offsets + key and value columns of entries."""

    cdef Int32Column lists  # validity + int32 list offsets (values = offsets)
    cdef BinaryColumn keys
    cdef BinaryColumn values

    def __cinit__(self, Int32Column lists, BinaryColumn keys, BinaryColumn values):
        self.lists = lists
        self.keys = keys
        self.values = values


# --- batch building ------------------------------------------------------------

cdef inline int varint_size(int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline unsigned char *put_varint(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while u >= 0x80:
        p[0] = <unsigned char>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <unsigned char>u
    return p + 1


cdef inline unsigned char *put_bytes(unsigned char *p, const unsigned char *src,
                                     Py_ssize_t n) noexcept nogil:
    p = put_varint(p, n)
    memcpy(p, src, n)
    return p + n


cdef class _Builder:
    """The open batch of one partition."""

    cdef Buf buf
    cdef int32_t count

    def __dealloc__(self):
        free(self.buf.data)

    cdef int start(self) except -1:
        self.buf.size = HEADER_SIZE
        self.count = 0
        return buf_reserve(&self.buf, 0)

    cdef bytes finish(self, int64_t timestamp):
        cdef unsigned char *p = self.buf.data
        cdef Py_ssize_t size = self.buf.size
        kb_store_be64(p, 0)
        kb_store_be32(p + 8, <uint32_t>(size - LOG_OVERHEAD))
        kb_store_be32(p + 12, <uint32_t>-1)
        p[16] = 2
        kb_store_be16(p + 21, 0)
        kb_store_be32(p + 23, <uint32_t>(self.count - 1))
        kb_store_be64(p + 27, <uint64_t>timestamp)
        kb_store_be64(p + 35, <uint64_t>timestamp)
        kb_store_be64(p + 43, <uint64_t>-1)
        kb_store_be16(p + 51, <unsigned short>0xFFFF)
        kb_store_be32(p + 53, <uint32_t>-1)
        kb_store_be32(p + 57, <uint32_t>self.count)
        kb_store_be32(p + 17, crc32c_update(0, p + 21, size - 21))
        out = PyBytes_FromStringAndSize(<char *>p, size)
        self.buf.size = 0
        self.count = 0
        return out


def encode_batches(Py_ssize_t num_rows, BinaryColumn keys, BinaryColumn values,
                   Int32Column partitions, HeadersColumn headers, int num_partitions,
                   int null_key_partition, int64_t timestamp, Py_ssize_t max_batch_bytes):
    """Encode rows into record batches; returns a list of (partition, batch bytes) in
    row order per partition. keys/partitions/headers may be None."""
    cdef list builders = [None] * num_partitions
    cdef list out = []
    cdef _Builder b
    cdef Py_ssize_t i, klen, vlen, total, h0, h1
    cdef const unsigned char *k
    cdef const unsigned char *v
    cdef int partition
    cdef bint key_null, value_null
    cdef unsigned char *p
    if not 0 <= null_key_partition < num_partitions:
        raise ValueError(f"null_key_partition {null_key_partition} of {num_partitions}")
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
        elif not key_null:
            partition = (murmur2_c(k, klen) & 0x7FFFFFFF) % num_partitions
        else:
            partition = null_key_partition
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
        total = _record_size(b.count, klen, vlen, headers, h0, h1)
        if b.count > 0 and b.buf.size + total > max_batch_bytes:
            out.append((partition, b.finish(timestamp)))
            b.start()
            total = _record_size(0, klen, vlen, headers, h0, h1)
        buf_reserve(&b.buf, total)
        p = _put_record(b.buf.data + b.buf.size, b.count, k, klen, v, vlen, headers, h0, h1)
        b.buf.size = p - b.buf.data
        b.count += 1
    for partition in range(num_partitions):
        b = builders[partition]
        if b is not None and b.count > 0:
            out.append((partition, b.finish(timestamp)))
    return out


cdef Py_ssize_t _body_size(int32_t offset_delta, Py_ssize_t klen, Py_ssize_t vlen,
                           HeadersColumn headers, Py_ssize_t h0, Py_ssize_t h1):
    """Bytes of one record after its length prefix."""
    cdef Py_ssize_t body, h, hk, hv
    body = 2 + varint_size(offset_delta) + varint_size(klen) + (klen if klen > 0 else 0) \
        + varint_size(vlen) + (vlen if vlen > 0 else 0) + varint_size(h1 - h0)
    for h in range(h0, h1):
        headers.keys.value(h, &hk)
        body += varint_size(hk) + hk
        if headers.values.is_null(h):
            body += 1
        else:
            headers.values.value(h, &hv)
            body += varint_size(hv) + hv
    return body


cdef Py_ssize_t _record_size(int32_t offset_delta, Py_ssize_t klen, Py_ssize_t vlen,
                             HeadersColumn headers, Py_ssize_t h0, Py_ssize_t h1):
    cdef Py_ssize_t body = _body_size(offset_delta, klen, vlen, headers, h0, h1)
    return varint_size(body) + body


cdef unsigned char *_put_record(unsigned char *p, int32_t offset_delta,
                                const unsigned char *k, Py_ssize_t klen,
                                const unsigned char *v, Py_ssize_t vlen,
                                HeadersColumn headers, Py_ssize_t h0, Py_ssize_t h1):
    """Write one record, its length prefix first."""
    cdef Py_ssize_t h, hk, hv
    cdef const unsigned char *hkp
    cdef const unsigned char *hvp
    p = put_varint(p, _body_size(offset_delta, klen, vlen, headers, h0, h1))
    p[0] = 0  # attributes
    p[1] = 0  # timestamp delta (varlong 0)
    p = put_varint(p + 2, offset_delta)
    if klen < 0:
        p = put_varint(p, -1)
    else:
        p = put_bytes(p, k, klen)
    if vlen < 0:
        p = put_varint(p, -1)
    else:
        p = put_bytes(p, v, vlen)
    p = put_varint(p, h1 - h0)
    for h in range(h0, h1):
        hkp = headers.keys.value(h, &hk)
        p = put_bytes(p, hkp, hk)
        if headers.values.is_null(h):
            p = put_varint(p, -1)
        else:
            hvp = headers.values.value(h, &hv)
            p = put_bytes(p, hvp, hv)
    return p
