# cython: language_level=3
"""Record batch v2 (magic 2): validation, offset assignment and segment scanning.

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

Everything here works on whole payloads or whole segments in one call: nothing
crosses into Python once per record. Errors are returned as status codes by the
nogil walkers and turned into RecordValidationError (carrying an ErrorCode) at
the Python boundary.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport free
from libc.string cimport memcpy, memset
from posix.unistd cimport pread

from kbroker._core.growbuf cimport Buf, buf_put

from kbroker.common.errors import KafkaError
from kbroker.common.error_code import ErrorCode


cdef int64_t INT64_MAX_ = 0x7FFFFFFFFFFFFFFF

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

# Statuses of the nogil walkers.
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


cdef struct RecordWalk:
    int64_t max_timestamp          # largest record timestamp
    int32_t offset_delta_of_max    # offset delta of the first record carrying it
    int64_t min_timestamp


cdef int walk_records(const unsigned char *p, const unsigned char *end, int32_t count,
                      int32_t last_offset_delta, int64_t base_timestamp, bint strict,
                      bint require_keys, RecordWalk *w) noexcept nogil:
    """Walk the uncompressed records section: lengths fill it; offset deltas are 0..count-1
    (strict: a producer's batch) or increase up to last_offset_delta (a batch the cleaner
    rewrote, with gaps); require_keys: every record has a key (a compacted topic)."""
    cdef int64_t length, ts_delta, offset_delta, key_length, ts
    cdef int64_t previous = -1
    cdef const unsigned char *q
    cdef const unsigned char *rec_end
    cdef int32_t i
    w.max_timestamp = -1
    w.offset_delta_of_max = 0
    w.min_timestamp = INT64_MAX_
    for i in range(count):
        if read_varlong(&p, end, 5, &length) != 0 or length < 3 or length > end - p:
            return ST_RECORDS
        rec_end = p + length
        q = p + 1  # skip record attributes
        if read_varlong(&q, rec_end, 10, &ts_delta) != 0:
            return ST_RECORDS
        if read_varlong(&q, rec_end, 5, &offset_delta) != 0:
            return ST_RECORDS
        if (offset_delta != i if strict
                else offset_delta <= previous or offset_delta > last_offset_delta):
            return ST_OFFSET_DELTA
        previous = offset_delta
        if require_keys and (read_varlong(&q, rec_end, 5, &key_length) != 0 or key_length < 0):
            return ST_NO_KEY
        ts = base_timestamp + ts_delta
        if ts > w.max_timestamp:
            w.max_timestamp = ts
            w.offset_delta_of_max = <int32_t>offset_delta
        if ts < w.min_timestamp:
            w.min_timestamp = ts
        p = rec_end
    if p != end:
        return ST_RECORDS
    return ST_OK


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


cdef struct ValidateArgs:
    int64_t max_message_bytes
    int64_t now_ms
    int64_t before_max_ms
    int64_t after_max_ms
    bint check_timestamps
    bint from_client
    bint require_keys


cdef struct Summary:
    int32_t batch_count
    int64_t record_count
    int64_t offset_count
    int64_t max_timestamp
    int64_t offset_of_max_timestamp   # relative to the first offset of the payload
    int32_t codecs                    # bit (1 << codec) for each codec seen
    int16_t attributes_or
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t producer_batches          # batches with a producer id (idempotent, transactional, control)
    int64_t error_position


cdef inline bint timestamp_ok(int64_t ts, const ValidateArgs *a) noexcept nogil:
    if ts == -1:
        return True
    if a.before_max_ms < a.now_ms and ts < a.now_ms - a.before_max_ms:
        return False
    if a.after_max_ms <= INT64_MAX_ - a.now_ms and ts > a.now_ms + a.after_max_ms:
        return False
    return True


cdef int validate_one(const unsigned char *p, int64_t avail, const ValidateArgs *a,
                      Summary *s) noexcept nogil:
    cdef Header h
    cdef RecordWalk w
    cdef int st = check_frame(p, avail, &h)
    cdef int codec
    cdef int64_t size, max_ts
    cdef int32_t max_delta
    if st != ST_OK:
        return st
    size = <int64_t>h.batch_length + LOG_OVERHEAD
    if size > a.max_message_bytes:
        return ST_TOO_LARGE
    codec = h.attributes & CODEC_MASK
    if codec > 4:
        return ST_CODEC
    if h.last_offset_delta < 0 or (
            h.record_count != h.last_offset_delta + 1 if a.from_client
            # the cleaner keeps a producer's last batch empty and drops records of others
            else h.record_count < 0 or h.record_count > <int64_t>h.last_offset_delta + 1):
        return ST_COUNT
    if a.from_client and (h.attributes & CONTROL_BIT):
        return ST_CONTROL
    max_ts = h.max_timestamp
    max_delta = h.last_offset_delta
    if codec == 0:
        st = walk_records(p + HEADER_SIZE, p + size, h.record_count, h.last_offset_delta,
                          h.base_timestamp, a.from_client,
                          a.require_keys and not (h.attributes & CONTROL_BIT), &w)
        if st != ST_OK:
            return st
        if a.check_timestamps and (not timestamp_ok(w.min_timestamp, a)
                                   or not timestamp_ok(w.max_timestamp, a)):
            return ST_TIMESTAMP
        if w.max_timestamp == max_ts:
            max_delta = w.offset_delta_of_max
    elif a.check_timestamps and (not timestamp_ok(h.base_timestamp, a)
                                 or not timestamp_ok(max_ts, a)):
        return ST_TIMESTAMP
    if s.batch_count == 0:
        s.producer_id = h.producer_id
        s.producer_epoch = h.producer_epoch
        s.base_sequence = h.base_sequence
    if max_ts > s.max_timestamp:
        s.max_timestamp = max_ts
        s.offset_of_max_timestamp = s.offset_count + max_delta
    if h.producer_id >= 0:
        s.producer_batches += 1
    s.batch_count += 1
    s.record_count += h.record_count
    s.offset_count += <int64_t>h.last_offset_delta + 1
    s.codecs |= 1 << codec
    s.attributes_or |= h.attributes
    return ST_OK


cdef int validate_all(const unsigned char *buf, int64_t n, const ValidateArgs *a,
                      Summary *s) noexcept nogil:
    cdef int64_t pos = 0
    cdef int st
    s.batch_count = 0
    s.record_count = 0
    s.offset_count = 0
    s.max_timestamp = -1
    s.offset_of_max_timestamp = -1
    s.codecs = 0
    s.attributes_or = 0
    s.producer_id = -1
    s.producer_epoch = -1
    s.base_sequence = -1
    s.producer_batches = 0
    while pos < n:
        st = validate_one(buf + pos, n - pos, a, s)
        if st != ST_OK:
            s.error_position = pos
            return st
        pos += <int64_t>(<int32_t>kb_load_be32(buf + pos + LENGTH_POS)) + LOG_OVERHEAD
    return ST_OK


cdef class BatchesInfo:
    """What validate_batches learnt about a payload (offsets relative to its first offset)."""

    cdef readonly int batch_count
    cdef readonly long long record_count
    cdef readonly long long offset_count
    cdef readonly long long max_timestamp
    cdef readonly long long offset_of_max_timestamp
    cdef readonly int codecs
    cdef readonly int attributes_or
    cdef readonly long long producer_id
    cdef readonly int producer_epoch
    cdef readonly int base_sequence
    cdef readonly int producer_batches
    cdef readonly long long valid_bytes

    @property
    def compressed(self):
        return (self.codecs & ~1) != 0

    @property
    def has_transactional(self):
        return (self.attributes_or & TRANSACTIONAL_BIT) != 0

    @property
    def has_control(self):
        return (self.attributes_or & CONTROL_BIT) != 0

    def __repr__(self):
        return (f"BatchesInfo(batch_count={self.batch_count}, record_count={self.record_count}, "
                f"offset_count={self.offset_count}, max_timestamp={self.max_timestamp}, "
                f"valid_bytes={self.valid_bytes})")


def validate_batches(const unsigned char[::1] buf, long long max_message_bytes=0x7FFFFFFF, *,
                     long long now_ms=0, long long timestamp_before_max_ms=0x7FFFFFFFFFFFFFFF,
                     long long timestamp_after_max_ms=0x7FFFFFFFFFFFFFFF,
                     bint check_timestamps=False, bint from_client=True,
                     bint require_keys=False):
    """Validate every batch of a Produce payload without decoding compressed records.

    from_client=False accepts what the log cleaner writes (a follower copies it as it is):
    empty batches and records with offset gaps. require_keys: every record of an
    uncompressed data batch has a key (a compacted topic; the caller checks compressed
    batches with keyless_records). Raises RecordValidationError (with .error_code) on the
    first bad batch.
    """
    cdef ValidateArgs a
    cdef Summary s
    cdef int st
    cdef int64_t n = buf.shape[0]
    cdef const unsigned char *p = &buf[0] if n > 0 else NULL
    a.max_message_bytes = max_message_bytes
    a.now_ms = now_ms
    a.before_max_ms = timestamp_before_max_ms
    a.after_max_ms = timestamp_after_max_ms
    a.check_timestamps = check_timestamps
    a.from_client = from_client
    a.require_keys = require_keys
    s.error_position = 0
    with nogil:
        st = validate_all(p, n, &a, &s)
    if st != ST_OK:
        raise RecordValidationError(_error_code(st), _MESSAGES[st], s.error_position)
    cdef BatchesInfo info = BatchesInfo.__new__(BatchesInfo)
    info.batch_count = s.batch_count
    info.record_count = s.record_count
    info.offset_count = s.offset_count
    info.max_timestamp = s.max_timestamp
    info.offset_of_max_timestamp = s.offset_of_max_timestamp
    info.codecs = s.codecs
    info.attributes_or = s.attributes_or
    info.producer_id = s.producer_id
    info.producer_epoch = s.producer_epoch
    info.base_sequence = s.base_sequence
    info.producer_batches = s.producer_batches
    info.valid_bytes = n
    return info


def assign_offsets(unsigned char[::1] buf, long long base_offset, int partition_leader_epoch,
                   long long log_append_time=-1):
    """Patch baseOffset and partitionLeaderEpoch of every (validated) batch in place.

    With log_append_time >= 0 also set the LogAppendTime attribute bit and maxTimestamp
    and recompute the CRC (the only case that touches CRC-covered bytes). Returns the
    last offset assigned.
    """
    cdef int64_t n = buf.shape[0]
    cdef int64_t pos = 0
    cdef int64_t next_offset = base_offset
    cdef int64_t size
    cdef unsigned char *p
    cdef int32_t last_delta
    cdef uint16_t attrs
    if n == 0:
        return base_offset - 1
    with nogil:
        while pos + HEADER_SIZE <= n:
            p = &buf[0] + pos
            size = <int64_t>(<int32_t>kb_load_be32(p + LENGTH_POS)) + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + size > n:
                break
            last_delta = <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS)
            kb_store_be64(p + BASE_OFFSET_POS, <uint64_t>next_offset)
            kb_store_be32(p + PARTITION_LEADER_EPOCH_POS, <uint32_t>partition_leader_epoch)
            if log_append_time >= 0:
                attrs = kb_load_be16(p + ATTRIBUTES_POS) | TIMESTAMP_TYPE_BIT
                kb_store_be16(p + ATTRIBUTES_POS, attrs)
                kb_store_be64(p + MAX_TIMESTAMP_POS, <uint64_t>log_append_time)
                seal_batch(p, size)
            next_offset += <int64_t>last_delta + 1
            pos += size
    if pos != n:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "payload not validated", pos)
    return next_offset - 1


# ---------------------------------------------------------------------------------------
# Segment scanning (recovery, index rebuilding, follower appends): one nogil pass over
# the segment's bytes. Index entries are written big-endian into growable buffers, as
# they lie in the index files:
#
#     offset index entry   relative offset int32 | position int32
#     time index entry     max timestamp so far int64 | relative offset int32
#
# and each leader epoch change as an EpochStart. Python sees them once, at the end.

cdef struct EpochStart:
    int32_t epoch
    int64_t start_offset


cdef struct Scan:
    # what the caller knows (inputs)
    int64_t base_offset
    int64_t index_interval_bytes
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


cdef int scan_index_entry(Scan *s, int64_t last_offset) noexcept nogil:
    """The index entries for the batch at s.position (Kafka's LogSegment.recover)."""
    cdef unsigned char entry[12]
    kb_store_be32(entry, <uint32_t>(last_offset - s.base_offset))
    kb_store_be32(entry + 4, <uint32_t>s.position)
    if buf_put(&s.offset_index, entry, 8) != 0:
        return ST_NO_MEMORY
    if s.max_timestamp > s.last_time_index_timestamp:
        kb_store_be64(entry, <uint64_t>s.max_timestamp)
        kb_store_be32(entry + 8, <uint32_t>(s.offset_of_max_timestamp - s.base_offset))
        if buf_put(&s.time_index, entry, 12) != 0:
            return ST_NO_MEMORY
        s.last_time_index_timestamp = s.max_timestamp
    s.last_entry_position = s.position
    return ST_OK


cdef int scan_batch(const unsigned char *p, int64_t avail, Scan *s) noexcept nogil:
    """Check the batch at p (s.position) and account for it; a status on the first fault."""
    cdef Header h
    cdef EpochStart e
    cdef int64_t last_offset
    cdef int st = check_frame(p, avail, &h)
    if st != ST_OK:
        return st
    last_offset = h.base_offset + h.last_offset_delta
    if (h.base_offset < s.base_offset or h.last_offset_delta < 0
            or last_offset - s.base_offset > 0x7FFFFFFF
            or (s.next_offset >= 0 and h.base_offset < s.next_offset)
            or (s.require_contiguous and s.next_offset >= 0 and h.base_offset != s.next_offset)):
        return ST_OFFSET_ORDER
    if h.max_timestamp > s.max_timestamp:
        s.max_timestamp = h.max_timestamp
        s.offset_of_max_timestamp = last_offset
    if s.position - s.last_entry_position > s.index_interval_bytes:
        st = scan_index_entry(s, last_offset)
        if st != ST_OK:
            return st
    if h.partition_leader_epoch >= 0 and h.partition_leader_epoch > s.epoch:
        s.epoch = h.partition_leader_epoch
        e.epoch = s.epoch
        e.start_offset = h.base_offset
        if buf_put(&s.epoch_starts, &e, sizeof(e)) != 0:
            return ST_NO_MEMORY
    if h.producer_id >= 0:
        s.producer_batches += 1
    s.next_offset = last_offset + 1
    s.batch_count += 1
    s.position += <int64_t>h.batch_length + LOG_OVERHEAD
    return ST_OK


cdef int scan_all(const unsigned char *buf, int64_t n, Scan *s) noexcept nogil:
    """Walk batches from s.position to the end of buf; stop at the first bad one."""
    cdef int st
    while s.position < n:
        st = scan_batch(buf + s.position, n - s.position, s)
        if st != ST_OK:
            return st
    return ST_OK


cdef class SegmentScan:
    """Result of scan_segment: the valid prefix and the index entries to write for it."""

    cdef readonly long long valid_bytes
    cdef readonly int batch_count
    cdef readonly long long next_offset
    cdef readonly long long max_timestamp
    cdef readonly long long offset_of_max_timestamp
    cdef readonly long long bytes_since_last_index_entry
    cdef readonly bytes offset_index_entries
    cdef readonly bytes time_index_entries
    cdef readonly list epoch_starts
    cdef readonly int producer_batches
    cdef readonly object error

    def __repr__(self):
        return (f"SegmentScan(valid_bytes={self.valid_bytes}, batch_count={self.batch_count}, "
                f"next_offset={self.next_offset}, error={self.error!r})")


cdef SegmentScan scan_result(const Scan *s, int st):
    cdef SegmentScan r = SegmentScan.__new__(SegmentScan)
    cdef const EpochStart *e = <const EpochStart *>s.epoch_starts.data
    cdef Py_ssize_t i
    r.valid_bytes = s.position
    r.batch_count = s.batch_count
    r.producer_batches = s.producer_batches
    r.next_offset = s.next_offset
    r.max_timestamp = s.max_timestamp
    r.offset_of_max_timestamp = s.offset_of_max_timestamp
    r.bytes_since_last_index_entry = s.position - s.last_entry_position
    r.offset_index_entries = PyBytes_FromStringAndSize(<const char *>s.offset_index.data,
                                                       s.offset_index.size)
    r.time_index_entries = PyBytes_FromStringAndSize(<const char *>s.time_index.data,
                                                     s.time_index.size)
    r.epoch_starts = [(e[i].epoch, e[i].start_offset)
                      for i in range(s.epoch_starts.size // <Py_ssize_t>sizeof(EpochStart))]
    r.error = None if st == ST_OK else _MESSAGES[st]
    return r


def scan_segment(const unsigned char[::1] buf, long long base_offset, long long start_position=0,
                 long long expected_next_offset=-1, long long index_interval_bytes=4096,
                 long long last_time_index_timestamp=-1, long long max_timestamp=-1,
                 long long offset_of_max_timestamp=-1, int last_epoch=-1,
                 bint require_contiguous=False):
    """Walk a segment's bytes from start_position, batch by batch, checking CRCs.

    Stops at the first invalid or torn batch. Builds the sparse offset index entries
    (relative last offset int32, position int32) and time index entries (max timestamp
    so far int64, relative offset int32) as Kafka's LogSegment.recover does, and the
    leader epoch changes [(epoch, start_offset)] seen after `last_epoch`. One pass
    without the GIL.
    """
    cdef int64_t n = buf.shape[0]
    cdef const unsigned char *b = &buf[0] if n > 0 else NULL
    cdef Scan s
    cdef int st
    if start_position < 0 or start_position > n:
        raise ValueError(f"start_position {start_position} outside the {n} bytes given")
    memset(&s, 0, sizeof(s))
    s.base_offset = base_offset
    s.index_interval_bytes = index_interval_bytes
    s.require_contiguous = require_contiguous
    s.position = s.last_entry_position = start_position
    s.next_offset = expected_next_offset
    s.last_time_index_timestamp = last_time_index_timestamp
    s.max_timestamp = max_timestamp
    s.offset_of_max_timestamp = offset_of_max_timestamp
    s.epoch = last_epoch
    try:
        with nogil:
            st = scan_all(b, n, &s)
        if st == ST_NO_MEMORY:
            raise MemoryError()
        return scan_result(&s, st)
    finally:
        free(s.offset_index.data)
        free(s.time_index.data)
        free(s.epoch_starts.data)


# ---------------------------------------------------------------------------------------
# Header walks over a segment file descriptor (offset -> position, timestamp -> position)

cdef enum:
    CURSOR_BUF = 16384

cdef struct Cursor:
    int fd
    int64_t buf_pos
    int64_t buf_len
    unsigned char buf[CURSOR_BUF]


cdef const unsigned char *cursor_header(Cursor *c, int64_t pos, int64_t end) noexcept nogil:
    """The 61 header bytes at pos (reading ahead), or NULL on a short file / error."""
    cdef int64_t want, got
    cdef ssize_t r
    if pos >= c.buf_pos and pos + HEADER_SIZE <= c.buf_pos + c.buf_len:
        return c.buf + (pos - c.buf_pos)
    want = end - pos
    if want > CURSOR_BUF:
        want = CURSOR_BUF
    if want < HEADER_SIZE:
        return NULL
    got = 0
    while got < want:
        r = pread(c.fd, c.buf + got, want - got, pos + got)
        if r <= 0:
            break
        got += r
    c.buf_pos = pos
    c.buf_len = got
    if got < HEADER_SIZE:
        return NULL
    return c.buf


cdef enum WalkMode:
    WALK_ALL = 0         # to the end: count, next offset, max timestamp
    WALK_TO_OFFSET = 1   # stop at the first batch whose last offset >= target
    WALK_TO_TIMESTAMP = 2  # stop at the first batch whose maxTimestamp >= target

cdef struct Walk:
    bint found
    int64_t position     # where the walk stopped (the found batch, or the end)
    int64_t base_offset  # of the found batch
    int64_t last_offset
    int64_t size
    int64_t timestamp    # maxTimestamp of the found batch
    int32_t count        # batches passed
    int64_t next_offset  # after the last batch passed (-1: none)
    int64_t max_timestamp
    int64_t offset_of_max_timestamp


cdef void walk_headers(int fd, int64_t start, int64_t end, int mode, int64_t target,
                       Walk *w) noexcept nogil:
    """Walk batch headers (no CRC) through a read-ahead buffer; see WalkMode."""
    cdef Cursor c
    cdef const unsigned char *p
    cdef int64_t pos = start, size, base, last, ts
    c.fd = fd
    c.buf_pos = 0
    c.buf_len = 0
    w.found = False
    w.count = 0
    w.next_offset = -1
    w.max_timestamp = -1
    w.offset_of_max_timestamp = -1
    while pos < end:
        p = cursor_header(&c, pos, end)
        if p == NULL:
            break
        size = <int64_t>(<int32_t>kb_load_be32(p + LENGTH_POS)) + LOG_OVERHEAD
        if size < HEADER_SIZE or (mode == WALK_ALL and pos + size > end):
            break
        base = <int64_t>kb_load_be64(p)
        last = base + <int32_t>kb_load_be32(p + LAST_OFFSET_DELTA_POS)
        ts = <int64_t>kb_load_be64(p + MAX_TIMESTAMP_POS)
        if (mode == WALK_TO_OFFSET and last >= target) or (mode == WALK_TO_TIMESTAMP and ts >= target):
            w.found = True
            w.base_offset = base
            w.last_offset = last
            w.size = size
            w.timestamp = ts
            break
        if ts > w.max_timestamp:
            w.max_timestamp = ts
            w.offset_of_max_timestamp = last
        w.next_offset = last + 1
        w.count += 1
        pos += size
    w.position = pos


def find_batch(int fd, long long start_position, long long end_position, long long target_offset):
    """First batch at or after start_position whose last offset >= target_offset.

    Returns (position, base_offset, last_offset, size) or None when none exists before
    end_position. Reads headers only, through a small read-ahead buffer.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_TO_OFFSET, target_offset, &w)
    if not w.found:
        return None
    return (w.position, w.base_offset, w.last_offset, w.size)


def find_batch_by_timestamp(int fd, long long start_position, long long end_position,
                            long long target_timestamp):
    """First batch at or after start_position whose maxTimestamp >= target_timestamp.

    Returns (position, base_offset, last_offset, size, max_timestamp) or None.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_TO_TIMESTAMP, target_timestamp, &w)
    if not w.found:
        return None
    return (w.position, w.base_offset, w.last_offset, w.size, w.timestamp)


def record_timestamps(const unsigned char[::1] records, int count, long long base_timestamp):
    """(offset_delta, timestamp) of each record of an uncompressed records section.

    For ListOffsets by timestamp inside one batch (rare path); compressed batches are
    decompressed by the caller first.
    """
    cdef int64_t n = records.shape[0]
    cdef const unsigned char *p = &records[0] if n > 0 else NULL
    cdef const unsigned char *end = p + n
    cdef const unsigned char *q
    cdef int64_t length, ts_delta, offset_delta
    cdef list out = []
    cdef int i
    for i in range(count):
        if read_varlong(&p, end, 5, &length) != 0 or length < 3 or length > end - p:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "bad record length", 0)
        q = p + 1
        if read_varlong(&q, p + length, 10, &ts_delta) != 0 or \
                read_varlong(&q, p + length, 5, &offset_delta) != 0:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "bad record header", 0)
        out.append((offset_delta, base_timestamp + ts_delta))
        p += length
    return out


