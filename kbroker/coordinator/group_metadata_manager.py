"""GroupMetadataManager: the groups in memory and their copy in __consumer_offsets.

Every change that must survive a restart is appended to the group's
__consumer_offsets partition *before* memory changes (commit offsets, the
assignment of a new generation, a group becoming Empty, deletions as tombstones).
`load()` replays the topic at start-up, later records winning, exactly as a
compacted topic is read. Offsets of Empty groups expire `offsets.retention.minutes`
after the group became Empty (KIP-211); an offset with an explicit expire
timestamp (OffsetCommit v2-4 retention_time_ms) expires then.

Transactional offset commits are written as a transactional batch of the producer and
held as the group's pending offsets until the transaction ends; replaying the topic
keeps them per producer until its COMMIT (they apply) or ABORT marker (they go), and
those still open at the end stay pending, as Kafka's loadGroupsAndOffsets.
The records of KIP-848 consumer groups (consumer_group_records.py) are handed to the
consumer group coordinator as they are read (`consumer_replay`), those of other types to
the owner registered for the type (`add_replay`: the share groups' record type 15).

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.coordinator import consumer_group_records as cr
from kbroker.coordinator import group_records as gr
from kbroker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
)
from kbroker.coordinator.internal_topic import StoredRecord
from kbroker.records import control_record
from kbroker.records.batch_header import CONTROL_NONE

log = logging.getLogger(__name__)


class GroupStore(Protocol):
    @property
    def num_partitions(self) -> int: ...

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
               producer_id: int = -1, producer_epoch: int = -1) -> int: ...

    def read_partition(self, partition: int) -> Iterator[StoredRecord]: ...

    def partition_for(self, group_id: str) -> int: ...


class MemoryGroupStore:
    """A GroupStore in a list, one partition (unit tests)."""

    num_partitions = 1

    def __init__(self) -> None:
        self.records: list[StoredRecord] = []
        self.fail: bool | BaseException = False  # True: an OSError; or the error to raise

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
               producer_id: int = -1, producer_epoch: int = -1) -> int:
        if isinstance(self.fail, BaseException):
            raise self.fail
        if self.fail:
            raise OSError("store failure (test)")
        base = len(self.records)
        self.records.extend(StoredRecord(k, v, base + i, producer_id, producer_id >= 0)
                            for i, (k, v) in enumerate(records))
        return base

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """A marker, as the transaction coordinator has the partition leader write it."""
        kind = control_record.COMMIT if commit else control_record.ABORT
        self.records.append(StoredRecord(None, None, len(self.records), producer_id, True, kind))

    def partition_for(self, group_id: str) -> int:
        return 0

    def read_partition(self, partition: int) -> Iterator[StoredRecord]:
        return iter(list(self.records))


def _offset_key(group_id: str, tp: tuple[str, int]) -> bytes:
    return gr.encode_offset_key(gr.OffsetCommitKey(group_id, tp[0], tp[1]))


class GroupMetadataManager:
    def __init__(self, store: GroupStore, retention_ms: int,
                 consumer_active: Callable[[str], bool] = lambda group_id: False,
                 consumer_replay: Callable[[bytes, bytes | None], None] = lambda key, value: None) -> None:
        self.store = store
        self.retention_ms = retention_ms
        self.groups: dict[str, GroupMetadata] = {}
        # a KIP-848 consumer group with members: its offsets do not expire
        self.consumer_active = consumer_active
        # the records of KIP-848 consumer groups, as they are replayed
        self.consumer_replay = consumer_replay
        # other record types' owners (share groups' ShareGroupStatePartitionMetadata)
        self.replays: dict[int, Callable[[bytes, bytes | None], None]] = {}

    def add_replay(self, record_type: int, replay: Callable[[bytes, bytes | None], None]) -> None:
        """`replay(key, value)` for each record of that type, as the topic is loaded."""
        self.replays[record_type] = replay

    # -- writes
    def store_offsets(self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata],
                      producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Write offsets; with a producer id they are a transaction's, pending until its
        marker (group.pending_txn_offsets), else committed now."""
        records: list[tuple[bytes, bytes | None]] = []
        for tp, om in offsets.items():
            value = gr.OffsetCommitValue(om.offset, om.leader_epoch, om.metadata,
                                         om.commit_timestamp, om.expire_timestamp)
            records.append((_offset_key(group.group_id, tp), gr.encode_offset_value(value)))
        base = self.store.append(group.group_id, records, producer_id, producer_epoch)
        for om in offsets.values():
            om.record_offset = base
        if producer_id >= 0:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        else:
            group.offsets.update(offsets)

    def store_group(self, group: GroupMetadata, assignments: dict[str, bytes] | None = None) -> None:
        """Persist the group's generation, protocol, leader and members (with `assignments`)."""
        self.store.append(group.group_id, [group_record(group, assignments)])

    def delete_offsets(self, group: GroupMetadata, tps: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        doomed = [tp for tp in tps if tp in group.offsets]
        if doomed:
            self.store.append(group.group_id, [(_offset_key(group.group_id, tp), None) for tp in doomed])
            for tp in doomed:
                del group.offsets[tp]
        return doomed

    def delete_group(self, group: GroupMetadata, now_ms: int) -> None:
        records: list[tuple[bytes, bytes | None]] = [
            (_offset_key(group.group_id, tp), None) for tp in group.offsets]
        records.append((gr.encode_group_key(gr.GroupMetadataKey(group.group_id)), None))
        self.store.append(group.group_id, records)
        group.offsets.clear()
        group.transition(GroupState.DEAD, now_ms)
        self.groups.pop(group.group_id, None)

    # -- expiry
    def expire_offsets(self, now_ms: int) -> int:
        """Drop expired offsets; remove Empty groups left with none. Returns offsets removed."""
        removed = 0
        for group in list(self.groups.values()):
            if self.consumer_active(group.group_id):
                continue
            doomed = [tp for tp, om in group.offsets.items()
                      if self._expired(group, om, now_ms) and not group.has_pending_txn_offsets(tp)]
            if doomed:
                try:
                    removed += len(self.delete_offsets(group, doomed))
                except Exception:
                    log.exception("expiring offsets of group %s failed", group.group_id)
                    continue
            if (group.is_(GroupState.EMPTY) and not group.offsets and not group.pending_members
                    and not group.has_pending_txn_offsets()):
                try:
                    self.delete_group(group, now_ms)
                except Exception:
                    log.exception("removing empty group %s failed", group.group_id)
        return removed

    def _expired(self, group: GroupMetadata, om: OffsetAndMetadata, now_ms: int) -> bool:
        if om.expire_timestamp >= 0:
            return om.expire_timestamp <= now_ms
        if not group.is_(GroupState.EMPTY):
            return False
        reference = max(om.commit_timestamp, group.state_timestamp)
        return reference + self.retention_ms <= now_ms

    # -- load
    def load(self, now_ms: int, records: Iterable[StoredRecord] | None = None) -> list[GroupMetadata]:
        """Replay the store (or `records`, one partition's) into memory; returns the groups
        that have members."""
        partitions = ([records] if records is not None else
                      (self.store.read_partition(p) for p in range(self.store.num_partitions)))
        offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
        values: dict[str, gr.GroupMetadataValue | None] = {}
        pending: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        count = 0
        for partition_records in partitions:
            count += self._replay(partition_records, offsets, values, pending)
        with_members = []
        for group_id in set(offsets) | set(values) | set(pending):
            group_offsets = {tp: om for tp, om in offsets.get(group_id, {}).items() if om is not None}
            value = values.get(group_id)
            if value is None and not group_offsets and not pending.get(group_id):
                continue
            group = GroupMetadata(group_id, now_ms)
            group.offsets = group_offsets
            group.pending_txn_offsets = pending.get(group_id, {})
            if value is not None:
                _restore(group, value, now_ms)
            else:  # offsets only (simple commits): retention counts from each commit
                group.state_timestamp = -1
            self.groups[group_id] = group
            if group.members:
                with_members.append(group)
        log.info("loaded %d groups from %d __consumer_offsets records", len(self.groups), count)
        return with_members

    def _replay(self, records: Iterable[StoredRecord],
                offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]],
                values: dict[str, gr.GroupMetadataValue | None],
                pending: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]]) -> int:
        """One partition's records, in log order; transactional offsets wait for their
        producer's marker (per partition, as markers are). Returns how many were read."""
        open_txns: dict[int, list[tuple[str, tuple[str, int], OffsetAndMetadata]]] = {}
        count = 0
        for rec in records:
            count += 1
            if rec.control_type != CONTROL_NONE:
                done = open_txns.pop(rec.producer_id, [])
                for group_id, txn_tp, txn_om in done:
                    pending.get(group_id, {}).pop(rec.producer_id, None)
                    if rec.control_type == control_record.COMMIT:
                        current = offsets.setdefault(group_id, {}).get(txn_tp)
                        if current is None or current.record_offset < txn_om.record_offset:
                            offsets[group_id][txn_tp] = txn_om
                continue
            kind = cr.record_type(rec.key or b"")
            replay = self.consumer_replay if kind in cr.RECORD_TYPES else self.replays.get(kind)
            if replay is not None:
                try:
                    replay(rec.key or b"", rec.value)
                except Exception as e:  # noqa: BLE001 - a bad record is skipped, as below
                    log.warning("skipping an unreadable group record of type %d: %s", kind, e)
                continue
            try:
                key = gr.decode_key(rec.key or b"")
                if isinstance(key, gr.OffsetCommitKey):
                    tp = (key.topic, key.partition)
                    om = None if rec.value is None else _offset(gr.decode_offset_value(rec.value), rec.offset)
                    if rec.transactional and rec.producer_id >= 0 and om is not None:
                        open_txns.setdefault(rec.producer_id, []).append((key.group, tp, om))
                        pending.setdefault(key.group, {}).setdefault(rec.producer_id, {})[tp] = om
                    else:
                        offsets.setdefault(key.group, {})[tp] = om
                else:
                    values[key.group] = None if rec.value is None else gr.decode_group_value(rec.value)
            except (ValueError, IndexError) as e:
                log.warning("skipping an unreadable %s record: %s", "__consumer_offsets", e)
        return count


