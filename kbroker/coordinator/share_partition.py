"""SharePartition: one share group's view of one topic partition (KIP-932), as Kafka's
SharePartition (read, not copied).

State, for offsets from the share-partition start offset (SPSO, `start_offset`) up to
`end_offset` (exclusive: the next offset never fetched for the group, Kafka's endOffset
+ 1), one InFlightRecord each, in one of Kafka's RecordStates:

    AVAILABLE     may be acquired (again): released, or its lock expired
    ACQUIRED      delivered to one member, locked for `record_lock_duration_ms`
    ACKNOWLEDGED  accepted by the member that held it
    ARCHIVED      rejected, a gap (compacted away), or delivered `delivery_count_limit` times

Offsets below the SPSO are all ACKNOWLEDGED or ARCHIVED and forgotten; the SPSO moves up
over every leading record in those two states (Kafka's maybeUpdateCachedStateAndOffsets).
At most `max_record_locks` offsets are in flight (Kafka's
`group.share.partition.max.record.locks`): a fetch acquires nothing past
SPSO + that many.

A fetch gives the partition the batches read from the log at `next_fetch_offset()`
(their first and last offsets); `acquire` takes every AVAILABLE offset among them for
the member, up to `max_records`, and answers the ranges with their delivery count (the
ShareFetch response's AcquiredRecords). A lock timer per acquisition puts the records it
still holds back to AVAILABLE; a record released or expired after its
`delivery_count_limit`-th delivery is ARCHIVED instead.

`acknowledge` checks a request's batches whole before it changes anything: every offset
must be ACQUIRED by the member (else INVALID_RECORD_STATE), the types known (else
INVALID_REQUEST). Types are Kafka's AcknowledgeType: 0 gap, 1 accept, 2 release, 3
reject, 4 renew (ShareFetch/ShareAcknowledge v2: the lock starts again).

What is persisted (`snapshot()`: the ShareSnapshot value's StateBatches) is what must
survive a restart: the SPSO, and every in-flight offset with its state and delivery
count, ACQUIRED written as AVAILABLE (a new broker holds no locks; the record is
delivered again). `SharePartition.restore` builds a partition from one.

Lock: the broker's event-loop thread only; time through the injected Timers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.timers import Timer, Timers

E = ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState ids (as persisted in ShareSnapshot's StateBatches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class AcquiredRecords(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class StateBatch(NamedTuple):
    """A run of offsets in one state with one delivery count (ShareSnapshot's StateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class AckBatch(NamedTuple):
    first_offset: int
    last_offset: int
    acknowledge_types: list[int]


@dataclass(frozen=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    read_committed: bool = False  # the group's share.isolation.level (the fetch's bound and filter)


class AcquisitionLock:
    """One acquisition's lock timer and how many of its records it still holds."""

    __slots__ = ("timer", "held")

    def __init__(self, held: int) -> None:
        self.timer: Timer | None = None
        self.held = held


class InFlightRecord:
    __slots__ = ("offset", "state", "delivery_count", "member_id", "lock")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.state = RecordState.AVAILABLE
        self.delivery_count = 0
        self.member_id: str | None = None
        self.lock: AcquisitionLock | None = None


class AcknowledgeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SharePartition:
    def __init__(self, group_id: str, topic_id: object, partition: int, start_offset: int,
                 config: SharePartitionConfig, timers: Timers, state_epoch: int = 0,
                 on_lock_expired: Callable[[], None] = lambda: None) -> None:
        """`on_lock_expired()` after a lock timeout made records available (the owner
        persists the state and wakes waiting fetches)."""
        self.group_id = group_id
        self.on_lock_expired = on_lock_expired
        self.topic_id = topic_id
        self.partition = partition
        self.config = config
        self.timers = timers
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlightRecord] = {}

    @classmethod
    def restore(cls, group_id: str, topic_id: object, partition: int, start_offset: int,
                batches: Iterable[StateBatch], config: SharePartitionConfig, timers: Timers,
                state_epoch: int = 0, on_lock_expired: Callable[[], None] = lambda: None) -> SharePartition:
        sp = cls(group_id, topic_id, partition, start_offset, config, timers, state_epoch, on_lock_expired)
        for b in sorted(batches):
            for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
                rec = sp.records[offset] = InFlightRecord(offset)
                state = RecordState(b.delivery_state)
                rec.state = RecordState.AVAILABLE if state == RecordState.ACQUIRED else state
                rec.delivery_count = b.delivery_count
            sp.end_offset = max(sp.end_offset, b.last_offset + 1)
        for offset in range(start_offset, sp.end_offset):  # holes between batches: never delivered
            sp.records.setdefault(offset, InFlightRecord(offset))
        sp._advance_start()
        return sp

    # -- fetching
    def next_fetch_offset(self) -> int:
        """The first offset a fetch may acquire: the lowest AVAILABLE in-flight one, else
        the end offset (Kafka's nextFetchOffset)."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Something may be acquired: an AVAILABLE in-flight record, or room for new ones."""
        return (self.next_fetch_offset() < self.end_offset
                or self.end_offset - self.start_offset < self.config.max_record_locks)

    def move_start_to(self, log_start_offset: int) -> None:
        """Records below the log start are gone (retention, DeleteRecords): the SPSO follows."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            rec = self.records.pop(offset)
            self._unlock(rec)
            rec.state = RecordState.ARCHIVED
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def acquire(self, member_id: str, batches: Iterable[tuple[int, int, bool]],
                max_records: int) -> list[AcquiredRecords]:
        """Acquire for `member_id` the AVAILABLE offsets of the fetched batches (first and
        last offset, whether never to deliver it: each in log order), at most `max_records`;
        answers the acquired ranges. A batch never delivered (a control batch: transaction
        markers; under read_committed an aborted transaction's) has its offsets ARCHIVED,
        so the start offset can pass them."""
        limit = self.start_offset + self.config.max_record_locks
        taken: list[int] = []
        counts: list[int] = []
        for first, last, skip in batches:
            for offset in range(max(first, self.start_offset), last + 1):
                if len(taken) >= max_records > 0:
                    break
                rec = self.records.get(offset)
                if rec is None:
                    if offset != self.end_offset or offset >= limit:
                        break
                    rec = self.records[offset] = InFlightRecord(offset)
                    self.end_offset = offset + 1
                if rec.state != RecordState.AVAILABLE:
                    continue
                if skip:
                    rec.state = RecordState.ARCHIVED
                    continue
                rec.state, rec.member_id = RecordState.ACQUIRED, member_id
                rec.delivery_count += 1
                taken.append(offset)
                counts.append(rec.delivery_count)
        self._advance_start()
        if not taken:
            return []
        self._lock([self.records[offset] for offset in taken])
        return _ranges(taken, counts)

    # -- acknowledging
    def acknowledge(self, member_id: str, batches: list[AckBatch]) -> dict[int, int]:
        """Apply a member's acknowledgements, all or none (raises AcknowledgeError);
        answers the offsets it accepted or rejected with their delivery counts, for
        `reopen` should their state not be persisted."""
        plan: list[tuple[InFlightRecord, int]] = []
        for b in batches:
            n = b.last_offset - b.first_offset + 1
            if n <= 0 or not b.acknowledge_types or len(b.acknowledge_types) not in (1, n):
                raise AcknowledgeError(E.INVALID_REQUEST, f"Invalid acknowledgement batch "
                                       f"{b.first_offset}-{b.last_offset}.")
            if b.first_offset < self.start_offset or b.last_offset >= self.end_offset:
                raise AcknowledgeError(E.INVALID_RECORD_STATE, f"Offsets {b.first_offset}-{b.last_offset} "
                                       f"are not all in flight ({self.start_offset}-{self.end_offset - 1}).")
            for i, offset in enumerate(range(b.first_offset, b.last_offset + 1)):
                kind = b.acknowledge_types[i if len(b.acknowledge_types) > 1 else 0]
                if kind not in AcknowledgeType._value2member_map_:
                    raise AcknowledgeError(E.INVALID_REQUEST, f"Invalid acknowledge type {kind}.")
                rec = self.records.get(offset)
                if rec is None or rec.state != RecordState.ACQUIRED or rec.member_id != member_id:
                    raise AcknowledgeError(E.INVALID_RECORD_STATE, f"The record at offset {offset} "
                                           f"is not acquired by member {member_id}.")
                plan.append((rec, kind))
        done: dict[int, int] = {}
        for rec, kind in plan:
            if kind == AcknowledgeType.RENEW:
                self._renew(rec)
                continue
            self._unlock(rec)
            if kind == AcknowledgeType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif kind == AcknowledgeType.RELEASE:
                self._make_available(rec)
            else:  # REJECT, GAP
                rec.state = RecordState.ARCHIVED
            if rec.state != RecordState.AVAILABLE:
                done[rec.offset] = rec.delivery_count
        self._advance_start()
        return done

    def reopen(self, done: dict[int, int]) -> None:
        """An acknowledgement whose state could not be persisted is undone, as Kafka rolls
        its in-memory state back: each offset it accepted or rejected (`done`, with its
        delivery count) still ACKNOWLEDGED or ARCHIVED, or already below the start offset,
        is AVAILABLE again (ARCHIVED at the delivery count limit), to be delivered again.
        The start offset goes back to the lowest; the offsets between it and the old start
        come back as ACKNOWLEDGED."""
        if not done:
            return
        low = min(done)
        for offset in range(low, self.start_offset):
            back = self.records[offset] = InFlightRecord(offset)
            back.state = RecordState.ACKNOWLEDGED
        self.start_offset = min(self.start_offset, low)
        for offset, count in done.items():
            rec = self.records.get(offset)
            if rec is not None and rec.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                rec.delivery_count = count
                self._make_available(rec)
        self._advance_start()

    def release_member(self, member_id: str) -> int:
        """The member left (its share session closed, or it was fenced): what it holds is
        available again; answers how many records it held."""
        released = 0
        for rec in self.records.values():
            if rec.state == RecordState.ACQUIRED and rec.member_id == member_id:
                self._unlock(rec)
                self._make_available(rec)
                released += 1
        self._advance_start()
        return released

    def holds_acquired(self) -> bool:
        return any(rec.state == RecordState.ACQUIRED for rec in self.records.values())

    def close(self) -> None:
        """The partition is dropped (its state altered or deleted): no lock fires later."""
        for rec in self.records.values():
            self._unlock(rec)

    # -- persistence
    def snapshot(self) -> list[StateBatch]:
        """The in-flight state as runs (ACQUIRED written as AVAILABLE)."""
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            rec = self.records[offset]
            state = RecordState.AVAILABLE if rec.state == RecordState.ACQUIRED else rec.state
            if out and out[-1].last_offset == offset - 1 and out[-1].delivery_state == state \
                    and out[-1].delivery_count == rec.delivery_count:
                out[-1] = out[-1]._replace(last_offset=offset)
            else:
                out.append(StateBatch(offset, offset, int(state), rec.delivery_count))
        return out

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        rec = self.records.get(offset)
        return None if rec is None else (rec.state, rec.delivery_count)

    # -- internals
    def _make_available(self, rec: InFlightRecord) -> None:
        rec.member_id = None
        rec.state = (RecordState.ARCHIVED if rec.delivery_count >= self.config.delivery_count_limit
                     else RecordState.AVAILABLE)

    def _lock(self, recs: list[InFlightRecord]) -> None:
        lock = AcquisitionLock(len(recs))
        lock.timer = self.timers.schedule(self.config.record_lock_duration_ms,
                                          lambda: self._lock_expired(lock, recs))
        for rec in recs:
            rec.lock = lock

    def _unlock(self, rec: InFlightRecord) -> None:
        lock, rec.lock = rec.lock, None
        if lock is not None:
            lock.held -= 1
            if lock.held <= 0 and lock.timer is not None:
                lock.timer.cancel()

    def _renew(self, rec: InFlightRecord) -> None:
        self._unlock(rec)
        self._lock([rec])

    def _lock_expired(self, lock: AcquisitionLock, recs: list[InFlightRecord]) -> None:
        expired = False
        for rec in recs:
            if rec.lock is lock and rec.state == RecordState.ACQUIRED:
                rec.lock = None
                self._make_available(rec)
                expired = True
        if expired:
            self._advance_start()
            self.on_lock_expired()

    def _advance_start(self) -> None:
        start = self.start_offset
        while start < self.end_offset and self.records[start].state in (RecordState.ACKNOWLEDGED,
                                                                         RecordState.ARCHIVED):
            del self.records[start]
            start += 1
        self.start_offset = start


def _ranges(offsets: list[int], counts: list[int]) -> list[AcquiredRecords]:
    """Consecutive offsets with one delivery count as one range."""
    out: list[AcquiredRecords] = []
    for offset, count in zip(offsets, counts, strict=True):
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = out[-1]._replace(last_offset=offset)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out
