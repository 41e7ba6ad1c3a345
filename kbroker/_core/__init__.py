"""kbroker's compiled core: Cython over the plain C in native/.

Every module here is a compiled extension; there is no pure-Python twin and no
fallback. Importing this package imports them all, so a missing or broken build
fails at start-up with an ImportError naming the module, not later with a slow
or wrong answer (the lesson of aio-libs/aiokafka#913).

What lives where:
  crc32c    CRC-32C of record batches (native/crc32c.c: SSE4.2, AVX-512, ARMv8
            hardware paths and a software fallback, chosen once at load).
            Python: crc32c(data, value=0); Cython: cimport crc32c_update.
  records   record batch v2: the layout (records.pxd, shared by cimport), the frame
            check (cimports crc32c_update), the walkers' statuses and errors.
  batch_validation  Produce and follower payloads: validation, offset assignment
            (cimports records and segment_scan).
  segment_scan  recovery and index rebuilding: one CRC-checking pass over a segment.
  segment_seek  header walks over a segment file: a batch by offset or timestamp.
  record_decode  records and control records as Python values (the slow paths).
  index     binary search and sanity checks over .index / .timeindex files.
  batch_decode  record batches -> Arrow buffers (the Spark reader).
  batch_encode  murmur2 partitioning and uncompressed batches (the Spark writer).
  offset_map    the log cleaner's key hash -> latest offset table (MurmurHash3 128).
  compaction    the log cleaner's per-record work: offset map building, record filtering
                (cimports records and offset_map).

Each kbroker/_core/*.pyx builds into one extension (setup.py); add new ones to
COMPILED_MODULES below.
"""

from __future__ import annotations

import importlib

COMPILED_MODULES: tuple[str, ...] = (
    "crc32c",
    "records",
    "segment_scan",
    "segment_seek",
    "batch_validation",
    "record_decode",
    "index",
    "batch_decode",
    "batch_encode",
    "offset_map",
    "compaction",
)

_BUILD_HINT = (
    "kbroker's compiled core is missing or broken: install with `pip install .` "
    "or build in place with `python setup.py build_ext --inplace`"
)


def _load(name: str) -> None:
    try:
        importlib.import_module(f"{__name__}.{name}")
    except ImportError as exc:
        raise ImportError(f"{_BUILD_HINT} (kbroker._core.{name}: {exc})") from exc


for _name in COMPILED_MODULES:
    _load(_name)
del _name
