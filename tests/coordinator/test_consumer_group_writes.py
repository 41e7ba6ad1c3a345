"""A KIP-848 consumer group's records and its state, as Kafka's coordinator runtime keeps
them: an operation whose append fails leaves the group as it was and answers the mapped
error; what memory holds is what replaying the records gives; the metadata hash stored
with the group epoch makes a load notice a topic that grew meanwhile; a coordinator that
is loading answers COORDINATOR_LOAD_IN_PROGRESS and one that resigned NOT_COORDINATOR.

Driven by a MockTime and a MemoryGroupStore, as the coordinator tests beside this one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kbroker.common.error_code import ErrorCode as E
from kbroker.common.errors import KafkaError
from kbroker.coordinator import consumer_group_records as cr
from kbroker.coordinator.consumer_group import ConsumerGroup
from kbroker.coordinator.consumer_group_coordinator import HeartbeatRequest
from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.coordinator.group_metadata_manager import MemoryGroupStore
from kbroker.coordinator.internal_topic import StoredRecord
from kbroker.coordinator.timers import Timers

from .test_consumer_group_coordinator import SESSION, T1, Harness, Info

ALL = frozenset(range(4))


def view(group: ConsumerGroup) -> tuple[Any, ...]:
    """Everything a group's records carry (and what follows from them)."""
    return (group.group_epoch, group.assignment_epoch, group.metadata_hash, dict(group.target),
            {m: (x.member_epoch, x.previous_member_epoch, x.state, x.assigned, x.revoking,
                 x.subscribed_topic_names, x.instance_id) for m, x in group.members.items()},
            dict(group.holders), dict(group.static_members))


def stable_pair(h: Harness) -> tuple[Any, Any]:
    a = h.hb()
    b = h.hb()
    kept = h.hb(a.member_id, 1, {T1: ALL}).assignment[T1]
    h.hb(a.member_id, 1, {T1: kept})
    h.hb(b.member_id, 2, {})
    assert h.coord.consumer.state_of("g").value == "Stable"
    return a, b


def reloaded(h: Harness, clustered: bool = False) -> GroupCoordinator:
    again = GroupCoordinator(h.coord.config, h.time, h.coord.store, Timers(h.time), clustered=clustered)
    again.startup()
    return again


def test_a_failed_append_leaves_a_new_group_unmade() -> None:
    h = Harness()
    store: MemoryGroupStore = h.coord.store  # type: ignore[assignment]
    store.fail = KafkaError("too few replicas", E.NOT_ENOUGH_REPLICAS)
    r = h.hb()
    assert (r.error_code, r.member_id) == (E.COORDINATOR_NOT_AVAILABLE, None)
    assert "g" not in h.coord.consumer.groups and len(h.coord.timers) == 0 and store.records == []
    # Kafka's handleOperationException mapping, the rest of it
    for failure, answer in [(KafkaError("not the leader", E.NOT_LEADER_OR_FOLLOWER), E.NOT_COORDINATOR),
                            (OSError("disk"), E.NOT_COORDINATOR),  # the client looks for the coordinator again
                            (KafkaError("timed out", E.REQUEST_TIMED_OUT), E.COORDINATOR_NOT_AVAILABLE),
                            (KafkaError("big", E.MESSAGE_TOO_LARGE), E.UNKNOWN_SERVER_ERROR),
                            (RuntimeError("bug"), E.UNKNOWN_SERVER_ERROR)]:
        store.fail = failure
        assert h.hb().error_code == answer, failure
    assert "g" not in h.coord.consumer.groups and store.records == []
    store.fail = False
    r = h.hb()
    assert (r.error_code, r.member_epoch, r.assignment) == (E.NONE, 1, {T1: ALL})