def group_record(group: GroupMetadata, assignments: dict[str, bytes] | None = None) -> tuple[bytes, bytes]:
    """The group's GroupMetadata record: generation, protocol, leader and members (with
    `assignments`, else each member's own)."""
    members = []
    for m in group.members.values():
        assignment = m.assignment if assignments is None else assignments.get(m.member_id, b"")
        try:
            subscription = m.metadata(group.protocol_name) if group.protocol_name else b""
        except KeyError:
            subscription = b""
        members.append(gr.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.rebalance_timeout_ms, m.session_timeout_ms, subscription,
                                      assignment))
    value = gr.GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                  group.leader_id, group.state_timestamp, members)
    key = gr.encode_group_key(gr.GroupMetadataKey(group.group_id))
    return key, gr.encode_group_value(value)


def _offset(v: gr.OffsetCommitValue, record_offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                             record_offset)


def _restore(group: GroupMetadata, value: gr.GroupMetadataValue, now_ms: int) -> None:
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    if value.current_state_timestamp >= 0:
        group.state_timestamp = value.current_state_timestamp
    for mv in value.members:
        member = MemberMetadata(
            mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
            mv.rebalance_timeout if mv.rebalance_timeout >= 0 else mv.session_timeout,
            mv.session_timeout, value.protocol_type, [(value.protocol or "", mv.subscription)])
        member.assignment = mv.assignment
        group.add(member)
    if group.members:
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
        group.state = GroupState.STABLE
    else:
        group.leader_id = None
        group.state = GroupState.EMPTY


def store_error(error: BaseException) -> int:
    """The error for a failed __consumer_offsets write, mapped as Kafka's
    GroupMetadataManager maps its append errors (storeGroup / storeOffsets)."""
    code = error.error_code if isinstance(error, KafkaError) else None
    if code in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return ErrorCode.NOT_COORDINATOR  # the client finds the coordinator again
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE,
                ErrorCode.TRANSACTION_COORDINATOR_FENCED):
        return code  # a transactional commit of a fenced producer: it must know
    return ErrorCode.COORDINATOR_NOT_AVAILABLE
