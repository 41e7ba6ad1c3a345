# cython: language_level=3
"""The log cleaner's per-record work: Kafka's Cleaner.buildOffsetMap (map_keys) and
MemoryRecords.filterTo with the cleaner's RecordFilter (RecordFilter.filter), over a
chunk of a segment read into memory: whole batches back to back (layout in records.pyx).

The Python cleaner (kbroker/storage/cleaner.py) reads a chunk, asks batch_plan which
batches need it - transactional and control batches (it decides them with the
transactions it follows) and compressed ones (it inflates them with the codecs, which
the core does not import) - then hands the decisions and the inflated records over in one
call that walks every batch and record without the GIL.

Which record survives (Kafka's Cleaner.shouldRetainRecord), for a data batch:

    offset > the map's latest offset          kept (the map never saw it)
    no key                                    dropped (counted as invalid)
    offset < the map's offset for its key     dropped (a later record has the key)
    a tombstone (null value)                  kept until the batch's delete horizon
                                              (delete.retention.ms after the cleaning that
                                              first saw it), then dropped
    otherwise                                 kept

What becomes of a batch (Kafka's BatchRetention and filterTo):

    DELETE        the caller's decision (an aborted transaction's data, a marker past
                  its horizon): dropped whole
    records left  every record kept and no horizon to set: copied as it is (a COPY
                  piece: a range of the input); else rebuilt with the records kept: same
                  baseOffset, lastOffsetDelta, producer fields, leader epoch and codec,
                  recordCount and CRC new; when a tombstone or a marker of an empty
                  transaction is kept for the first time the delete horizon (now +
                  delete.retention.ms) becomes its baseTimestamp with attribute bit 6
                  (KIP-534) and the records' timestampDeltas move with it
    RETAIN_EMPTY  no record left but the producer's last batch (its sequence and epoch):
                  the 61-byte header alone, uncompressed, baseTimestamp = maxTimestamp
    otherwise     dropped

A data batch of an idempotent producer needs no caller decision: it is RETAIN_EMPTY when
its last offset is the producer's last (active_producers), else DELETE_EMPTY.

The output of a chunk is a list of pieces in log order: (COPY, start, end) a range of the
input, (OUT, start, end) a finished batch in `out`, (COMPRESS, start, end) in `out` a
rebuilt batch's 61-byte header followed by its records uncompressed, for the caller to
compress with the batch's codec and frame (kbroker.records.builder.frame_records).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from kbroker._core.crc32c cimport crc32c_update
from kbroker._core.growbuf cimport Buf, buf_grow, buf_put
from kbroker._core.offset_map cimport OffsetMap
from kbroker._core.records cimport (
    ATTRIBUTES_POS,
    CODEC_MASK,
    CONTROL_BIT,
    CONTROL_NONE,
    CRC_POS,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Header,
    check_frame,
    Record,
    kb_load_be32,
    put_retimed_record,
    read_control,
    read_header,
    read_record,
    seal_batch,
    write_header,
)

from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode

cdef enum BatchRetention:  # Kafka's RecordFilter.BatchRetention
    RETENTION_DELETE = 0
    RETENTION_DELETE_EMPTY = 1
    RETENTION_RETAIN_EMPTY = 2

cdef enum PieceKind:
    PIECE_COPY = 0
    PIECE_OUT = 1
    PIECE_COMPRESS = 2

DELETE = RETENTION_DELETE
DELETE_EMPTY = RETENTION_DELETE_EMPTY
RETAIN_EMPTY = RETENTION_RETAIN_EMPTY
COPY = PIECE_COPY
OUT = PIECE_OUT
COMPRESS = PIECE_COMPRESS

cdef enum Status:
    ST_OK = 0
    ST_CORRUPT = 1       # a batch frame, its CRC or its records are malformed
    ST_NO_MEMORY = 2
    ST_NO_SECTION = 3    # a compressed batch whose inflated records were not handed over
    ST_FULL = 4          # map_keys: the map holds max_size keys

_MESSAGES = {
    ST_CORRUPT: "corrupt record batch",
    ST_NO_SECTION: "the records of a compressed batch were not handed over",
}


cdef object _error(int status, int64_t position):
    if status == ST_NO_MEMORY:
        return MemoryError()
    return RecordValidationError(ErrorCode.CORRUPT_MESSAGE, _MESSAGES[status], position)


cdef int check_batch(const unsigned char *p, int64_t avail, Header *h) noexcept nogil:
    """The frame of the batch at p (magic 2, whole, CRC-32C); the header read into h."""
    return ST_OK if check_frame(p, avail, h) == 0 else ST_CORRUPT


cdef struct Special:
    int64_t position
    int64_t size
    int32_t control_type
    Header header


cdef int plan_all(const unsigned char *b, int64_t n, int64_t *position, Buf *out) noexcept nogil:
    cdef Special s
    cdef int32_t coordinator_epoch
    cdef int st
    while position[0] + HEADER_SIZE <= n:
        s.size = <int64_t>(<int32_t>kb_load_be32(b + position[0] + LENGTH_POS)) + LOG_OVERHEAD
        if s.size < HEADER_SIZE:
            return ST_CORRUPT
        if position[0] + s.size > n:
            break
        st = check_batch(b + position[0], n - position[0], &s.header)
        if st != ST_OK:
            return st
        if s.header.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT | CODEC_MASK):
            s.position = position[0]
            s.control_type = CONTROL_NONE
            if s.header.attributes & CONTROL_BIT:
                read_control(b + position[0], s.size, &s.control_type, &coordinator_epoch)
            if buf_put(out, &s, sizeof(s)) != 0:
                return ST_NO_MEMORY
        position[0] += s.size
    return ST_OK


def batch_plan(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end):
    """Check the whole batches of buf[start:end] (frame and CRC-32C); returns (the position
    after the last whole batch, [(position, size, base_offset, last_offset, attributes,
    producer_id, producer_epoch, record_count, control_type)] of the batches the caller
    handles itself: transactional, control or compressed). A batch cut by `end` is left
    for the next chunk (the position stays before it). RecordValidationError
    (CORRUPT_MESSAGE) at a malformed batch."""
    cdef int64_t position = start, n = min(end, buf.shape[0])
    cdef const unsigned char *b = &buf[0] if buf.shape[0] > 0 else NULL
    cdef Buf found
    cdef const Special *s
    cdef Py_ssize_t i
    cdef int st
    memset(&found, 0, sizeof(found))
    try:
        with nogil:
            st = plan_all(b, n, &position, &found)
        if st != ST_OK:
            raise _error(st, position)
        s = <const Special *>found.data
        return position, [
            (s[i].position, s[i].size, s[i].header.base_offset,
             s[i].header.base_offset + s[i].header.last_offset_delta, s[i].header.attributes,
             s[i].header.producer_id, s[i].header.producer_epoch, s[i].header.record_count,
             s[i].control_type)
            for i in range(found.size // <Py_ssize_t>sizeof(Special))]
    finally:
        free(found.data)


# --- sections and decisions handed over by the caller ---------------------------------

cdef struct Section:
    int64_t position
    const unsigned char *data
    int64_t size


cdef struct Decision:
    int64_t position
    int32_t retention
    int32_t discard_records        # the batch stays only to keep its producer's state
    int32_t marker_for_empty_txn   # a marker whose transaction has no data left


cdef class _Given:
    """The caller's per-batch inputs as C arrays, kept alive for a nogil walk."""

    cdef Buf sections
    cdef Buf decisions
    cdef list keep

    def __dealloc__(self):
        free(self.sections.data)
        free(self.decisions.data)

    cdef int load(self, list sections, list decisions) except -1:
        cdef Section s
        cdef Decision d
        self.keep = sections
        for position, data in sections:
            s.position = position
            s.data = <const unsigned char *>PyBytes_AS_STRING(<bytes?>data)
            s.size = PyBytes_GET_SIZE(data)
            if buf_put(&self.sections, &s, sizeof(s)) != 0:
                raise MemoryError()
        for position, retention, discard, marker in decisions:
            d.position = position
            d.retention = retention
            d.discard_records = discard
            d.marker_for_empty_txn = marker
            if buf_put(&self.decisions, &d, sizeof(d)) != 0:
                raise MemoryError()
        return 0


