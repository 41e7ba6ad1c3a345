# The read-ahead cursor over a segment file's batch headers, shared with record_decode's
# read_producer_batches:
#   from kbroker._core.segment_seek cimport Cursor, cursor_start, cursor_header
# cursor_header is defined in segment_seek.pyx (a module cimporting it links to
# kbroker._core.segment_seek at run time). A Cursor lives on its walker's stack; the fd
# is the caller's.
from libc.stdint cimport int64_t


cdef enum:
    CURSOR_BUF = 16384

cdef struct Cursor:
    int fd
    int64_t buf_pos
    int64_t buf_len
    unsigned char buf[CURSOR_BUF]


cdef inline void cursor_start(Cursor *c, int fd) noexcept nogil:
    c.fd = fd
    c.buf_pos = 0
    c.buf_len = 0


cdef const unsigned char *cursor_header(Cursor *c, int64_t pos, int64_t end) noexcept nogil
