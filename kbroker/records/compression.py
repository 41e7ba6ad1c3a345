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


# What a batch's records section may expand to when it must be decompressed (compaction,
# recompression to the topic's codec, timestamp lookups, readers). Kafka has no such
# bound but its heap; a producer's uncompressed batch is bounded by its batch.size and
# max.request.size (1 MB by default), so 64 x the batch size limit is generous.
DECOMPRESSION_RATIO_LIMIT = 64
DEFAULT_MAX_DECOMPRESSED_BYTES = DECOMPRESSION_RATIO_LIMIT * 1048588  # x max.message.bytes


class DecompressionLimitError(ValueError):
    def __init__(self, max_size: int) -> None:
        super().__init__(f"the batch decompresses to more than {max_size} bytes "
                         f"({DECOMPRESSION_RATIO_LIMIT} x max.message.bytes)")


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


def _snappy_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    raw = bytes(data)
    if not raw.startswith(XERIAL_MAGIC):
        _check_snappy_length(raw, max_size)
        return bytes(cramjam.snappy.decompress_raw(raw))
    out = bytearray()
    pos = 16
    while pos + 4 <= len(raw):
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if n < 0 or pos + n > len(raw):
            raise ValueError("truncated xerial snappy chunk")
        chunk = raw[pos : pos + n]
        _check_snappy_length(chunk, max_size - len(out))
        out += bytes(cramjam.snappy.decompress_raw(chunk))
        pos += n
    return bytes(out)


def _check_snappy_length(block: bytes, max_size: int) -> None:
    """A raw snappy block starts with its uncompressed length (a varint): check it first."""
    length = shift = 0
    for i, byte in enumerate(block[:5]):
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if i == 4:
            raise ValueError("bad snappy length preamble")
    if length > max_size:
        raise DecompressionLimitError(max_size)


def _snappy_compress(data: bytes | memoryview) -> bytes:
    raw = bytes(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(raw), _XERIAL_CHUNK):
        chunk = bytes(cramjam.snappy.compress_raw(raw[start : start + _XERIAL_CHUNK]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def decompress(codec: int, data: bytes | memoryview,
               max_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """The records section of a batch with the given codec, uncompressed; at most
    `max_size` bytes (DecompressionLimitError beyond: a small batch must not expand
    without bound in the broker's or a reader's memory)."""
    if codec == Codec.NONE:
        out = bytes(data)
    elif codec == Codec.GZIP:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = d.decompress(bytes(data), max_size + 1)
        if not d.eof and len(out) <= max_size:
            raise zlib.error("incomplete gzip stream")
    elif codec == Codec.SNAPPY:
        out = _snappy_decompress(data, max_size)
    elif codec == Codec.LZ4:
        out = bytes(lz4.frame.LZ4FrameDecompressor().decompress(bytes(data), max_length=max_size + 1))
    elif codec == Codec.ZSTD:
        with zstandard.ZstdDecompressor().stream_reader(bytes(data)) as reader:
            out = reader.read(max_size + 1)
    else:
        raise ValueError(f"unknown compression codec {codec}")
    if len(out) > max_size:
        raise DecompressionLimitError(max_size)
    return out


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