def scan_headers(int fd, long long start_position, long long end_position):
    """Walk batch headers (no CRC) from start_position to end_position.

    Returns (batch_count, next_offset, max_timestamp, offset_of_max_timestamp, end):
    next_offset is -1 without batches; end is where the walk stopped (== end_position
    unless the file holds a partial batch there). Used to find a loaded segment's next
    offset and the max timestamp of its tail after the last index entry.
    """
    cdef Walk w
    with nogil:
        walk_headers(fd, start_position, end_position, WALK_ALL, 0, &w)
    return (w.count, w.next_offset, w.max_timestamp, w.offset_of_max_timestamp, w.position)


def assign_offsets_pieces(buf, long long base_offset, int partition_leader_epoch):
    """assign_offsets for a read-only payload, without copying it.

    Returns (pieces, last_offset): for each batch a patched copy of its first 16 bytes
    (baseOffset, batchLength, partitionLeaderEpoch) and a memoryview of the rest, ready
    for os.pwritev. The CRC does not cover the patched bytes, so nothing else changes.
    """
    cdef const unsigned char[::1] b = buf
    cdef int64_t n = b.shape[0]
    cdef int64_t pos = 0, size
    cdef int64_t next_offset = base_offset
    cdef unsigned char head[16]
    cdef list pieces = []
    view = memoryview(buf).cast("B") if not isinstance(buf, bytes) else memoryview(buf)
    while pos + HEADER_SIZE <= n:
        size = <int64_t>(<int32_t>kb_load_be32(&b[pos] + LENGTH_POS)) + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > n:
            break
        memcpy(head, &b[pos], 16)
        kb_store_be64(head + BASE_OFFSET_POS, <uint64_t>next_offset)
        kb_store_be32(head + PARTITION_LEADER_EPOCH_POS, <uint32_t>partition_leader_epoch)
        pieces.append(head[:16])
        pieces.append(view[pos + 16:pos + size])
        next_offset += <int64_t>(<int32_t>kb_load_be32(&b[pos] + LAST_OFFSET_DELTA_POS)) + 1
        pos += size
    if pos != n:
        raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "payload not validated", pos)
    return pieces, next_offset - 1


