"""glibc malloc settings for a broker process: keep large frame buffers in the heap.

A Produce frame of 256 KiB or more is received into a bytearray of its own
size (kbroker.server.connection). With glibc's defaults such a block is
mmapped or handed back to the kernel when freed (dynamic mmap threshold, 128 KiB
trim threshold), so every frame pays a fresh mapping: a page fault and a
zeroed page per 4 KiB, about a third of the broker's CPU when producing 1 KiB
records at full speed (perf: exc_page_fault, clear_page, unmap_page_range).

Fixed thresholds keep freed frames in the heap for the next one:
blocks below `MMAP_THRESHOLD` come from the heap, and up to `TRIM_THRESHOLD` of
free memory at the heap top stays mapped (an upper bound on the RSS this adds).
The settings are process-wide, so only the `kbroker serve` entry point applies
them, never a library import. Other C libraries (musl) have no mallopt: then
nothing changes.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # the largest glibc's dynamic threshold would reach
TRIM_THRESHOLD = 16 * 1024 * 1024


def keep_frame_buffers_in_heap() -> bool:
    """Set glibc's mmap and trim thresholds; False where mallopt is unavailable."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.debug("mallopt unavailable: malloc thresholds left at their defaults")
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
