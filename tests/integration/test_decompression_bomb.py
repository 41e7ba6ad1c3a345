"""A small compressed batch that expands without bound is refused, never fully inflated.

The batch: one record claimed, its records section 1 GiB of zeros compressed with
zstd (about 32 KiB on the wire). Sent to a topic whose compression.type makes the
broker recompress (so it must decompress), the Produce gets CORRUPT_MESSAGE, the
broker's peak memory stays far below the bomb's size, and it serves on. The Spark
reader's decoder refuses the same batch with an error naming its offset.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest
import zstandard
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker._core.batch_decode import ColumnarRecords
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.records.compression import Codec, DecompressionLimitError, decompress

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BOMB_BYTES = 1 << 30


def zstd_bomb() -> bytes:
    compressor = zstandard.ZstdCompressor().compressobj()
    zeros = bytes(1 << 20)
    body = b"".join(compressor.compress(zeros) for _ in range(BOMB_BYTES >> 20))
    return body + compressor.flush()


def bomb_batch() -> bytes:
    body = zstd_bomb()
    after_crc = struct.pack(">hiqqqhii", Codec.ZSTD, 0, 1_700_000_000_000, 1_700_000_000_000,
                            -1, -1, -1, 1) + body
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def peak_rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmHWM:"))) // 1024


def test_broker_refuses_a_decompression_bomb(broker_factory: Any) -> None:
    broker = broker_factory().start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic("recompressed", 1, 1, config={"compression.type": "lz4"})]).values():
        f.result(30)
    batch = bomb_batch()
    assert len(batch) < 100_000
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name="recompressed", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    with WireClient(broker.bootstrap_servers, timeout=60) as c:
        part = c.call(request, 9).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.CORRUPT_MESSAGE
        assert "decompresses to more than" in (part.error_message or "")
        # still serving, on the same connection
        assert c.call(request, 9).responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert broker.proc is not None and broker.proc.poll() is None
    assert peak_rss_mb(broker.proc.pid) < 512  # the bomb is 1024 MiB


def test_decoders_refuse_the_bomb() -> None:
    batch = bomb_batch()
    with pytest.raises(DecompressionLimitError):
        decompress(Codec.ZSTD, memoryview(batch)[61:])
    decoder = ColumnarRecords(decompress=decompress)  # as the Spark reader makes it
    with pytest.raises(Exception, match="offset 0.*decompresses to more than"):
        decoder.add_records(batch, 0, 1)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_every_codec_is_bounded(codec: int) -> None:
    from kbroker.records.compression import compress

    data = bytes(10 << 20)
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=10 << 20) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, packed, max_size=(10 << 20) - 1)