# ---------------------------------------------------------------------------------------
# Producer batches: what producer state and transactions need of a batch, for the batches
# that carry a producer id only (a non-idempotent log yields nothing, at header-walk cost).
#
# A control batch (COMMIT/ABORT marker) holds one uncompressed record (read_control, in
# records.pxd).

cdef tuple producer_batch(const Header *h, int32_t control_type, int32_t coordinator_epoch):
    return (h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch,
            h.base_sequence, h.max_timestamp, h.attributes, control_type, coordinator_epoch)


def producer_batches(const unsigned char[::1] buf):
    """(base_offset, last_offset_delta, producer_id, producer_epoch, base_sequence,
    max_timestamp, attributes, control_type, coordinator_epoch) of each batch of `buf`
    (whole batches, validated) that carries a producer id; control_type is -1 for a data
    batch, -2 for a control batch whose record cannot be read."""
    cdef int64_t n = buf.shape[0]
    cdef int64_t pos = 0, size
    cdef const unsigned char *p
    cdef Header h
    cdef int32_t control_type, coordinator_epoch
    cdef list out = []
    while pos + HEADER_SIZE <= n:
        p = &buf[0] + pos
        read_header(p, &h)
        size = <int64_t>h.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > n:
            break
        if h.producer_id >= 0:
            control_type, coordinator_epoch = CONTROL_NONE, -1
            if h.attributes & CONTROL_BIT:
                read_control(p, size, &control_type, &coordinator_epoch)
            out.append(producer_batch(&h, control_type, coordinator_epoch))
        pos += size
    return out