def test_a_failed_join_leaves_the_group_as_it_was() -> None:
    h = Harness(session_timeout_ms=SESSION)
    a, b = stable_pair(h)
    group = h.coord.consumer.groups["g"]
    before, written = view(group), len(h.coord.store.records)  # type: ignore[attr-defined]
    h.coord.store.fail = KafkaError("disk", E.KAFKA_STORAGE_ERROR)  # type: ignore[attr-defined]
    r = h.hb()  # a third member: a new group epoch, a new target, all reverted
    assert r.error_code == E.NOT_COORDINATOR
    assert h.coord.consumer.groups["g"] is group and view(group) == before
    assert len(h.coord.store.records) == written  # type: ignore[attr-defined]
    h.coord.store.fail = False  # type: ignore[attr-defined]
    # the members' session timers are as they were: both live on, then go silent and expire
    assert h.hb(a.member_id, 2, group.members[a.member_id].assigned).member_epoch == 2
    h.advance(SESSION + 1)
    assert h.coord.consumer.state_of("g").value == "Empty"


def test_a_failed_leave_keeps_the_member_and_a_failed_fencing_is_retried() -> None:
    h = Harness(session_timeout_ms=SESSION)
    a, b = stable_pair(h)
    group = h.coord.consumer.groups["g"]
    before = view(group)
    h.coord.store.fail = True  # type: ignore[attr-defined]
    assert h.hb(a.member_id, -1).error_code == E.NOT_COORDINATOR
    assert view(group) == before
    h.advance(SESSION + 1)  # both sessions expire while the store fails: nobody is removed
    assert view(group) == before
    h.coord.store.fail = False  # type: ignore[attr-defined]
    h.advance(1000)  # the fencing runs again (Kafka's timer retry) and now is written
    assert group.members == {} and group.group_epoch == 4
    assert reloaded(h).consumer.state_of("g").value == "Empty"


def test_memory_is_what_replaying_the_records_gives() -> None:
    """After joins, a revocation, a static member leaving and coming back under a new id,
    a leave and a failed heartbeat, a fresh coordinator replaying the store has the group
    exactly as the one that wrote it."""
    h = Harness()
    a, b = stable_pair(h)
    s = h.hb(instance="static")
    h.hb(a.member_id, 2, h.coord.consumer.groups["g"].members[a.member_id].assigned)
    h.coord.consumer_heartbeat(HeartbeatRequest("g", s.member_id, -2, "static"), h.topics)
    h.hb(instance="static")
    h.coord.store.fail = True  # type: ignore[attr-defined]
    assert h.hb(b.member_id, -1).error_code == E.NOT_COORDINATOR
    h.coord.store.fail = False  # type: ignore[attr-defined]
    assert h.hb(a.member_id, -1).error_code == E.NONE
    group = h.coord.consumer.groups["g"]
    group_view = view(group)
    again = reloaded(h).consumer.groups["g"]
    assert view(again) == group_view


def test_a_topic_that_grew_while_the_coordinator_was_away_gets_a_new_target() -> None:
    h = Harness()
    a, b = stable_pair(h)
    group = h.coord.consumer.groups["g"]
    assert group.metadata_hash != 0
    assigned = {m: x.assigned for m, x in group.members.items()}
    h.coord.shutdown()

    same = reloaded(h)  # nothing changed: the same epoch, nobody moves
    r = same.consumer_heartbeat(HeartbeatRequest("g", a.member_id, 2, owned=assigned[a.member_id]), h.topics)
    assert (r.error_code, r.member_epoch, r.assignment) == (E.NONE, 2, None)
    assert same.consumer.groups["g"].group_epoch == 2
    same.shutdown()

    h.topics.by_name["t"] = Info("t", T1, 6)  # two more partitions while nobody coordinated
    grown = reloaded(h)
    r = grown.consumer_heartbeat(HeartbeatRequest("g", a.member_id, 2, owned=assigned[a.member_id]), h.topics)
    loaded = grown.consumer.groups["g"]
    assert r.error_code == E.NONE and loaded.group_epoch == 3 and loaded.assignment_epoch == 3
    assert set().union(*(t[T1] for t in loaded.target.values())) == set(range(6))
    assert r.member_epoch == 3 and r.assignment is not None and assigned[a.member_id][T1] <= r.assignment[T1]
    _, stored_hash = cr.decode_epoch(next(rec.value for rec in reversed(h.coord.store.records)  # type: ignore
                                          if cr.record_type(rec.key) == cr.GROUP_METADATA))
    assert stored_hash == loaded.metadata_hash != group.metadata_hash


