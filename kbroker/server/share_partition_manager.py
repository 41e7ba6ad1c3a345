"""SharePartitionManager: the share partitions of this broker's partitions and what
ShareFetch and ShareAcknowledge do with them, as Kafka's SharePartitionManager and
DelayedShareFetch (read, not copied).

A share partition (coordinator/share_partition.py) exists per (group, topic id,
partition) once a member fetches it. The first time, its state is read from the share
coordinator (ShareStatePersister: `__share_group_state`, coordinator/share_coordinator.py);
a partition the group never consumed starts at the group's `share.auto.offset.reset`:
`latest` (the default, as Kafka) at the high watermark, `earliest` at the log start.

A fetch reads each partition from its `next_fetch_offset()` (a read bounded by the high
watermark, or with the group's `share.isolation.level=read_committed` by the last stable
offset, and by the bytes and records left of the request), walks the batch headers of
the slice read (the 61-byte v2 header of each batch, read with pread and parsed by the
core: records/batch_header.py) and acquires the offsets of its data batches; control
batches (transaction markers) are never delivered, their offsets archived. Under
read_committed so are the batches of aborted transactions, found as a read_committed
consumer finds them (the log's aborted transactions overlapping the read: a
transactional batch of a producer whose aborted transaction began at or before it, until
that producer's marker), as Kafka's SharePartition archives them
(filterAbortedTransactionalAcquiredRecords). The answer carries the slice up to the last
batch with an acquired offset (sent with sendfile) and the acquired ranges; the client
delivers only the records in those.
With nothing acquired, the fetch waits (a DelayedShareFetch in the replica manager's fetch
purgatory, keyed by partition) until an append, a release or a lock timeout makes
records available, or `max_wait_ms` ends.

Every change a client must be able to count on is persisted before it is answered: an
acknowledgement (accepted records are never delivered again), the initial start offset.
The persister (server/share_state_persister.py) answers at once on a single broker; in a
cluster it asks the share coordinator, maybe on another broker, so a share partition is
initialized in the background (a fetch meanwhile waits for it) and an acknowledgement is
answered once its state is written and replicated. An acknowledgement whose state could
not be written is answered with the error and undone (its accepted and rejected records
available again, delivered again), as Kafka rolls its in-memory state back.

In a cluster the share partitions of a partition live on its leader (Kafka's
share-partition leader): when this broker stops leading it, or leads it again at a new
leader epoch, they are dropped (`leadership_changed`), what they had in flight
delivered again by the new leader from the persisted state (ACQUIRED is persisted as
AVAILABLE). Each write carries the partition's leader epoch, which the share coordinator
fences (an old leader cannot overwrite the new one's state).
Acquisitions are not persisted (after a restart nothing is locked; what was in flight is
delivered again, with its delivery count as last persisted). A lock timeout is persisted
when it fires.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.share_coordinator import PersistedState, SharePartitionKey
from kbroker.coordinator.share_partition import (
    AckBatch,
    AcknowledgeError,
    AcquiredRecords,
    SharePartition,
    SharePartitionConfig,
)
from kbroker.coordinator.timers import Timers
from kbroker.records.batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from kbroker.records.file_slice import FileSlice
from kbroker.utils.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.storage.log import Log
    from kbroker.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)
E = ErrorCode


ReadResult = tuple[int, PersistedState | None]


class ShareStatePersister(Protocol):
    """Where share-partition state lives (Kafka's Persister): answered at once, or later."""

    def read_state(self, key: SharePartitionKey) -> ReadResult | Awaitable[ReadResult]: ...

    def write_state(self, key: SharePartitionKey, state: PersistedState) -> int | Awaitable[int]: ...


class InMemoryPersister:
    """State kept in memory only (unit tests)."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, PersistedState] = {}

    def read_state(self, key: SharePartitionKey) -> ReadResult:
        return E.NONE, self.states.get(key)

    def write_state(self, key: SharePartitionKey, state: PersistedState) -> int:
        self.states[key] = state
        return E.NONE


@dataclass
class PartitionFetch:
    """One partition's part of a ShareFetch answer."""

    topic_id: uuid.UUID
    partition: int
    error_code: int = E.NONE
    error_message: str | None = None
    records: FileSlice | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)