def read_producer_batches(int fd, long long start_position, long long end_position,
                          long long start_offset, long long end_offset):
    """producer_batches of a segment file: the batches from start_position (whose last
    offset >= start_offset) to end_position or the first batch at or above end_offset.
    Reads headers through a read-ahead buffer, and the record of each control batch."""
    cdef Cursor c
    cdef const unsigned char *p
    cdef unsigned char control[256]
    cdef int64_t pos = start_position, size
    cdef Header h
    cdef int32_t control_type, coordinator_epoch
    cdef ssize_t got
    cdef list out = []
    c.fd = fd
    c.buf_pos = 0
    c.buf_len = 0
    while pos < end_position:
        with nogil:
            p = cursor_header(&c, pos, end_position)
        if p == NULL:
            break
        read_header(p, &h)
        size = <int64_t>h.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end_position or h.base_offset >= end_offset:
            break
        if h.producer_id >= 0 and h.base_offset + h.last_offset_delta >= start_offset:
            control_type, coordinator_epoch = CONTROL_NONE, -1
            if h.attributes & CONTROL_BIT:
                if size <= <int64_t>sizeof(control):
                    with nogil:
                        got = pread(fd, control, size, pos)
                    if got == size:
                        read_control(control, size, &control_type, &coordinator_epoch)
                else:
                    control_type = CONTROL_UNPARSEABLE
            out.append(producer_batch(&h, control_type, coordinator_epoch))
        pos += size
    return out