cdef struct Cursor:
    # walks the caller's sections and decisions in position order with the batches
    const Section *sections
    Py_ssize_t section_count
    Py_ssize_t next_section
    const Decision *decisions
    Py_ssize_t decision_count
    Py_ssize_t next_decision


cdef void cursor_init(Cursor *c, _Given given) noexcept:
    c.sections = <const Section *>given.sections.data
    c.section_count = given.sections.size // <Py_ssize_t>sizeof(Section)
    c.next_section = 0
    c.decisions = <const Decision *>given.decisions.data
    c.decision_count = given.decisions.size // <Py_ssize_t>sizeof(Decision)
    c.next_decision = 0


cdef const Section *section_at(Cursor *c, int64_t position) noexcept nogil:
    while c.next_section < c.section_count and c.sections[c.next_section].position < position:
        c.next_section += 1
    if c.next_section < c.section_count and c.sections[c.next_section].position == position:
        return &c.sections[c.next_section]
    return NULL


cdef const Decision *decision_at(Cursor *c, int64_t position) noexcept nogil:
    while c.next_decision < c.decision_count and c.decisions[c.next_decision].position < position:
        c.next_decision += 1
    if c.next_decision < c.decision_count and c.decisions[c.next_decision].position == position:
        return &c.decisions[c.next_decision]
    return NULL


