"""GroupSnapshot: a consumer group as it was before an operation, to put back when the
operation's records could not be appended.

Kafka's rule (CoordinatorRuntime, read, not copied): an operation on a group yields
records; they are appended to the group's __consumer_offsets partition, and the
in-memory state is what replaying them gives. Kafka applies them to timeline data
structures as they are generated and, when the append fails, reverts the state to the
snapshot taken before the operation (SnapshotRegistry.revertToSnapshot), so the group
is unchanged and the request answers the mapped error (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, ...). The consumer group coordinator does the same: it takes
a GroupSnapshot before an operation, changes the group while it builds the records,
and calls `revert()` when the write fails.

The error a failed operation answers is Kafka's CoordinatorOperationExceptionHelper
.handleOperationException mapping (`operation_error`).

What is kept: the entry of the group map (the group may not have existed, or been
replaced), the group's epochs, members, static members, target assignment, partition
holders, subscribed topics and metadata hash, and each member's timers. Members are
immutable values (replaced, never changed) except their timers, so shallow copies
suffice; a timer the operation cancelled is scheduled again for its old deadline, and
one it started is cancelled.

Lock: the broker's event-loop thread only (the consumer group coordinator's).
"""

from __future__ import annotations

from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.coordinator.consumer_group import ConsumerGroup
from kbroker.coordinator.timers import Timer, Timers

_FIELDS = ("group_epoch", "assignment_epoch", "static_members", "target", "holders", "subscribed",
           "metadata_hash", "dead")


class GroupSnapshot:
    def __init__(self, groups: dict[str, ConsumerGroup], group_id: str, timers: Timers) -> None:
        self._groups = groups
        self._group_id = group_id
        self._timers = timers
        self._group = groups.get(group_id)
        self._fields: dict[str, Any] = {}
        self._members: dict[str, Any] = {}
        self._member_timers: dict[str, tuple[Timer | None, Timer | None]] = {}
        if self._group is not None:
            g = self._group
            self._fields = {name: _copy(getattr(g, name)) for name in _FIELDS}
            self._members = dict(g.members)
            self._member_timers = {mid: (m.session_timer, m.rebalance_timer) for mid, m in g.members.items()}

    def revert(self) -> None:
        """Put the group back as it was when the snapshot was taken."""
        now = self._groups.get(self._group_id)
        kept = {id(t) for pair in self._member_timers.values() for t in pair if t is not None}
        for group in {id(g): g for g in (now, self._group) if g is not None}.values():
            for member in group.members.values():
                for timer in (member.session_timer, member.rebalance_timer):
                    if timer is not None and id(timer) not in kept:
                        timer.cancel()  # started by the failed operation
        if self._group is None:
            self._groups.pop(self._group_id, None)
            return
        g = self._group
        self._groups[self._group_id] = g
        for name, value in self._fields.items():
            setattr(g, name, value)
        g.members = dict(self._members)
        for mid, (session, rebalance) in self._member_timers.items():
            member = g.members[mid]
            member.session_timer = self._rearmed(session)
            member.rebalance_timer = self._rearmed(rebalance)

    def _rearmed(self, timer: Timer | None) -> Timer | None:
        """The timer, or one for its deadline if the failed operation cancelled it."""
        if timer is None or not timer.cancelled:
            return timer
        return self._timers.schedule(timer.deadline_ms - self._timers.time.monotonic_ms(), timer.callback)


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def operation_error(error: BaseException) -> int:
    """The error a client gets for an operation whose append raised `error`, mapped as
    Kafka's CoordinatorOperationExceptionHelper.handleOperationException maps it. An
    OSError is the log's disk failing (Kafka's KafkaStorageException)."""
    code = error.error_code if isinstance(error, KafkaError) else (
        ErrorCode.KAFKA_STORAGE_ERROR if isinstance(error, OSError) else ErrorCode.UNKNOWN_SERVER_ERROR)
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR  # the client looks for the coordinator again
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if code == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return int(code)