# ---------------------------------------------------------------------------------------
# Headers and records as Python values, for the slow paths (producer state, the
# coordinator's loading, compaction, tests): one call per batch.

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


cdef object _bytes_or_none(const unsigned char *data, int64_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *>data, length)


cdef list _record_headers(const Record *r):
    """[(key, value)] of a record (keys UTF-8); None when a header is malformed."""
    cdef const unsigned char *p = r.headers
    cdef const unsigned char *key = NULL
    cdef const unsigned char *value = NULL
    cdef int64_t key_length = -1, value_length = -1, i
    cdef list out = []
    for i in range(r.header_count):
        if (read_bytes(&p, r.end, &key, &key_length) != 0 or key_length < 0
                or read_bytes(&p, r.end, &value, &value_length) != 0):
            return None
        out.append((PyUnicode_DecodeUTF8(<const char *>key, key_length, "replace"),
                    _bytes_or_none(value, value_length)))
    if p != r.end:
        return None
    return out


def decode_records(const unsigned char[::1] section, int count):
    """[(offset_delta, timestamp_delta, key, value, [(header_key, header_value)])] of the
    `count` records of an uncompressed records section (RecordValidationError if malformed)."""
    cdef int64_t n = section.shape[0]
    cdef const unsigned char *p = &section[0] if n > 0 else NULL
    cdef const unsigned char *start = p
    cdef const unsigned char *end = p + n
    cdef Record r
    cdef list out = []
    cdef list headers
    cdef int i
    memset(&r, 0, sizeof(r))
    for i in range(count):
        headers = None
        if read_record(&p, end, &r) == 0:
            headers = _record_headers(&r)
        if headers is None:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, f"malformed record {i}",
                                        p - start)
        out.append((r.offset_delta, r.timestamp_delta, _bytes_or_none(r.key, r.key_length),
                    _bytes_or_none(r.value, r.value_length), headers))
    return out


def keyless_records(const unsigned char[::1] section, int count):
    """The indexes of the records without a key among the `count` records of an
    uncompressed records section (a compacted topic refuses them: INVALID_RECORD);
    RecordValidationError if the section is malformed."""
    cdef int64_t n = section.shape[0]
    cdef const unsigned char *p = &section[0] if n > 0 else NULL
    cdef const unsigned char *start = p
    cdef const unsigned char *end = p + n
    cdef Record r
    cdef list out = []
    cdef int i
    for i in range(count):
        if read_record(&p, end, &r) != 0:
            raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE, f"malformed record {i}",
                                        p - start)
        if r.key_length < 0:
            out.append(i)
    return out