cdef int records_of(Cursor *c, const unsigned char *p, int64_t position, const Header *h,
                    const unsigned char **data, int64_t *size) noexcept nogil:
    """The uncompressed records section of the batch at p: in place, or handed over."""
    cdef const Section *s
    if h.attributes & CODEC_MASK:
        s = section_at(c, position)
        if s == NULL:
            return ST_NO_SECTION
        data[0] = s.data
        size[0] = s.size
    else:
        data[0] = p + HEADER_SIZE
        size[0] = <int64_t>h.batch_length + LOG_OVERHEAD - HEADER_SIZE
    return ST_OK


# --- the offset map of the dirty section ----------------------------------------------

cdef struct MapWalk:
    int64_t position
    int64_t start_offset
    int64_t end_offset
    Py_ssize_t max_size
    int64_t records_read
    bint full


cdef int map_batch(OffsetMap offset_map, const unsigned char *p, const Header *h,
                   const unsigned char *records, int64_t size, MapWalk *w) noexcept nogil:
    cdef const unsigned char *q = records
    cdef const unsigned char *end = records + size
    cdef Record r
    cdef int64_t offset
    cdef int32_t i
    for i in range(h.record_count):
        if read_record(&q, end, &r) != 0:
            return ST_CORRUPT
        offset = h.base_offset + r.offset_delta
        if r.key_length >= 0 and offset >= w.start_offset:
            if offset_map.size >= w.max_size or offset_map.put_c(r.key, r.key_length, offset) != 0:
                w.full = True
                return ST_FULL
        w.records_read += 1
    return ST_OK


cdef int map_all(OffsetMap offset_map, const unsigned char *b, int64_t end, Cursor *c,
                 MapWalk *w) noexcept nogil:
    cdef Header h
    cdef const unsigned char *p
    cdef const unsigned char *records
    cdef int64_t size, last_offset
    cdef int st
    while w.position + HEADER_SIZE <= end:
        p = b + w.position
        read_header(p, &h)
        last_offset = h.base_offset + h.last_offset_delta
        if last_offset >= w.end_offset:
            break
        if h.attributes & CONTROL_BIT:
            w.records_read += 1
        elif decision_at(c, w.position) != NULL:  # data of an aborted transaction
            w.records_read += h.record_count
        else:
            st = records_of(c, p, w.position, &h, &records, &size)
            if st == ST_OK:
                st = map_batch(offset_map, p, &h, records, size, w)
            if st != ST_OK:
                return st
        if last_offset >= w.start_offset:
            offset_map.latest_offset = last_offset
        w.position += <int64_t>h.batch_length + LOG_OVERHEAD
    return ST_OK


