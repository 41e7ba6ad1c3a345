"""Re-encode batches with the topic's codec (compression.type other than `producer`).

Each batch keeps its header fields (offsets, timestamps, producer id/epoch/sequence,
transactional and control bits); only the codec bits, the records section, the
batch length and the CRC-32C change. See kbroker/_core/records.pyx for the layout.
A slow path by design: decompression and compression in Python, once per batch.
"""

from __future__ import annotations

import struct

from kbroker._core.crc32c import crc32c
from kbroker.records import compression
from kbroker.records.batch_header import CODEC_MASK, HEADER_SIZE, LOG_OVERHEAD
from kbroker.records.record_iter import iter_batches

_ATTRIBUTES = struct.Struct(">h")
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


def recompress_batches(data: bytes | bytearray | memoryview, codec: int, level: int | None = None,
                       max_uncompressed: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytearray:
    """The payload with every batch whose codec differs re-encoded with `codec`; a batch
    whose records expand beyond `max_uncompressed` raises DecompressionLimitError."""
    out = bytearray()
    for batch in iter_batches(data):
        if batch.header.codec == codec:
            out += batch.data
            continue
        records = compression.compress(codec, batch.records_section(max_uncompressed), level)
        head = bytearray(batch.data[:HEADER_SIZE])
        attributes = (batch.header.attributes & ~CODEC_MASK) | codec
        _ATTRIBUTES.pack_into(head, 21, attributes)
        _LENGTH.pack_into(head, 8, HEADER_SIZE - LOG_OVERHEAD + len(records))
        _CRC.pack_into(head, 17, crc32c(records, crc32c(head[21:])))
        out += head + records
    return out
