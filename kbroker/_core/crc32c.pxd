# The CRC-32C (Castagnoli) contract shared by the core's extension modules.
# native/crc32c.c is compiled into this module only; other modules reach it by
#   from kbroker._core.crc32c cimport crc32c_update
from libc.stdint cimport uint32_t


cdef uint32_t crc32c_update(uint32_t crc, const unsigned char *data, size_t length) noexcept nogil
