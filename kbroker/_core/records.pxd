# The record batch v2 layout and inline readers, shared by cimport with other core
# modules (layout table: see the top of records.pyx). Everything here is inline or a
# constant, so a module cimporting it needs no runtime link to kbroker._core.records:
#   from kbroker._core.records cimport Header, read_header, read_varlong, HEADER_SIZE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t


cdef extern from "kb_endian.h" nogil:
    uint16_t kb_load_be16(const void *p)
    uint32_t kb_load_be32(const void *p)
    uint64_t kb_load_be64(const void *p)
    void kb_store_be16(void *p, uint16_t v)
    void kb_store_be32(void *p, uint32_t v)
    void kb_store_be64(void *p, uint64_t v)


cdef enum:
    BASE_OFFSET_POS = 0
    LENGTH_POS = 8
    PARTITION_LEADER_EPOCH_POS = 12
    MAGIC_POS = 16
    CRC_POS = 17
    ATTRIBUTES_POS = 21
    LAST_OFFSET_DELTA_POS = 23
    BASE_TIMESTAMP_POS = 27
    MAX_TIMESTAMP_POS = 35
    PRODUCER_ID_POS = 43
    PRODUCER_EPOCH_POS = 51
    BASE_SEQUENCE_POS = 53
    RECORD_COUNT_POS = 57
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12

cdef enum:
    CODEC_MASK = 0x07
    TIMESTAMP_TYPE_BIT = 0x08
    TRANSACTIONAL_BIT = 0x10
    CONTROL_BIT = 0x20


cdef inline int64_t zigzag(uint64_t v) noexcept nogil:
    return <int64_t>(v >> 1) ^ -<int64_t>(v & 1)


cdef inline int read_varlong(const unsigned char **pp, const unsigned char *end,
                             int max_bytes, int64_t *out) noexcept nogil:
    """Read one zigzag varint of at most max_bytes bytes; 0 on success, -1 if malformed."""
    cdef const unsigned char *p = pp[0]
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef int i
    cdef unsigned char b
    for i in range(max_bytes):
        if p >= end:
            return -1
        b = p[0]
        p += 1
        v |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            pp[0] = p
            out[0] = zigzag(v)
            return 0
        shift += 7
    return -1


cdef struct Header:
    int64_t base_offset
    int32_t batch_length
    int32_t partition_leader_epoch
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t record_count


cdef inline void read_header(const unsigned char *p, Header *h) noexcept nogil:
    h.base_offset = <int64_t>kb_load_be64(p + BASE_OFFSET_POS)
    h.batch_length = <int32_t>kb_load_be32(p + LENGTH_POS)
    h.partition_leader_epoch = <int32_t>kb_load_be32(p + PARTITION_LEADER_EPOCH_POS)
    h.magic = <int8_t>p[MAGIC_POS]
    h.crc = kb_load_be32(p + CRC_POS)
    h.attributes = <int16_t>kb_load_be16(p + ATTRIBUTES_POS)
    h.last_offset_delta = <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS)
    h.base_timestamp = <int64_t>kb_load_be64(p + BASE_TIMESTAMP_POS)
    h.max_timestamp = <int64_t>kb_load_be64(p + MAX_TIMESTAMP_POS)
    h.producer_id = <int64_t>kb_load_be64(p + PRODUCER_ID_POS)
    h.producer_epoch = <int16_t>kb_load_be16(p + PRODUCER_EPOCH_POS)
    h.base_sequence = <int32_t>kb_load_be32(p + BASE_SEQUENCE_POS)
    h.record_count = <int32_t>kb_load_be32(p + RECORD_COUNT_POS)
