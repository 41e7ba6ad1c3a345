"""The KIP-848 consumer group protocol in the group coordinator, driven by a MockTime as
Kafka's GroupMetadataManagerTest drives it: epochs, incremental reconciliation, fencing
by session and rebalance timeouts, static members, the errors Kafka answers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kbroker.common.error_code import ErrorCode as E
from kbroker.coordinator.consumer_group_coordinator import ConsumerGroupConfig, HeartbeatRequest
from kbroker.coordinator.consumer_group_member import Assignment
from kbroker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator, JoinRequest
from kbroker.coordinator.group_metadata import OffsetAndMetadata
from kbroker.coordinator.group_metadata_manager import MemoryGroupStore
from kbroker.coordinator.timers import Timers
from kbroker.utils.time import MockTime

SESSION = 45_000
T1 = uuid.UUID(int=7)


@dataclass
class Info:
    name: str
    topic_id: uuid.UUID
    partitions: int


class Topics:
    def __init__(self) -> None:
        self.by_name = {"t": Info("t", T1, 4)}

    def get(self, name: str) -> Info | None:
        return self.by_name.get(name)

    def names(self) -> list[str]:
        return list(self.by_name)


class Harness:
    def __init__(self, **consumer: object) -> None:
        self.time = MockTime()
        self.topics = Topics()
        config = CoordinatorConfig(group_initial_rebalance_delay_ms=0,
                                   consumer=ConsumerGroupConfig(**consumer))  # type: ignore[arg-type]
        self.coord = GroupCoordinator(config, self.time, MemoryGroupStore(), Timers(self.time))
        self.coord.startup()

    def hb(self, member_id: str = "", epoch: int = 0, owned: Assignment | None = None,
           topics: list[str] | None = None, instance: str | None = None, assignor: str | None = None,
           group: str = "g") -> object:
        if epoch == 0 and owned is None:
            owned = {}
        if epoch == 0 and topics is None:
            topics = ["t"]
        return self.coord.consumer_heartbeat(HeartbeatRequest(
            group, member_id, epoch, instance, None, 30_000, topics, None, assignor, owned,
            api_version=0), self.topics)  # v0: the broker makes the member ids

    def advance(self, ms: int) -> None:
        self.time.sleep(ms)
        self.coord.timers.run_due()


def test_one_member_gets_every_partition_at_epoch_one() -> None:
    h = Harness()
    r = h.hb()
    assert r.error_code == E.NONE and r.member_id and r.member_epoch == 1
    assert r.assignment == {T1: frozenset(range(4))}
    assert r.heartbeat_interval_ms == 5000
    again = h.hb(r.member_id, 1, {T1: frozenset(range(4))})
    assert again.member_epoch == 1 and again.assignment is None  # nothing changed
    assert h.coord.consumer.state_of("g").value == "Stable"


def test_second_member_waits_for_the_revocation() -> None:
    h = Harness()
    a = h.hb()
    b = h.hb()
    assert b.member_epoch == 2 and b.assignment == {}  # a still holds everything
    ra = h.hb(a.member_id, 1, {T1: frozenset(range(4))})
    assert ra.member_epoch == 1  # revoking: the old epoch
    kept = ra.assignment[T1]
    assert len(kept) == 2
    ra2 = h.hb(a.member_id, 1, {T1: kept})  # revoked
    assert ra2.member_epoch == 2
    rb = h.hb(b.member_id, 2, {})
    assert rb.assignment == {T1: frozenset(range(4)) - kept}
    assert h.coord.consumer.state_of("g").value == "Stable"


def test_a_silent_member_is_fenced_after_the_session_timeout() -> None:
    h = Harness(session_timeout_ms=SESSION)
    a = h.hb()
    b = h.hb()
    h.hb(a.member_id, 1, {T1: frozenset(range(4))})
    for _ in range(3):  # b keeps heartbeating, a is silent
        h.advance(SESSION // 3)
        h.hb(b.member_id, 2, {})
    h.advance(1)
    assert a.member_id not in h.coord.consumer.groups["g"].members
    rb = h.hb(b.member_id, 2, {})
    assert rb.assignment == {T1: frozenset(range(4))}
    assert h.hb(a.member_id, 1, {}).error_code == E.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    h = Harness(session_timeout_ms=SESSION)
    a = h.hb()
    h.hb()
    assert h.hb(a.member_id, 1, {T1: frozenset(range(4))}).member_epoch == 1  # must revoke
    h.advance(30_000)
    assert a.member_id not in h.coord.consumer.groups["g"].members


def test_epochs_ahead_or_stale_are_fenced() -> None:
    h = Harness()
    a = h.hb()
    assert h.hb(a.member_id, 5, {}).error_code == E.FENCED_MEMBER_EPOCH
    assert h.hb("nobody", 1, {}).error_code == E.UNKNOWN_MEMBER_ID


def test_malformed_first_heartbeats_are_invalid_requests() -> None:
    h = Harness()
    assert h.hb(owned={T1: frozenset({0})}).error_code == E.INVALID_REQUEST
    r = h.coord.consumer_heartbeat(HeartbeatRequest("g", "", 0, owned={}), h.topics)
    assert r.error_code == E.INVALID_REQUEST  # no rebalance timeout, no subscription
    assert h.hb(group="").error_code == E.INVALID_GROUP_ID
    assert h.hb(epoch=7).error_code == E.INVALID_REQUEST  # no member id
    assert h.hb(assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR


def test_static_member_rejoins_with_its_assignment() -> None:
    h = Harness()
    a = h.hb(instance="i1")
    assert h.hb(instance="i1").error_code == E.UNRELEASED_INSTANCE_ID
    left = h.coord.consumer_heartbeat(HeartbeatRequest("g", a.member_id, -2, "i1"), h.topics)
    assert left.member_epoch == -2
    back = h.hb(instance="i1")
    assert back.error_code == E.NONE and back.member_id != a.member_id
    assert back.member_epoch == 1 and back.assignment == {T1: frozenset(range(4))}
    assert h.coord.consumer.groups["g"].group_epoch == 1  # no rebalance


def test_leaving_and_the_max_size() -> None:
    h = Harness(max_size=1)
    a = h.hb()
    assert h.hb().error_code == E.GROUP_MAX_SIZE_REACHED
    left = h.hb(a.member_id, -1)
    assert (left.error_code, left.member_epoch) == (E.NONE, -1)
    assert h.coord.consumer.state_of("g").value == "Empty"


def test_new_partitions_bump_the_group_epoch() -> None:
    h = Harness()
    a = h.hb()
    h.topics.by_name["t"] = Info("t", T1, 6)
    r = h.hb(a.member_id, 1, {T1: frozenset(range(4))})
    assert r.member_epoch == 2 and r.assignment == {T1: frozenset(range(6))}


def test_offsets_with_member_epochs_and_other_protocol_types_refused() -> None:
    h = Harness()
    a = h.hb()
    om = OffsetAndMetadata(5, -1, "", 0)
    assert h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): om}) == {("t", 0): E.NONE}
    assert h.coord.commit_offsets("g", a.member_id, None, 0, {("t", 0): om}) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert h.coord.commit_offsets("g", a.member_id, None, 3, {("t", 0): om}) == {("t", 0): E.FENCED_MEMBER_EPOCH}
    assert h.coord.commit_offsets("g", "x", None, 1, {("t", 0): om}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
    out: list[object] = []
    # a classic member may join (test_consumer_group_migration.py), not with another protocol type
    h.coord.join_group(JoinRequest("g", "", None, "connect", [("range", b"")], 10_000, 30_000), out.append)
    assert out[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL  # type: ignore[attr-defined]
    assert h.coord.list_groups(types=["consumer"])[1] == [("g", "consumer", "Stable", "consumer")]
    assert h.coord.list_groups(types=["classic"])[1] == []


def test_the_group_is_reloaded_from_its_records() -> None:
    h = Harness()
    a = h.hb()
    b = h.hb()
    kept = h.hb(a.member_id, 1, {T1: frozenset(range(4))}).assignment[T1]
    h.hb(a.member_id, 1, {T1: kept})
    rb = h.hb(b.member_id, 2, {})
    h.coord.commit_offsets("g", a.member_id, None, 2, {("t", 0): OffsetAndMetadata(9, -1, "", 0)})
    h.coord.shutdown()

    again = GroupCoordinator(h.coord.config, h.time, h.coord.store, Timers(h.time))
    again.startup()
    group = again.consumer.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert {m: (x.member_epoch, x.assigned) for m, x in group.members.items()} == {
        a.member_id: (2, {T1: kept}), b.member_id: (2, rb.assignment)}
    assert group.state.value == "Stable"
    r = again.consumer_heartbeat(HeartbeatRequest("g", a.member_id, 2, owned={T1: kept}), h.topics)
    assert (r.error_code, r.member_epoch) == (E.NONE, 2)
    assert again.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9
    # the fenced member's records are tombstoned: it is gone after a reload too
    again.consumer.fence(group, group.members[b.member_id], "test")
    third = GroupCoordinator(h.coord.config, h.time, h.coord.store, Timers(h.time))
    third.startup()
    assert list(third.consumer.groups["g"].members) == [a.member_id]
    assert third.consumer.groups["g"].group_epoch == 3