def map_keys(OffsetMap offset_map, const unsigned char[::1] buf, Py_ssize_t start,
             Py_ssize_t end, long long start_offset, long long end_offset, Py_ssize_t max_size,
             list skipped, list sections):
    """Put the keys of buf[start:end] (whole batches, checked by batch_plan) with their
    offsets into the map, from start_offset on, while it holds fewer than max_size keys;
    the walk stops at the first batch reaching end_offset (the first uncleanable offset).
    skipped: positions of batches to leave out (data of aborted transactions); sections:
    [(position, inflated records)] of the compressed batches. Returns (position reached,
    whether the map filled up, records read); a full map stops at the batch that did not
    fit (its keys put so far count: the map's latest offset says how far it got)."""
    cdef _Given given = _Given()
    cdef Cursor c
    cdef MapWalk w
    cdef int st
    cdef const unsigned char *b = &buf[0] if buf.shape[0] > 0 else NULL
    cdef int64_t n = min(end, buf.shape[0])
    given.load(sections, [(p, RETENTION_DELETE, 0, 0) for p in skipped])
    cursor_init(&c, given)
    w.position = start
    w.start_offset = start_offset
    w.end_offset = end_offset
    w.max_size = max_size
    w.records_read = 0
    w.full = False
    with nogil:
        st = map_all(offset_map, b, n, &c, &w)
    if st != ST_OK and st != ST_FULL:
        raise _error(st, w.position)
    return w.position, w.full or w.position < n, w.records_read


# --- filtering -------------------------------------------------------------------------

cdef struct Filter:
    int64_t now_ms
    int64_t delete_retention_ms
    const int64_t *producers      # (producer_id, last data offset) pairs, by producer id
    Py_ssize_t producer_count
    Buf out                       # rebuilt batches
    Buf pieces                    # int64 (kind, start, end) triples
    Buf retained                  # scratch: positions of the kept records of one batch
    int64_t messages_read
    int64_t messages_retained
    int64_t invalid_messages
    int64_t bytes_read


cdef int64_t producer_last_offset(const Filter *f, int64_t producer_id) noexcept nogil:
    cdef Py_ssize_t lo = 0, hi = f.producer_count, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if f.producers[2 * mid] < producer_id:
            lo = mid + 1
        else:
            hi = mid
    if lo < f.producer_count and f.producers[2 * lo] == producer_id:
        return f.producers[2 * lo + 1]
    return -2


cdef int add_piece(Filter *f, int64_t kind, int64_t start, int64_t end) noexcept nogil:
    cdef int64_t *last
    cdef int64_t piece[3]
    if kind != PIECE_COMPRESS and f.pieces.size:  # a run of copied or of finished batches
        last = <int64_t *>(f.pieces.data + f.pieces.size) - 3
        if last[0] == kind and last[2] == start:
            last[2] = end
            return ST_OK
    piece[0] = kind
    piece[1] = start
    piece[2] = end
    return ST_OK if buf_put(&f.pieces, piece, sizeof(piece)) == 0 else ST_NO_MEMORY


cdef struct Kept:
    int32_t count
    bint all_kept
    bint tombstones
    int64_t max_timestamp


cdef bint retain_record(Filter *f, OffsetMap offset_map, const Header *h, const Record *r,
                        bint discard, bint horizon_set) noexcept nogil:
    cdef int64_t offset = h.base_offset + r.offset_delta
    cdef int64_t found
    if discard:
        return False
    if h.attributes & CONTROL_BIT or offset > offset_map.latest_offset:
        return True
    if r.key_length < 0:
        f.invalid_messages += 1
        return False
    found = offset_map.get_c(r.key, r.key_length)
    if offset < found:
        return False
    return r.value_length >= 0 or not horizon_set or f.now_ms < h.base_timestamp


cdef int keep_records(Filter *f, OffsetMap offset_map, const Header *h,
                      const unsigned char *records, int64_t size, bint discard,
                      Kept *k) noexcept nogil:
    """Decide each record of the batch; the kept ones' positions go to f.retained."""
    cdef const unsigned char *q = records
    cdef const unsigned char *end = records + size
    cdef const unsigned char *start
    cdef Record r
    cdef int64_t position, ts
    cdef int32_t i
    cdef bint horizon_set = h.attributes & DELETE_HORIZON_BIT
    k.count = 0
    k.all_kept = True
    k.tombstones = False
    k.max_timestamp = -1
    f.retained.size = 0
    for i in range(h.record_count):
        start = q
        if read_record(&q, end, &r) != 0:
            return ST_CORRUPT
        f.messages_read += 1
        if not retain_record(f, offset_map, h, &r, discard, horizon_set):
            k.all_kept = False
            continue
        position = start - records
        if buf_put(&f.retained, &position, sizeof(position)) != 0:
            return ST_NO_MEMORY
        k.count += 1
        if r.value_length < 0:
            k.tombstones = True
        ts = h.base_timestamp + r.timestamp_delta
        if ts > k.max_timestamp:
            k.max_timestamp = ts
    if q != end:
        return ST_CORRUPT
    return ST_OK


