"""Read a replica's copy of a partition straight from a broker's log dir, to check that the
replicas agree: every replica holds the same batches, byte for byte, below the high
watermark (the committed prefix). Files are read as they are on disk (*.log segments in
offset order); a trailing partial batch, being written, is left out."""

from __future__ import annotations

from pathlib import Path

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.record_iter import Batch, iter_batches


def replica_batches(log_dir: Path, tp: TopicPartition) -> list[Batch]:
    directory = log_dir / tp.dir_name
    batches: list[Batch] = []
    for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        batches.extend(iter_batches(segment.read_bytes()))
    return batches


def committed_prefix(batches: list[Batch], high_watermark: int) -> bytes:
    """The bytes of the batches that start below the high watermark."""
    return b"".join(b.data for b in batches if b.header.base_offset < high_watermark)


def log_end_offset(batches: list[Batch]) -> int:
    return batches[-1].header.next_offset if batches else 0


def divergence(replicas: dict[int, list[Batch]], high_watermark: int) -> str | None:
    """None when every replica holds the same committed prefix and reaches the high
    watermark; else what differs."""
    prefixes = {b: committed_prefix(batches, high_watermark) for b, batches in replicas.items()}
    ends = {b: log_end_offset(batches) for b, batches in replicas.items()}
    short = {b: e for b, e in ends.items() if e < high_watermark}
    if short:
        return f"replicas {sorted(short)} end below the high watermark {high_watermark}: {ends}"
    if len(set(prefixes.values())) > 1:
        sizes = {b: len(p) for b, p in prefixes.items()}
        return f"the committed prefixes (below {high_watermark}) differ: sizes {sizes}"
    return None
