# cython: language_level=3
"""Record batch validation and offset assignment (Kafka's LogValidator, and the
follower's analyzeAndValidateRecords), over the layout of records.pxd.

validate_batches checks every batch of a Produce payload (the frame and CRC-32C through
records.check_frame, the records of an uncompressed batch walked, timestamps, keys)
without decoding compressed records; assign_offsets and assign_offsets_pieces then patch
baseOffset and partitionLeaderEpoch, which lie before the CRC-covered bytes.
validate_follower_batches is the follower's one walk over a fetched payload: the same
checks, and on the same batches segment_scan's accounting (offsets increasing, leader
epoch changes), so each batch's CRC-32C is computed once.

The walkers run without the GIL and return records.pxd statuses; the Python functions
raise them as RecordValidationError (with the ErrorCode to answer with).
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kbroker._core.records cimport (
    ATTRIBUTES_POS,
    BASE_OFFSET_POS,
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_POS,
    PARTITION_LEADER_EPOCH_POS,
    ST_CODEC,
    ST_CONTROL,
    ST_COUNT,
    ST_NO_KEY,
    ST_NO_MEMORY,
    ST_OFFSET_DELTA,
    ST_OK,
    ST_RECORDS,
    ST_TIMESTAMP,
    ST_TOO_LARGE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Header,
    check_frame,
    kb_load_be16,
    kb_load_be32,
    kb_store_be16,
    kb_store_be32,
    kb_store_be64,
    read_varlong,
    seal_batch,
    status_error,
)
from kbroker._core.segment_scan cimport Scan, epoch_start_list, scan_account, scan_free, scan_start

from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode


cdef int64_t INT64_MAX_ = 0x7FFFFFFFFFFFFFFF


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
                      Summary *s, Header *h) noexcept nogil:
    """Check the batch at p (its header read into h) and add it to the summary."""
    cdef RecordWalk w
    cdef int st = check_frame(p, avail, h)
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


cdef void summary_start(Summary *s) noexcept nogil:
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
    s.error_position = 0


cdef int validate_all(const unsigned char *buf, int64_t n, const ValidateArgs *a,
                      Summary *s, Scan *scan, int *scan_status) noexcept nogil:
    """Validate every batch into the summary; the first fault's status. With a scan (a
    follower's append, else NULL), scan_account on each batch too, until the first whose
    offsets do not follow (scan_status: ST_OK, or its status; scan.position: where)."""
    cdef int64_t pos = 0
    cdef int st
    cdef Header h
    summary_start(s)
    scan_status[0] = ST_OK
    while pos < n:
        st = validate_one(buf + pos, n - pos, a, s, &h)
        if st != ST_OK:
            s.error_position = pos
            return st
        if scan != NULL and scan_status[0] == ST_OK:
            scan_status[0] = scan_account(&h, scan)
        pos += <int64_t>h.batch_length + LOG_OVERHEAD
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
    cdef int st, no_scan
    cdef int64_t n = buf.shape[0]
    cdef const unsigned char *p = &buf[0] if n > 0 else NULL
    a.max_message_bytes = max_message_bytes
    a.now_ms = now_ms
    a.before_max_ms = timestamp_before_max_ms
    a.after_max_ms = timestamp_after_max_ms
    a.check_timestamps = check_timestamps
    a.from_client = from_client
    a.require_keys = require_keys
    with nogil:
        st = validate_all(p, n, &a, &s, NULL, &no_scan)
    if st != ST_OK:
        raise status_error(st, s.error_position)
    cdef BatchesInfo info = BatchesInfo.__new__(BatchesInfo)
    fill_info(info, &s, n)
    return info


cdef void fill_info(BatchesInfo info, const Summary *s, int64_t n):
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


cdef class FollowerBatchesInfo(BatchesInfo):
    """What validate_follower_batches learnt: BatchesInfo, and the offsets the leader
    assigned as segment_scan accounts for them. `in_order_bytes` is the prefix whose
    batches' offsets increase (all of valid_bytes when they do); next_offset follows its
    last batch (-1: none); epoch_starts [(epoch, start_offset)] are the leader epoch
    changes within it."""

    cdef readonly long long in_order_bytes
    cdef readonly long long next_offset
    cdef readonly list epoch_starts


def validate_follower_batches(const unsigned char[::1] buf,
                              long long max_message_bytes=0x7FFFFFFF):
    """validate_batches(buf, max_message_bytes, from_client=False) and scan_segment(buf, 0)
    in one walk, the CRC-32C of each batch computed once: a follower's append of fetched
    batches. Offsets are 64-bit here (scan_segment's are relative to a segment's base,
    int32). Raises RecordValidationError as validate_batches does; offsets out of order
    are not an error here, but in_order_bytes < valid_bytes (the caller refuses them)."""
    cdef ValidateArgs a
    cdef Summary s
    cdef Scan scan
    cdef int st, scan_status
    cdef int64_t n = buf.shape[0]
    cdef const unsigned char *p = &buf[0] if n > 0 else NULL
    cdef FollowerBatchesInfo info
    a.max_message_bytes = max_message_bytes
    a.now_ms = 0
    a.before_max_ms = a.after_max_ms = 0x7FFFFFFFFFFFFFFF
    a.check_timestamps = a.require_keys = False
    a.from_client = False
    # based at 0, no index entries, offsets 64-bit: which segment holds a batch (no offset
    # more than INT32_MAX above its base) is the log's to decide, not the payload's
    scan_start(&scan, 0, 0, 1LL << 62)
    scan.max_relative_offset = INT64_MAX_
    try:
        with nogil:
            st = validate_all(p, n, &a, &s, &scan, &scan_status)
        if st != ST_OK:
            raise status_error(st, s.error_position)
        if scan_status == ST_NO_MEMORY:
            raise MemoryError()
        info = FollowerBatchesInfo.__new__(FollowerBatchesInfo)
        fill_info(info, &s, n)
        info.in_order_bytes = scan.position
        info.next_offset = scan.next_offset
        info.epoch_starts = epoch_start_list(&scan)
        return info
    finally:
        scan_free(&scan)


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

