# cython: language_level=3
"""Record batch v2 (magic 2): the layout, the frame check and the errors of the record core.

Layout of one batch (big-endian), byte positions from the start of the batch:
Layout of one batch (big-endian), byte positions from the start of the batch:

    pos  size  field                    covered by the CRC
      0     8  baseOffset               no   (patched by the broker)
      8     4  batchLength              no   (bytes after this field: size - 12)
     12     4  partitionLeaderEpoch     no   (patched by the broker)
     16     1  magic (= 2)              no
     17     4  crc (CRC-32C, unsigned)  no
     21     2  attributes               yes  bits 0-2 codec, 3 LogAppendTime,
                                             4 transactional, 5 control, 6 delete horizon
     23     4  lastOffsetDelta          yes
     27     8  baseTimestamp            yes
     35     8  maxTimestamp             yes
     43     8  producerId               yes
     51     2  producerEpoch            yes
     53     4  baseSequence             yes
     57     4  recordCount              yes
     61     -  records (compressed as a whole when codec != 0)

One record (uncompressed records section):

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Varints are zigzag-encoded (protobuf sint32/sint64). Magic sits at byte 16 in
every message format (v0 and v1 too), so it is read before anything else.

This module owns what every part of the record core shares: the layout (records.pxd,
published to Python as BATCH_LAYOUT), the frame check (header sanity and CRC-32C,
check_frame), the walkers' status codes and the RecordValidationError they become, and
the header as Python values (read_batch_header). The walks themselves live beside it,
each over one concern, linked by cimport of records.pxd:

  batch_validation  validate a Produce or follower payload, assign offsets
  segment_scan      recovery and index rebuilding: one CRC-checking pass over a segment
  segment_seek      header walks over a segment file: a batch by offset or timestamp
  record_decode     records and control records as Python values (the slow paths)

Everything works on whole payloads or whole segments in one call: nothing crosses into
Python once per record. Errors are returned as status codes by the nogil walkers and
turned into RecordValidationError (carrying an ErrorCode) at the Python boundary.
"""

from libc.stdint cimport int64_t

from kbroker.common.errors import KafkaError
from kbroker.common.error_code import ErrorCode


# The layout of records.pxd as Python sees it (kbroker.records.batch_header reads it).
BATCH_LAYOUT = {
    "BASE_OFFSET_POS": BASE_OFFSET_POS,
    "LENGTH_POS": LENGTH_POS,
    "PARTITION_LEADER_EPOCH_POS": PARTITION_LEADER_EPOCH_POS,
    "MAGIC_POS": MAGIC_POS,
    "CRC_POS": CRC_POS,
    "ATTRIBUTES_POS": ATTRIBUTES_POS,
    "LAST_OFFSET_DELTA_POS": LAST_OFFSET_DELTA_POS,
    "BASE_TIMESTAMP_POS": BASE_TIMESTAMP_POS,
    "MAX_TIMESTAMP_POS": MAX_TIMESTAMP_POS,
    "PRODUCER_ID_POS": PRODUCER_ID_POS,
    "PRODUCER_EPOCH_POS": PRODUCER_EPOCH_POS,
    "BASE_SEQUENCE_POS": BASE_SEQUENCE_POS,
    "RECORD_COUNT_POS": RECORD_COUNT_POS,
    "HEADER_SIZE": HEADER_SIZE,
    "LOG_OVERHEAD": LOG_OVERHEAD,
    "CODEC_MASK": CODEC_MASK,
    "TIMESTAMP_TYPE_BIT": TIMESTAMP_TYPE_BIT,
    "TRANSACTIONAL_BIT": TRANSACTIONAL_BIT,
    "CONTROL_BIT": CONTROL_BIT,
    "DELETE_HORIZON_BIT": DELETE_HORIZON_BIT,
}


_MESSAGES = {
    ST_TRUNCATED: "batch truncated: buffer ends before the batch does",
    ST_BAD_LENGTH: "batch length below the v2 record batch header size",
    ST_OLD_MAGIC: "message format v0/v1 is not supported",
    ST_BAD_MAGIC: "unknown magic byte",
    ST_CRC: "CRC-32C mismatch",
    ST_COUNT: "record count does not match lastOffsetDelta + 1",
    ST_RECORDS: "records do not fill the batch",
    ST_TOO_LARGE: "batch larger than max.message.bytes",
    ST_CODEC: "unknown compression codec",
    ST_OFFSET_DELTA: "record offset deltas are not consecutive",
    ST_TIMESTAMP: "timestamp out of the accepted range",
    ST_CONTROL: "clients may not write control batches",
    ST_OFFSET_ORDER: "batch offsets out of order",
    ST_IO: "I/O error",
    ST_NO_KEY: "Compacted topic cannot accept message without key",
}


cdef object _error_code(int status):
    if status == ST_OLD_MAGIC:
        return ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    if status == ST_TOO_LARGE:
        return ErrorCode.MESSAGE_TOO_LARGE
    if status == ST_TIMESTAMP:
        return ErrorCode.INVALID_TIMESTAMP
    if status in (ST_COUNT, ST_OFFSET_DELTA, ST_CONTROL, ST_NO_KEY):
        return ErrorCode.INVALID_RECORD
    if status == ST_IO:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.CORRUPT_MESSAGE


class RecordValidationError(KafkaError):
    """A payload was rejected; `error_code` is the Kafka error to answer with."""

    def __init__(self, error_code, message, position=0):
        super().__init__(f"{ErrorCode(error_code).name}: {message} (at byte {position})")
        self.error_code = ErrorCode(error_code)
        self.position = position


cdef str status_message(int status):
    return _MESSAGES[status]


cdef object status_error(int status, int64_t position):
    """The RecordValidationError of a walker's status, found at byte `position`."""
    return RecordValidationError(_error_code(status), _MESSAGES[status], position)


cdef int check_frame(const unsigned char *p, int64_t avail, Header *h) noexcept nogil:
    """Header sanity and CRC of the batch at p with `avail` bytes left in the buffer."""
    cdef int64_t size
    if avail < LOG_OVERHEAD + 5:
        return ST_TRUNCATED
    if p[MAGIC_POS] != 2:
        return ST_OLD_MAGIC if p[MAGIC_POS] < 2 else ST_BAD_MAGIC
    if avail < HEADER_SIZE:
        return ST_TRUNCATED
    read_header(p, h)
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        return ST_BAD_LENGTH
    size = <int64_t>h.batch_length + LOG_OVERHEAD
    if size > avail:
        return ST_TRUNCATED
    if crc32c_update(0, p + ATTRIBUTES_POS, size - ATTRIBUTES_POS) != h.crc:
        return ST_CRC
    return ST_OK


# The header as Python values, for the slow paths (producer state, the coordinator's
# loading, compaction, tests): one call per batch.

def read_batch_header(const unsigned char[::1] buf, Py_ssize_t position=0):
    """The 13 header fields of the batch at `position`, in layout order."""
    cdef Header h
    if position < 0 or buf.shape[0] - position < HEADER_SIZE:
        raise ValueError(f"a batch header is {HEADER_SIZE} bytes; {buf.shape[0] - position} "
                         f"at position {position}")
    read_header(&buf[0] + position, &h)
    return (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, h.crc,
            h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
            h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)

