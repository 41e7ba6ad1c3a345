"""Offset checkpoint files, in Kafka's text format (OffsetCheckpointFile):

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99

Used for recovery-point-offset-checkpoint, log-start-offset-checkpoint and (in cluster
mode, where the high watermark trails the log end) replication-offset-checkpoint in each
log dir. Written atomically: <file>.tmp, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

from kbroker.common.topic_partition import TopicPartition
from kbroker.utils.atomic_file import write_atomically

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
VERSION = 0


class OffsetCheckpointFile:
    """A checkpoint file of TopicPartition -> offset."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
        write_atomically(self.path, "\n".join(lines) + "\n")

    def read(self) -> dict[TopicPartition, int]:
        """The offsets; {} when the file is missing. ValueError when it is malformed."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return {}
        if len(lines) < 2 or int(lines[0]) != VERSION:
            raise ValueError(f"{self.path}: bad checkpoint header")
        count = int(lines[1])
        entries = [ln.split() for ln in lines[2:] if ln.strip()]
        if len(entries) != count or any(len(e) != 3 for e in entries):
            raise ValueError(f"{self.path}: expected {count} entries")
        return {TopicPartition(t, int(p)): int(o) for t, p, o in entries}
