"""Re-encode batches with the topic's codec (compression.type other than `producer`).

Each batch keeps its header fields (offsets, timestamps, producer id/epoch/sequence,
transactional and control bits); only the codec bits, the records section, the
batch length and the CRC-32C change: the core's frame_batch writes them (see
kbroker/_core/records.pyx for the layout). A slow path by design: decompression and
compression in Python, once per batch.
"""

from __future__ import annotations

from kbroker._core.batch_encode import frame_batch
from kbroker.records import compression
from kbroker.records.batch_header import CODEC_MASK
from kbroker.records.record_iter import iter_batches


def recompress_batches(data: bytes | bytearray | memoryview, codec: int, level: int | None = None,
                       max_uncompressed: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytearray:
    """The payload with every batch whose codec differs re-encoded with `codec`; a batch
    whose records expand beyond `max_uncompressed` raises DecompressionLimitError."""
    out = bytearray()
    for batch in iter_batches(data):
        h = batch.header
        if h.codec == codec:
            out += batch.data
            continue
        records = compression.compress(codec, batch.records_section(max_uncompressed), level)
        out += frame_batch(records, h.record_count, h.base_timestamp, h.max_timestamp,
                           base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                           attributes=(h.attributes & ~CODEC_MASK) | codec,
                           last_offset_delta=h.last_offset_delta, producer_id=h.producer_id,
                           producer_epoch=h.producer_epoch, base_sequence=h.base_sequence)
    return out
