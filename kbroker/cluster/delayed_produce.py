"""DelayedProduce: an acks=all append waiting until its followers hold it (Kafka's
DelayedProduce), and what an append answers per partition (Kafka's PartitionResponse).

The ReplicaManager appends first; each partition that needs its followers is a
ProducePartitionStatus whose acks are pending until the partition's high watermark
reaches `required_offset`. The operation is tried whenever one of its partitions' high
watermark moves or its leadership changes (the ReplicaManager's produce purgatory, keyed
by TopicPartition), and completes once no partition is pending, or at `timeout_ms`:
    * the high watermark passed the batch: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when
      the ISR shrank below min.insync.replicas meanwhile;
    * this broker no longer leads the partition (or is fenced, or the partition went):
      NOT_LEADER_OR_FOLLOWER;
    * still pending at the deadline: REQUEST_TIMED_OUT.
A failed partition answers base offset -1, as Kafka's.

Event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.utils.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kbroker.cluster.partition import Partition
    from kbroker.storage.values import LogAppendInfo


class PartitionAppendResult:
    """One partition's answer to an append (the fields of Produce's partition response)."""

    __slots__ = ("error_code", "error_message", "base_offset", "log_append_time", "log_start_offset",
                 "record_errors", "info")

    def __init__(self, error_code: int = ErrorCode.NONE, error_message: str | None = None,
                 info: LogAppendInfo | None = None,
                 record_errors: list[tuple[int, str | None]] | None = None) -> None:
        self.error_code = error_code
        self.error_message = error_message
        self.info = info
        self.record_errors = record_errors or []
        if info is not None and error_code == ErrorCode.NONE:
            self.base_offset = info.first_offset
            self.log_append_time = info.log_append_time
            self.log_start_offset = info.log_start_offset
        else:
            self.base_offset = self.log_start_offset = -1
            self.log_append_time = -1

    def fail(self, code: int, message: str | None = None) -> None:
        """A wait's code: anything but NONE fails a partition not failed yet."""
        if code != ErrorCode.NONE and self.error_code == ErrorCode.NONE:
            self.error_code, self.error_message = code, message
            self.base_offset = self.log_start_offset = -1

    def __repr__(self) -> str:
        return f"PartitionAppendResult({ErrorCode(self.error_code).name}, base_offset={self.base_offset})"


class ProducePartitionStatus:
    """A partition of a DelayedProduce: the offset its high watermark must reach."""

    __slots__ = ("partition", "required_offset", "min_insync_replicas", "result", "acks_pending")

    def __init__(self, partition: Partition, required_offset: int, min_insync_replicas: int,
                 result: PartitionAppendResult) -> None:
        self.partition = partition
        self.required_offset = required_offset
        self.min_insync_replicas = min_insync_replicas
        self.result = result
        self.acks_pending = True


class DelayedProduce(DelayedOperation):
    """See the module docstring. `is_current(partition)`: whether the partition is still the
    one the ReplicaManager holds (a deleted topic's is not)."""

    __slots__ = ("statuses", "on_done", "_is_current")

    def __init__(self, deadline: float, statuses: list[ProducePartitionStatus],
                 on_done: Callable[[], None], is_current: Callable[[Partition], bool]) -> None:
        super().__init__(deadline)
        self.statuses = statuses
        self.on_done = on_done
        self._is_current = is_current

    def try_complete(self) -> bool:
        pending = False
        for status in self.statuses:
            if not status.acks_pending:
                continue
            partition = status.partition
            if not self._is_current(partition):
                code: int | None = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                code = partition.check_enough_replicas_reach_offset(
                    status.required_offset, status.min_insync_replicas)
            if code is None:
                pending = True
            else:
                status.acks_pending = False
                status.result.fail(code)
        return False if pending else self.force_complete()

    def on_complete(self) -> None:
        for status in self.statuses:
            if status.acks_pending:
                status.acks_pending = False
                status.result.fail(ErrorCode.REQUEST_TIMED_OUT)
        self.on_done()
