# cython: language_level=3
"""Records and control records as Python values, for the slow paths (producer state, the
coordinator's loading, compaction, compacted topics' key checks): one call per batch or
records section, never one per record. (batch_decode is the other decoder: whole fetches
into Arrow buffers for the Spark reader.)

producer_batches / read_producer_batches: what producer state and transactions need of
each batch that carries a producer id, with the marker of a control batch (read_control,
records.pxd; read_producer_batches walks a segment file with segment_seek's Cursor).
decode_records / keyless_records: the records of an uncompressed records section
(read_record, records.pxd); RecordValidationError when it is malformed.
"""

from libc.stdint cimport int32_t, int64_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memset
from posix.unistd cimport pread

from kbroker._core.records cimport (
    CONTROL_BIT,
    CONTROL_NONE,
    CONTROL_UNPARSEABLE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Header,
    Record,
    read_bytes,
    read_control,
    read_header,
    read_record,
)
from kbroker._core.segment_seek cimport Cursor, cursor_header, cursor_start

from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode


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
    cursor_start(&c, fd)
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