def test_the_metadata_hash_is_kafkas_tagged_field() -> None:
    """ConsumerGroupMetadataValue v0 with tag 0 (MetadataHash), as Kafka 4.1 writes it; a
    record without it (Kafka 3.x, older kbroker) reads as hash 0; unknown tags are skipped."""
    value = cr.encode_epoch(7, -12345)
    assert value == bytes.fromhex("0000" "00000007" "01" "00" "08") + (-12345).to_bytes(8, "big", signed=True)
    assert cr.decode_epoch(value) == (7, -12345)
    assert cr.decode_epoch(cr.encode_epoch(7)) == (7, 0)
    assert cr.encode_epoch(7) == bytes.fromhex("0000" "00000007" "00")
    other_tag = bytes.fromhex("0000" "00000007" "02" "05" "01" "ff" "00" "08") + (9).to_bytes(8, "big")
    assert cr.decode_epoch(other_tag) == (7, 9)


class LoadingStore(MemoryGroupStore):
    """A store that, while a partition is read, has a request arrive (as a coordinator
    loading off the event loop would see one)."""

    num_partitions = 2

    def __init__(self) -> None:
        super().__init__()
        self.during_load: Any = None
        self.seen: list[Any] = []

    def partition_for(self, group_id: str) -> int:
        return 0 if group_id == "g" else 1

    def read_partition(self, partition: int) -> Iterator[StoredRecord]:
        if self.during_load is not None:
            self.seen.append(self.during_load())
        return iter([r for r in self.records if partition == 0])


def test_loading_answers_load_in_progress_and_a_resigned_coordinator_not_coordinator() -> None:
    h = Harness()
    store = LoadingStore()
    coord = GroupCoordinator(h.coord.config, h.time, store, Timers(h.time), clustered=True)
    h.coord = coord
    assert h.hb().error_code == E.NOT_COORDINATOR  # not elected yet
    coord.on_elected(0)
    coord.on_elected(1)
    a = h.hb()
    assert (a.error_code, a.member_epoch) == (E.NONE, 1)
    coord.on_resigned(0)  # another broker leads __consumer_offsets-0 now
    r = h.hb(a.member_id, 1, {T1: ALL})
    assert r.error_code == E.NOT_COORDINATOR and "g" not in coord.consumer.groups
    store.during_load = lambda: (h.hb(a.member_id, 1, {T1: ALL}).error_code, h.hb(group="other").error_code)
    coord.on_elected(0)  # elected again: loading, then the member carries on at its epoch
    store.during_load = None
    # while partition 0 loads its groups wait; partition 1's are served
    assert store.seen == [(E.COORDINATOR_LOAD_IN_PROGRESS, E.NONE)]
    r = h.hb(a.member_id, 1, {T1: ALL})
    assert (r.error_code, r.member_epoch) == (E.NONE, 1)


def test_records_of_a_group_follow_one_another_in_one_batch_per_heartbeat() -> None:
    """A heartbeat's records are appended together (one batch), so a failover never leaves
    half an operation: a join is member, epoch, target and current assignment at once."""
    h = Harness()
    batches: list[int] = []
    store: MemoryGroupStore = h.coord.store  # type: ignore[assignment]
    append = store.append

    def counting(group_id: str, records: list[tuple[bytes, bytes | None]], *args: Any) -> int:
        batches.append(len(records))
        return append(group_id, records, *args)

    h.coord.consumer.write = counting
    h.hb()
    assert batches == [5]
    assert [cr.record_type(r.key or b"") for r in store.records] == [
        cr.MEMBER_METADATA, cr.GROUP_METADATA, cr.TARGET_MEMBER, cr.TARGET_METADATA, cr.CURRENT_ASSIGNMENT]