cdef int rebuild(Filter *f, const Header *h, const unsigned char *records, int64_t size,
                 const Kept *k, int64_t horizon) noexcept nogil:
    """The batch with its kept records only (see the module docstring): finished in
    f.out for an uncompressed batch, else a header and records left to compress."""
    cdef Header n = h[0]
    cdef const int64_t *kept = <const int64_t *>f.retained.data
    cdef int64_t shift, written, start = f.out.size
    cdef unsigned char *p
    cdef int32_t i
    n.attributes = <int16_t>(h.attributes & ~DELETE_HORIZON_BIT)
    if horizon >= 0:
        n.attributes = <int16_t>(n.attributes | DELETE_HORIZON_BIT)
        n.base_timestamp = horizon
    if not h.attributes & TIMESTAMP_TYPE_BIT:
        n.max_timestamp = k.max_timestamp
    n.record_count = k.count
    shift = h.base_timestamp - n.base_timestamp
    # a record grows by at most 10 bytes when its timestampDelta and length are rewritten
    if buf_grow(&f.out, HEADER_SIZE + size + 10 * <int64_t>k.count) != 0:
        return ST_NO_MEMORY
    p = f.out.data + start
    write_header(p, &n)
    p += HEADER_SIZE
    for i in range(k.count):
        written = put_retimed_record(p, records + kept[i], records + size, shift)
        if written < 0:
            return ST_CORRUPT
        p += written
    f.out.size = p - f.out.data
    if n.attributes & CODEC_MASK:
        return add_piece(f, PIECE_COMPRESS, start, f.out.size)
    seal_batch(f.out.data + start, f.out.size - start)
    return add_piece(f, PIECE_OUT, start, f.out.size)


cdef int empty_header(Filter *f, const Header *h) noexcept nogil:
    """The batch's header alone (Kafka's DefaultRecordBatch.writeEmptyHeader)."""
    cdef Header n = h[0]
    cdef int64_t start = f.out.size
    n.attributes = <int16_t>(h.attributes & ~(CODEC_MASK | DELETE_HORIZON_BIT))
    n.base_timestamp = h.max_timestamp  # Kafka's writeEmptyHeader: both timestamps the max
    n.record_count = 0
    if buf_grow(&f.out, HEADER_SIZE) != 0:
        return ST_NO_MEMORY
    write_header(f.out.data + start, &n)
    seal_batch(f.out.data + start, HEADER_SIZE)
    f.out.size = start + HEADER_SIZE
    return add_piece(f, PIECE_OUT, start, f.out.size)


cdef int filter_batch(Filter *f, OffsetMap offset_map, Cursor *c, const unsigned char *p,
                      int64_t position) noexcept nogil:
    cdef Header h
    cdef Kept k
    cdef const Decision *d
    cdef const unsigned char *records
    cdef int64_t size, records_size, horizon, last_offset
    cdef int32_t retention
    cdef bint discard = False, marker_for_empty_txn = False, horizon_set, need_horizon
    cdef int st
    read_header(p, &h)
    size = <int64_t>h.batch_length + LOG_OVERHEAD
    last_offset = h.base_offset + h.last_offset_delta
    f.bytes_read += size
    d = decision_at(c, position)
    if d != NULL:
        retention = d.retention
        discard = d.discard_records
        marker_for_empty_txn = d.marker_for_empty_txn
    elif h.producer_id >= 0 and producer_last_offset(f, h.producer_id) == last_offset:
        retention = RETENTION_RETAIN_EMPTY  # the producer's last batch: its sequence stays in the log
    else:
        retention = RETENTION_DELETE_EMPTY
    if retention == RETENTION_DELETE:
        return ST_OK
    st = records_of(c, p, position, &h, &records, &records_size)
    if st == ST_OK:
        st = keep_records(f, offset_map, &h, records, records_size, discard, &k)
    if st != ST_OK:
        return st
    f.messages_retained += k.count
    if k.count == 0:
        return empty_header(f, &h) if retention == RETENTION_RETAIN_EMPTY else ST_OK
    horizon_set = h.attributes & DELETE_HORIZON_BIT
    need_horizon = (k.tombstones or marker_for_empty_txn) and not horizon_set
    if k.all_kept and not need_horizon:
        return add_piece(f, PIECE_COPY, position, position + size)
    if need_horizon:
        horizon = f.now_ms + f.delete_retention_ms
    else:
        horizon = h.base_timestamp if horizon_set else -1
    return rebuild(f, &h, records, records_size, &k, horizon)


