# The record batch v2 layout: its one definition (the table at the top of records.pyx
# describes it; Python reads it through kbroker.records.batch_header, which takes the
# positions and the header parser from records.pyx), with inline readers and writers
# of the header and of zigzag varints, and the statuses of the nogil walkers. The
# contract of the record core's modules: batch_validation, segment_scan, segment_seek,
# record_decode (and batch_encode, batch_decode, compaction) cimport what they use from
# here. The inline parts and constants need no runtime link to kbroker._core.records
# (only to crc32c, for seal_batch); check_frame and the status helpers at the end do:
#   from kbroker._core.records cimport Header, read_header, read_varlong, HEADER_SIZE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kbroker._core.crc32c cimport crc32c_update


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
    DELETE_HORIZON_BIT = 0x40


# Zigzag varints (protobuf sint32/sint64): v >= 0 -> 2v, v < 0 -> -2v - 1, then LEB128
# (7 bits a byte, least significant first, high bit set on all but the last byte).

cdef inline int64_t zigzag(uint64_t v) noexcept nogil:
    return <int64_t>(v >> 1) ^ -<int64_t>(v & 1)


cdef inline uint64_t unzigzag(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline int varint_size(int64_t v) noexcept nogil:
    """Bytes put_varint writes for v."""
    cdef uint64_t u = unzigzag(v)
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline unsigned char *put_varint(unsigned char *p, int64_t v) noexcept nogil:
    """Write v as a zigzag varint at p; returns the byte after it."""
    cdef uint64_t u = unzigzag(v)
    while u >= 0x80:
        p[0] = <unsigned char>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <unsigned char>u
    return p + 1


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


cdef inline int read_bytes(const unsigned char **pp, const unsigned char *end,
                           const unsigned char **data, int64_t *length) noexcept nogil:
    """A varint length (-1: null) and that many bytes; 0 on success, -1 if malformed."""
    if read_varlong(pp, end, 5, length) != 0 or length[0] < -1 or length[0] > end - pp[0]:
        return -1
    data[0] = pp[0]
    if length[0] > 0:
        pp[0] += length[0]
    return 0


cdef struct Record:
    int64_t timestamp_delta
    int64_t offset_delta
    const unsigned char *key
    int64_t key_length             # -1: null
    const unsigned char *value
    int64_t value_length           # -1: null
    int64_t header_count
    const unsigned char *headers   # the first header: key (read_bytes, not null) | value (read_bytes)
    const unsigned char *end       # the byte after the record


cdef inline int read_record(const unsigned char **pp, const unsigned char *end,
                            Record *r) noexcept nogil:
    """The record at pp[0], length prefix first; pp[0] moves past it. 0, or -1 if malformed."""
    cdef int64_t length
    cdef const unsigned char *q
    if read_varlong(pp, end, 5, &length) != 0 or length < 6 or length > end - pp[0]:
        return -1
    q = pp[0] + 1  # record attributes: unused in v2
    r.end = pp[0] + length
    if (read_varlong(&q, r.end, 10, &r.timestamp_delta) != 0
            or read_varlong(&q, r.end, 5, &r.offset_delta) != 0
            or read_bytes(&q, r.end, &r.key, &r.key_length) != 0
            or read_bytes(&q, r.end, &r.value, &r.value_length) != 0
            or read_varlong(&q, r.end, 5, &r.header_count) != 0
            or r.header_count < 0 or r.header_count > r.end - q):
        return -1
    r.headers = q
    pp[0] = r.end
    return 0


# A control batch (COMMIT/ABORT marker) holds one uncompressed record:
#     key:   version int16 | type int16 (0 ABORT, 1 COMMIT; Kafka's ControlRecordType)
#     value: version int16 | coordinator_epoch int32 (Kafka's EndTransactionMarker)

cdef enum:
    CONTROL_UNPARSEABLE = -2   # a control batch whose record cannot be read
    CONTROL_NONE = -1          # not a control batch


cdef inline void read_control(const unsigned char *p, int64_t size, int32_t *control_type,
                              int32_t *coordinator_epoch) noexcept nogil:
    """The type and coordinator epoch of the control batch of `size` bytes at p."""
    cdef Record r
    cdef const unsigned char *q = p + HEADER_SIZE
    control_type[0] = CONTROL_UNPARSEABLE
    coordinator_epoch[0] = -1
    if (p[ATTRIBUTES_POS + 1] & CODEC_MASK) != 0 or size <= HEADER_SIZE:
        return
    if read_record(&q, p + size, &r) != 0 or r.key_length < 4:
        return
    if <int16_t>kb_load_be16(r.key) < 0:
        return
    control_type[0] = <int16_t>kb_load_be16(r.key + 2)
    if r.value_length >= 6 and <int16_t>kb_load_be16(r.value) >= 0:
        coordinator_epoch[0] = <int32_t>kb_load_be32(r.value + 2)


cdef inline int64_t put_retimed_record(unsigned char *out, const unsigned char *rec,
                                       const unsigned char *end, int64_t shift) noexcept nogil:
    """Copy the record at rec (its length prefix first; end: where the buffer ends) to out
    with its timestampDelta moved by `shift`, the rest of it unchanged (the log cleaner
    rewrites a batch's records under a new baseTimestamp). out NULL: only size it.
    Returns the bytes it takes, or -1 if the record is malformed."""
    cdef const unsigned char *p = rec
    cdef const unsigned char *body
    cdef const unsigned char *record_end
    cdef unsigned char *q
    cdef int64_t length, ts_delta, new_body
    if read_varlong(&p, end, 5, &length) != 0 or length < 3 or length > end - p:
        return -1
    body = p
    record_end = p + length
    if shift == 0:
        if out != NULL:
            memcpy(out, rec, record_end - rec)
        return record_end - rec
    p += 1  # attributes
    if read_varlong(&p, record_end, 10, &ts_delta) != 0:
        return -1
    new_body = 1 + varint_size(ts_delta + shift) + (record_end - p)
    if out != NULL:
        q = put_varint(out, new_body)
        q[0] = body[0]
        q = put_varint(q + 1, ts_delta + shift)
        memcpy(q, p, record_end - p)
    return varint_size(new_body) + new_body


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


cdef inline void write_header(unsigned char *p, const Header *h) noexcept nogil:
    """Every header field but batchLength and crc, which seal_batch writes last."""
    kb_store_be64(p + BASE_OFFSET_POS, <uint64_t>h.base_offset)
    kb_store_be32(p + PARTITION_LEADER_EPOCH_POS, <uint32_t>h.partition_leader_epoch)
    p[MAGIC_POS] = <unsigned char>h.magic
    kb_store_be16(p + ATTRIBUTES_POS, <uint16_t>h.attributes)
    kb_store_be32(p + LAST_OFFSET_DELTA_POS, <uint32_t>h.last_offset_delta)
    kb_store_be64(p + BASE_TIMESTAMP_POS, <uint64_t>h.base_timestamp)
    kb_store_be64(p + MAX_TIMESTAMP_POS, <uint64_t>h.max_timestamp)
    kb_store_be64(p + PRODUCER_ID_POS, <uint64_t>h.producer_id)
    kb_store_be16(p + PRODUCER_EPOCH_POS, <uint16_t>h.producer_epoch)
    kb_store_be32(p + BASE_SEQUENCE_POS, <uint32_t>h.base_sequence)
    kb_store_be32(p + RECORD_COUNT_POS, <uint32_t>h.record_count)


cdef inline void seal_batch(unsigned char *p, int64_t size) noexcept nogil:
    """Set batchLength from the batch's size and the CRC-32C of attributes..end."""
    kb_store_be32(p + LENGTH_POS, <uint32_t>(size - LOG_OVERHEAD))
    kb_store_be32(p + CRC_POS, crc32c_update(0, p + ATTRIBUTES_POS, size - ATTRIBUTES_POS))


# Statuses of the nogil walkers of records, batch_validation, segment_scan, segment_seek
# and record_decode (compaction keeps its own). status_error turns one into the
# RecordValidationError (with its ErrorCode) that the Python boundary raises.
cdef enum Status:
    ST_OK = 0
    ST_TRUNCATED = 1        # buffer ends inside a batch header or body
    ST_BAD_LENGTH = 2       # batchLength below the v2 header size
    ST_OLD_MAGIC = 3        # magic 0 or 1
    ST_BAD_MAGIC = 4        # any other magic
    ST_CRC = 5
    ST_COUNT = 6            # recordCount vs lastOffsetDelta
    ST_RECORDS = 7          # records do not fill the batch exactly / bad varint
    ST_TOO_LARGE = 8
    ST_CODEC = 9
    ST_OFFSET_DELTA = 10    # record offsetDelta not consecutive
    ST_TIMESTAMP = 11
    ST_CONTROL = 12
    ST_OFFSET_ORDER = 13    # scanner: batch offsets not increasing / not contiguous
    ST_IO = 14
    ST_NO_MEMORY = 15       # a growable buffer could not grow (raised as MemoryError)
    ST_NO_KEY = 16          # a record without a key for a compacted topic


# Defined in records.pyx (a module cimporting them links to kbroker._core.records at run
# time). check_frame: the header sanity and CRC-32C of the batch at p, ST_OK when whole
# and sound, else the status of the first fault.
cdef int check_frame(const unsigned char *p, int64_t avail, Header *h) noexcept nogil
cdef str status_message(int status)
cdef object status_error(int status, int64_t position)