class BatchSpan(NamedTuple):
    """One whole batch of a slice read for a share fetch."""

    first_offset: int
    last_offset: int
    is_control: bool
    is_transactional: bool
    producer_id: int
    end: int  # its end position in the slice


def batch_spans(data: FileSlice) -> list[BatchSpan]:
    """Each whole batch of a slice read from a segment."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= data.size:
        head = os.pread(data.fd, HEADER_SIZE, data.position + pos)
        if len(head) < HEADER_SIZE:
            break
        h = BatchHeader.parse(head)
        end = pos + LOG_OVERHEAD + h.batch_length
        if end > data.size:
            break
        out.append(BatchSpan(h.base_offset, h.last_offset, h.is_control, h.is_transactional, h.producer_id, end))
        pos = end
    return out


def aborted_spans(spans: list[BatchSpan], aborted: list[AbortedTxn]) -> set[int]:
    """The indexes of the data batches that belong to aborted transactions (the walk of
    Kafka's read_committed consumer: a producer's aborted transaction opens when a batch
    reaches its first offset and ends at that producer's next control batch)."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    open_pids: set[int] = set()
    out: set[int] = set()
    for i, span in enumerate(spans):
        while pending and pending[0].first_offset <= span.last_offset:
            open_pids.add(pending.pop(0).producer_id)
        if span.is_control:
            open_pids.discard(span.producer_id)
        elif span.is_transactional and span.producer_id in open_pids:
            out.add(i)
    return out


class SharePartitionManager:
    def __init__(self, replica_manager: ReplicaManager, topics: TopicCatalog, timers: Timers,
                 config: Callable[[str], SharePartitionConfig], persister: ShareStatePersister,
                 auto_offset_reset: Callable[[str], str] = lambda group_id: "latest") -> None:
        self.replica_manager = replica_manager
        self.topics = topics
        self.timers = timers
        self.config = config
        self.persister = persister
        self.auto_offset_reset = auto_offset_reset
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.leader_epochs: dict[SharePartitionKey, int] = {}  # the partition's, when it was built
        self._initializing: set[SharePartitionKey] = set()
        self._init_errors: dict[SharePartitionKey, int] = {}

    # -- share partitions
    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        info = self.topics.get_by_id(topic_id)
        return None if info is None else str(info.name)

    def _log(self, topic_id: uuid.UUID, partition: int):  # type: ignore[no-untyped-def]
        name = self._topic_name(topic_id)
        if name is None:
            raise KafkaError(f"Unknown topic id {topic_id}", E.UNKNOWN_TOPIC_ID)
        tp = TopicPartition(name, partition)
        return tp, self.replica_manager.leader_partition(tp).local_log()

    def share_partition(self, key: SharePartitionKey) -> SharePartition | None:
        """The key's share partition, built from its persisted state the first time; None
        while that state is being read (in a cluster: the fetch waits for it)."""
        sp = self.partitions.get(key)
        if sp is not None or key in self._initializing:
            return sp
        code = self._init_errors.pop(key, E.NONE)
        if code != E.NONE:
            raise KafkaError("The share partition's state could not be read or written.", code)
        tp, _plog = self._log(key[1], key[2])
        leader_epoch = self.replica_manager.leader_partition(tp).leader_epoch
        read = self.persister.read_state(key)
        if isinstance(read, tuple):
            code, state = read
            if code == E.NONE and state is None:
                state = self._initial_state(key, leader_epoch)
                written = self.persister.write_state(key, state)
                code = written if isinstance(written, int) else E.UNKNOWN_SERVER_ERROR
            if code != E.NONE or state is None:
                raise KafkaError("The share partition's state could not be read or written.", code)
            return self._restore(key, state, leader_epoch)
        self._initializing.add(key)
        asyncio.get_running_loop().create_task(self._initialize(key, tp, leader_epoch, read))
        return None

    def _initial_state(self, key: SharePartitionKey, leader_epoch: int) -> PersistedState:
        """A partition the group never consumed: from `share.auto.offset.reset`."""
        _tp, plog = self._log(key[1], key[2])
        reset = self.auto_offset_reset(key[0])
        return PersistedState(0, plog.log_start_offset if reset == "earliest" else plog.high_watermark,
                              leader_epoch=leader_epoch)

    async def _initialize(self, key: SharePartitionKey, tp: TopicPartition, leader_epoch: int,
                          read: Awaitable[ReadResult]) -> None:
        """Read the key's state from the share coordinator (write the initial one if it has
        none), then build the share partition, if this broker still leads at that epoch."""
        code: int = E.UNKNOWN_SERVER_ERROR
        try:
            code, state = await read
            if code == E.NONE and state is None:
                state = self._initial_state(key, leader_epoch)
                written = self.persister.write_state(key, state)
                code = written if isinstance(written, int) else await written
            if code == E.NONE and state is not None and self._leads(tp, leader_epoch):
                self._restore(key, state, leader_epoch)
        except KafkaError as e:
            code = e.error_code
        finally:
            self._initializing.discard(key)
            if code != E.NONE:
                log.warning("share partition %s of group %s not initialized: error %d", tp, key[0], code)
                self._init_errors[key] = code
            self.replica_manager.delayed_fetch_purgatory.check_and_complete(tp)

    def _restore(self, key: SharePartitionKey, state: PersistedState, leader_epoch: int) -> SharePartition:
        group_id, topic_id, partition = key
        sp = SharePartition.restore(group_id, topic_id, partition, state.start_offset, state.batches,
                                    self.config(group_id), self.timers, state.state_epoch,
                                    lambda: self._changed(key))
        self.partitions[key] = sp
        self.leader_epochs[key] = leader_epoch
        log.info("share group %s: share partition %s-%d from offset %d", group_id, topic_id, partition,
                 sp.start_offset)
        return sp

    def _leads(self, tp: TopicPartition, leader_epoch: int) -> bool:
        p = self.replica_manager.get_partition(tp)
        return p is not None and p.is_leader and p.leader_epoch == leader_epoch

    def leadership_changed(self, leaders: list[Any], followers: list[Any]) -> None:
        """After a LeaderAndIsr or StopReplica (cluster mode): drop the share partitions of
        partitions no longer led here, or led at another leader epoch than they were built
        at; the next fetch builds them again from the persisted state."""
        for key in list(self.partitions):
            name = self._topic_name(key[1])
            if name is None or not self._leads(TopicPartition(name, key[2]), self.leader_epochs.get(key, -1)):
                log.info("share group %s: share partition %s-%d dropped (leadership moved)", key[0], name,
                         key[2])
                self.forget(key)

    def forget(self, key: SharePartitionKey) -> None:
        """Drop a share partition from memory (its state was altered or deleted): the next
        fetch builds it again from what is persisted."""
        sp = self.partitions.pop(key, None)
        self.leader_epochs.pop(key, None)
        if sp is not None:
            sp.close()

    def forget_idle(self, group_id: str) -> None:
        """Drop the group's share partitions that hold no acquired record (cluster mode,
        when no share session of the group is left here): the next fetch reads their
        state again, after the writes before it (server/share_state_persister.py)."""
        for key in [k for k, sp in self.partitions.items() if k[0] == group_id and not sp.holds_acquired()]:
            self.forget(key)

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark, None when this broker does not lead it."""
        try:
            return int(self.replica_manager.leader_partition(TopicPartition(topic, partition))
                       .local_log().high_watermark)
        except KafkaError:
            return None

    def leads(self, topic: str, partition: int) -> bool:
        p = self.replica_manager.get_partition(TopicPartition(topic, partition))
        return p is not None and p.is_leader

    def _persist(self, key: SharePartitionKey, sp: SharePartition) -> int | Awaitable[int]:
        return self.persister.write_state(key, PersistedState(sp.state_epoch, sp.start_offset, sp.snapshot(),
                                                              self.leader_epochs.get(key, 0)))

    def _changed(self, key: SharePartitionKey) -> None:
        """Records became available (release, lock timeout): persist (not waited for: they
        are delivered again whether or not the write lands), wake waiting fetches."""
        sp = self.partitions.get(key)
        if sp is None:
            return
        written = self._persist(key, sp)
        if not isinstance(written, int):
            asyncio.ensure_future(written).add_done_callback(lambda f: _log_write(key, f))
        self._wake(key)

    # -- ShareFetch
    def fetch(self, group_id: str, member_id: str, partitions: Iterable[tuple[uuid.UUID, int]],
              max_bytes: int, max_records: int) -> list[PartitionFetch]:
        """Acquire what the partitions have for the member (see the module docstring)."""
        out = []
        bytes_left, records_left = max_bytes, max_records if max_records > 0 else 2**31 - 1
        config = self.config(group_id)  # the group's configs now: they may have changed since
        for topic_id, partition in partitions:
            pf = PartitionFetch(topic_id, partition)
            out.append(pf)
            if bytes_left <= 0 or records_left <= 0:
                continue
            try:
                got = self._fetch_one(group_id, member_id, topic_id, partition, bytes_left, records_left,
                                      config)
            except KafkaError as e:
                pf.error_code, pf.error_message = e.error_code, str(e)
                continue
            if got is not None:
                pf.records, pf.acquired = got
                bytes_left -= pf.records.size
                records_left -= sum(a.last_offset - a.first_offset + 1 for a in pf.acquired)
        return out

    def _fetch_one(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                   max_bytes: int, max_records: int, config: SharePartitionConfig
                   ) -> tuple[FileSlice, list[AcquiredRecords]] | None:
        key = (group_id, topic_id, partition)
        _tp, plog = self._log(topic_id, partition)
        sp = self.share_partition(key)
        if sp is None:
            return None  # being initialized: has_available says when it is
        sp.config = config  # new acquisitions take the group's lock duration as it is now (Kafka's)
        committed = config.read_committed
        if plog.log_start_offset > sp.start_offset:
            sp.move_start_to(plog.log_start_offset)
        if not sp.can_acquire():
            return None
        offset = sp.next_fetch_offset()
        bound = _fetch_bound(plog, committed)
        if offset >= bound:
            return None
        # by max_bytes alone: acquire() takes max_records of it, and the slice is cut at the
        # last batch taken (a read capped by the sparse offset index at start+max_records
        # gave only the first batch whenever the index had no entry between)
        read = plog.read(offset, max_bytes, max_offset=bound)
        data = read.records
        if data is None:
            return None
        spans = batch_spans(data)
        aborted = aborted_spans(spans, plog.collect_aborted_transactions(offset, read)) if committed else set()
        acquired = sp.acquire(member_id, [(b.first_offset, b.last_offset, b.is_control or i in aborted)
                                          for i, b in enumerate(spans)], max_records)
        if not acquired:
            return None
        last_acquired = acquired[-1].last_offset
        end = next((b.end for b in spans if b.last_offset >= last_acquired), data.size)
        return FileSlice(data.file, data.position, end), acquired

    def has_available(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> bool:
        committed = self.config(group_id).read_committed
        for topic_id, partition in partitions:
            key = (group_id, topic_id, partition)
            sp = self.partitions.get(key)
            if key in self._initializing:
                continue
            try:
                _tp, plog = self._log(topic_id, partition)
            except KafkaError:
                return True  # answer the error now
            if sp is None or (sp.can_acquire() and sp.next_fetch_offset() < _fetch_bound(plog, committed)):
                return True
        return False

    def watch_keys(self, partitions: Iterable[tuple[uuid.UUID, int]]) -> list[TopicPartition]:
        keys = []
        for topic_id, partition in partitions:
            name = self._topic_name(topic_id)
            if name is not None:
                keys.append(TopicPartition(name, partition))
        return keys

    # -- acknowledgements (ShareFetch and ShareAcknowledge)
    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    batches: list[AckBatch]) -> AckAnswer | Awaitable[AckAnswer]:
        """Apply the batches; the partition's answer once their state is persisted."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            try:
                self._log(topic_id, partition)
            except KafkaError as e:
                return e.error_code, str(e)
            return E.INVALID_RECORD_STATE, "No records of this partition are acquired."
        try:
            done = sp.acknowledge(member_id, batches)
        except AcknowledgeError as e:
            return e.code, e.message
        if any(t == 2 for b in batches for t in b.acknowledge_types):
            self._wake(key)
        written = self._persist(key, sp)
        if isinstance(written, int):
            return self._acknowledged(key, sp, done, written)
        return self._acknowledged_later(key, sp, done, written)

    def _acknowledged(self, key: SharePartitionKey, sp: SharePartition, done: dict[int, int],
                      code: int) -> AckAnswer:
        """The acknowledgement's answer; not persisted, it is undone (`SharePartition.reopen`)."""
        if code == E.FENCED_STATE_EPOCH and self.partitions.get(key) is sp:
            self.forget(key)  # initialized anew (AlterShareGroupOffsets): read again at the next fetch
        elif code != E.NONE and self.partitions.get(key) is sp:
            sp.reopen(done)
            self._wake(key)
        return (E.NONE, None) if code == E.NONE else (code, "The acknowledgement could not be persisted.")

    async def _acknowledged_later(self, key: SharePartitionKey, sp: SharePartition, done: dict[int, int],
                                  written: Awaitable[int]) -> AckAnswer:
        return self._acknowledged(key, sp, done, await written)

    def _wake(self, key: SharePartitionKey) -> None:
        name = self._topic_name(key[1])
        if name is not None:
            self.replica_manager.delayed_fetch_purgatory.check_and_complete(TopicPartition(name, key[2]))

    def release_member(self, group_id: str, member_id: str,
                       partitions: Iterable[tuple[uuid.UUID, int]] | None = None) -> None:
        """A share session closed, or the member left the group: its records go back."""
        for key, sp in list(self.partitions.items()):
            if key[0] != group_id or (partitions is not None and (key[1], key[2]) not in set(partitions)):
                continue
            if sp.release_member(member_id):
                self._changed(key)

    def shutdown(self) -> None:
        self.partitions.clear()


AckAnswer = tuple[int, str | None]


def _log_write(key: SharePartitionKey, done: asyncio.Future[int]) -> None:
    code = E.UNKNOWN_SERVER_ERROR if done.cancelled() or done.exception() is not None else done.result()
    if code != E.NONE:
        log.warning("share state of %s-%s-%d not written: error %d", *key, code)


def _fetch_bound(plog: Log, committed: bool) -> int:
    """Where a share fetch stops: the last stable offset (read_committed) or the high watermark."""
    return int(plog.last_stable_offset if committed else plog.high_watermark)


class DelayedShareFetch(DelayedOperation):
    """A ShareFetch with nothing to acquire yet, waiting in the fetch purgatory on its
    partitions; `complete()` answers it (acquiring what there is then)."""

    __slots__ = ("ready", "complete")

    def __init__(self, deadline: float, ready: Callable[[], bool], complete: Callable[[], None]) -> None:
        super().__init__(deadline)
        self.ready = ready
        self.complete = complete

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready() else False

    def on_complete(self) -> None:
        self.complete()