cdef int filter_all(Filter *f, OffsetMap offset_map, Cursor *c, const unsigned char *b,
                    int64_t start, int64_t end, int64_t *position) noexcept nogil:
    cdef int st
    position[0] = start
    while position[0] + HEADER_SIZE <= end:
        st = filter_batch(f, offset_map, c, b + position[0], position[0])
        if st != ST_OK:
            return st
        position[0] += <int64_t>(<int32_t>kb_load_be32(b + position[0] + LENGTH_POS)) + LOG_OVERHEAD
    return ST_OK


cdef class FilterResult:
    """What RecordFilter.filter made of a chunk: `pieces` [(kind, start, end)] in log order
    over the input (COPY) and `out` (OUT, COMPRESS), and Kafka's cleaner counters."""

    cdef readonly list pieces
    cdef readonly bytes out
    cdef readonly long long messages_read
    cdef readonly long long messages_retained
    cdef readonly long long invalid_messages
    cdef readonly long long bytes_read


cdef class RecordFilter:
    """The cleaner's filter for one cleaning: its offset map, its clock and
    delete.retention.ms, and the last data offset of each active producer."""

    cdef OffsetMap offset_map
    cdef int64_t now_ms
    cdef int64_t delete_retention_ms
    cdef Buf producers

    def __cinit__(self, OffsetMap offset_map, long long now_ms, long long delete_retention_ms,
                  dict active_producers):
        cdef int64_t pair[2]
        self.offset_map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        for producer_id, last_offset in sorted(active_producers.items()):
            pair[0] = producer_id
            pair[1] = last_offset
            if buf_put(&self.producers, pair, sizeof(pair)) != 0:
                raise MemoryError()

    def __dealloc__(self):
        free(self.producers.data)

    def filter(self, const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t end,
               list decisions, list sections):
        """Filter the whole batches of buf[start:end] (checked by batch_plan). decisions:
        [(position, retention, discard_records, marker_for_empty_txn)] of the batches the
        caller decided (transactional and control ones); sections: [(position, inflated
        records)] of the compressed batches not deleted; both in position order."""
        cdef _Given given = _Given()
        cdef Cursor c
        cdef Filter f
        cdef int64_t position
        cdef int st
        cdef const unsigned char *b = &buf[0] if buf.shape[0] > 0 else NULL
        cdef int64_t n = min(end, buf.shape[0])
        cdef const int64_t *pieces
        cdef Py_ssize_t i
        cdef FilterResult result
        given.load(sections, decisions)
        cursor_init(&c, given)
        memset(&f, 0, sizeof(f))
        f.now_ms = self.now_ms
        f.delete_retention_ms = self.delete_retention_ms
        f.producers = <const int64_t *>self.producers.data
        f.producer_count = self.producers.size // (2 * <Py_ssize_t>sizeof(int64_t))
        cdef OffsetMap offset_map = self.offset_map
        try:
            with nogil:
                st = filter_all(&f, offset_map, &c, b, start, n, &position)
            if st != ST_OK:
                raise _error(st, position)
            result = FilterResult.__new__(FilterResult)
            pieces = <const int64_t *>f.pieces.data
            result.pieces = [(pieces[3 * i], pieces[3 * i + 1], pieces[3 * i + 2])
                             for i in range(f.pieces.size // (3 * <Py_ssize_t>sizeof(int64_t)))]
            result.out = PyBytes_FromStringAndSize(<const char *>f.out.data, f.out.size)
            result.messages_read = f.messages_read
            result.messages_retained = f.messages_retained
            result.invalid_messages = f.invalid_messages
            result.bytes_read = f.bytes_read
            return result
        finally:
            free(f.out.data)
            free(f.pieces.data)
            free(f.retained.data)
