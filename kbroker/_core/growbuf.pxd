# A growable byte buffer (malloc/realloc), shared by batch_decode and batch_encode
# through `from kbroker._core.growbuf cimport Buf, buf_reserve`. Header-only: the
# functions are inline, so no extension module owns it. The owner frees `data`.
from libc.stdlib cimport realloc


cdef struct Buf:
    unsigned char *data
    Py_ssize_t size
    Py_ssize_t cap


cdef inline int buf_reserve(Buf *b, Py_ssize_t extra) except -1:
    """Room for `extra` more bytes after `size` (capacity doubles, from 4 KiB)."""
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
        raise MemoryError()
    b.data = p
    b.cap = cap
    return 0
