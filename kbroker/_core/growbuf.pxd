# A growable byte buffer (malloc/realloc), shared by batch_decode, batch_encode and
# records through `from kbroker._core.growbuf cimport Buf, buf_grow, buf_put`.
# Header-only: the functions are inline, so no extension module owns it. The owner
# frees `data`. buf_grow and buf_put are nogil and return a status (-1: out of
# memory, the buffer unchanged); buf_reserve is the one that raises MemoryError.
from libc.stdlib cimport realloc
from libc.string cimport memcpy


cdef struct Buf:
    unsigned char *data
    Py_ssize_t size
    Py_ssize_t cap


cdef inline int buf_grow(Buf *b, Py_ssize_t extra) noexcept nogil:
    """Room for `extra` more bytes after `size` (capacity doubles, from 4 KiB): 0, or -1."""
    cdef Py_ssize_t need = b.size + extra
    cdef Py_ssize_t cap
    cdef unsigned char *p
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 4096
    while cap < need:
        cap *= 2
    p = <unsigned char *>realloc(b.data, cap)
    if p == NULL:
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline int buf_put(Buf *b, const void *src, Py_ssize_t n) noexcept nogil:
    """Append n bytes: 0, or -1 when out of memory. Nothing for n == 0 (an empty buffer's
    data is NULL, which memcpy may not be given even for no bytes)."""
    if n == 0:
        return 0
    if b.size + n > b.cap and buf_grow(b, n) != 0:
        return -1
    memcpy(b.data + b.size, src, n)
    b.size += n
    return 0


cdef inline int buf_reserve(Buf *b, Py_ssize_t extra) except -1:
    """buf_grow for code holding the GIL: raises MemoryError."""
    if buf_grow(b, extra) != 0:
        raise MemoryError()
    return 0
