"""Record batch compression codecs (attributes bits 0-2), used only where needed.

    0 none | 1 gzip (zlib, gzip wrapper) | 2 snappy | 3 lz4 (frame format, KIP-57) | 4 zstd

Snappy comes in two framings: librdkafka writes raw snappy blocks; the Java client,
kafka-python and aiokafka write xerial framing:

    magic b"\\x82SNAPPY\\x00" | version int32 (1) | compatible version int32 (1) |
    repeated: chunk length int32 (big-endian) | raw snappy chunk

decompress() accepts both; compress() writes xerial framing for snappy, as the Java
client does. The broker's append path never calls this module: batches are stored as
sent. Compaction, a topic compression.type other than `producer` and timestamp lookups
inside compressed batches do.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK = 32 * 1024


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# compression.type (topic config) -> codec; "producer" keeps the producer's codec.
CODEC_BY_NAME = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(raw))
    out = bytearray()
    pos = 16
    while pos + 4 <= len(raw):
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if n < 0 or pos + n > len(raw):
            raise ValueError("truncated xerial snappy chunk")
        out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
        pos += n
    return bytes(out)


def _snappy_compress(data: bytes | memoryview) -> bytes:
    raw = bytes(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(raw), _XERIAL_CHUNK):
        chunk = bytes(cramjam.snappy.compress_raw(raw[start : start + _XERIAL_CHUNK]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records section of a batch with the given codec, uncompressed."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return zlib.decompress(bytes(data), 16 + zlib.MAX_WBITS)
    if codec == Codec.SNAPPY:
        return _snappy_decompress(data)
    if codec == Codec.LZ4:
        return bytes(lz4.frame.decompress(bytes(data)))
    if codec == Codec.ZSTD:
        return zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data))
    raise ValueError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    """Compress a records section (level None: the codec's default)."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        c = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(bytes(data)) + c.flush()
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
        return bytes(lz4.frame.compress(bytes(data), compression_level=level or 0))
    if codec == Codec.ZSTD:
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(bytes(data))
    raise ValueError(f"unknown compression codec {codec}")
