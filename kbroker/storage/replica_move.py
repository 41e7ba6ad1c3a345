"""ReplicaMove: a partition's replica moving to another log dir of the same broker
(AlterReplicaLogDirs), as Kafka moves it: through a "future" log.

    <target dir>/<topic>-<partition>.<uuid hex>-future     the copy being made

The future log is filled from the current one, batch by batch with their offsets and
leader epochs (Log.append_as_follower), in small steps between which the current log
keeps serving and taking appends. Once caught up, `complete()` runs on the event loop
with nothing in between: the last batches are copied, the future log is synced, the
current dir is renamed away for deletion (`-delete`), then the future dir takes the
partition's name and is loaded as its log. A crash before the second rename leaves
either the current dir (the future one is removed at start: the move is forgotten)
or only the future one, which LogManager.startup promotes: never neither.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import uuid

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.batch_header import complete_batches_size
from kbroker.storage.log import Log

FUTURE_DIR_SUFFIX = "-future"
COPY_CHUNK_BYTES = 1 << 20


def future_dir_name(tp: TopicPartition) -> str:
    return f"{tp.dir_name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def partition_of_future_dir(name: str) -> TopicPartition | None:
    """`orders-3.<hex>-future` -> orders-3; None for any other name."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, _, _hex = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    try:
        return TopicPartition.from_dir_name(base)
    except ValueError:
        return None


class ReplicaMove:
    def __init__(self, source: Log, future: Log, target_dir: str) -> None:
        self.source = source
        self.future = future
        self.target_dir = target_dir
        self._started = False

    @property
    def topic_partition(self) -> TopicPartition:
        return self.source.topic_partition

    def copy(self, max_bytes: int = COPY_CHUNK_BYTES) -> bool:
        """Copy up to `max_bytes` more; True once the future log has everything."""
        src = self.source
        if not self._started:
            self._started = True
            first = src.read(src.log_start_offset, 1, max_offset=src.log_end_offset)
            if first.records is not None and first.records.size > 0:
                base = int.from_bytes(first.records.read_bytes()[:8], "big", signed=True)
                self.future.truncate_fully_and_start_at(base)
            else:
                self.future.truncate_fully_and_start_at(src.log_end_offset)
        offset = self.future.log_end_offset
        if offset >= src.log_end_offset:
            return True
        data = src.read(offset, max_bytes, max_offset=src.log_end_offset)
        if data.records is None:
            return True
        raw = data.records.read_bytes()
        whole = complete_batches_size(raw)
        if whole:
            self.future.append_as_follower(memoryview(raw)[:whole])
        return self.future.log_end_offset >= src.log_end_offset

    def finish_copy(self) -> None:
        while not self.copy():
            pass
        future, src = self.future, self.source
        future.log_start_offset = src.log_start_offset
        future.auto_high_watermark = src.auto_high_watermark
        future.update_high_watermark(src.high_watermark)
        future.flush()
