"""Classic and consumer-protocol members in one group (KIP-848 online migration), driven
by a MockTime as Kafka's GroupMetadataManagerTest drives them: classic JoinGroup,
SyncGroup, Heartbeat and LeaveGroup inside a consumer group, the upgrade of a classic
group at the first ConsumerGroupHeartbeat, the downgrade when the last consumer-protocol
member goes, the policy, and the records a restart reloads."""

from __future__ import annotations

from typing import Any

from kbroker.common.error_code import ErrorCode as E
from kbroker.coordinator import consumer_protocol as cp
from kbroker.coordinator.consumer_group_coordinator import ConsumerGroupConfig, HeartbeatRequest
from kbroker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kbroker.coordinator.group_metadata import (
    JoinRequest,
    JoinResult,
    OffsetAndMetadata,
    SyncResult,
)
from kbroker.coordinator.group_metadata_manager import MemoryGroupStore
from kbroker.coordinator.timers import Timers
from kbroker.protocol.codec import Writer
from kbroker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kbroker.utils.time import MockTime

from .test_consumer_group_coordinator import T1, Topics

ALL = frozenset(range(4))


def subscription(topics: list[str], version: int = 1, owned: dict[str, list[int]] | None = None) -> bytes:
    w = Writer()
    w.int16(version)
    ConsumerProtocolSubscription(topics=topics, owned_partitions=[
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in (owned or {}).items()]
    ).encode(w, version)
    return bytes(w.to_bytes())


class Harness:
    def __init__(self, policy: str = "bidirectional", store: MemoryGroupStore | None = None,
                 time: MockTime | None = None) -> None:
        self.time = time or MockTime()
        self.topics = Topics()
        self.store = store or MemoryGroupStore()
        config = CoordinatorConfig(group_initial_rebalance_delay_ms=0,
                                   consumer=ConsumerGroupConfig(migration_policy=policy))
        self.coord = GroupCoordinator(config, self.time, self.store, Timers(self.time), topics=self.topics)
        self.coord.startup()

    def restart(self) -> Harness:
        self.coord.shutdown()
        return Harness(self.coord.config.consumer.migration_policy, self.store, self.time)

    def hb(self, member_id: str = "", epoch: int = 0, owned: dict[Any, frozenset[int]] | None = None) -> Any:
        return self.coord.consumer_heartbeat(HeartbeatRequest(
            "g", member_id, epoch, None, None, 30_000, ["t"] if epoch == 0 else None, None, None,
            {} if epoch == 0 and owned is None else owned, api_version=0), self.topics)

    def join(self, member_id: str = "", owned: dict[str, list[int]] | None = None,
             protocol_type: str = "consumer", session_ms: int = 10_000) -> list[JoinResult]:
        out: list[JoinResult] = []
        self.coord.join_group(JoinRequest("g", member_id, None, protocol_type,
                                          [("range", subscription(["t"], owned=owned)),
                                           ("roundrobin", subscription(["t"], owned=owned))],
                                          session_ms, 30_000, client_id="c"), out.append)
        return out

    def join_classic(self) -> str:
        """A new classic member: MEMBER_ID_REQUIRED, then the join with that id."""
        first = self.join()
        assert first[0].error_code == E.MEMBER_ID_REQUIRED
        return first[0].member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None) -> list[SyncResult]:
        out: list[SyncResult] = []
        self.coord.sync_group("g", generation, member_id, None, "consumer", "range", assignments or {}, out.append)
        return out

    def advance(self, ms: int) -> None:
        self.time.sleep(ms)
        self.coord.timers.run_due()

    def cgroup(self) -> Any:
        return self.coord.consumer.groups["g"]


def assigned(sync: SyncResult) -> dict[str, frozenset[int]]:
    assert sync.error_code == E.NONE, sync
    return cp.decode_assignment(sync.assignment)


def test_a_classic_member_joins_a_consumer_group_and_gets_its_share_once_released() -> None:
    h = Harness()
    a = h.hb()
    assert a.assignment == {T1: ALL}
    b = h.join_classic()
    joined = h.join(b)[0]
    assert (joined.error_code, joined.member_id, joined.protocol_type, joined.protocol_name) == (
        E.NONE, b, "consumer", "range")
    assert joined.leader_id == "" and joined.members == [] and joined.generation_id == 2  # a follower
    assert h.cgroup().members[b].classic is not None
    assert assigned(h.sync(b, 2)[0]) == {}  # its partitions are still A's
    assert h.coord.heartbeat("g", b, None, 2) == E.NONE  # waiting on them
    revoke = h.hb(a.member_id, 1, {T1: ALL})
    assert revoke.member_epoch == 1 and len(revoke.assignment[T1]) == 2
    kept = revoke.assignment[T1]
    assert h.hb(a.member_id, 1, {T1: kept}).member_epoch == 2  # revoked: B's are free
    assert h.coord.heartbeat("g", b, None, 2) == E.REBALANCE_IN_PROGRESS
    again = h.join(b)[0]
    assert again.generation_id == 2
    got = assigned(h.sync(b, 2)[0])
    assert got == {"t": ALL - kept}
    assert h.coord.heartbeat("g", b, None, 2) == E.NONE
    assert h.coord.consumer.state_of("g").value == "Stable"
    assert h.coord.heartbeat("g", b, None, 1) == E.ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", a.member_id, None, 2) == E.UNKNOWN_MEMBER_ID  # not a classic member
    assert h.coord.list_groups(types=["consumer"])[1] == [("g", "consumer", "Stable", "consumer")]


def test_classic_joins_refused_as_kafka_refuses_them() -> None:
    h = Harness()
    h.hb()
    assert h.join(protocol_type="connect")[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    b = h.join_classic()
    h.join(b)
    out: list[JoinResult] = []
    h.coord.join_group(JoinRequest("g", h.join_classic(), None, "consumer", [("sticky", subscription(["t"]))],
                                   10_000, 30_000), out.append)
    assert out[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL  # no protocol every classic member has
    out = []
    h.coord.sync_group("g", 2, b, None, "consumer", "roundrobin", {}, out.append)
    assert out[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_member_commits_with_its_generation_and_leaves() -> None:
    h = Harness()
    h.hb()
    b = h.join_classic()
    h.join(b)
    om = OffsetAndMetadata(5, -1, "", 0)
    assert h.coord.commit_offsets("g", b, None, 2, {("t", 0): om}, api_version=2) == {("t", 0): E.NONE}
    assert h.coord.commit_offsets("g", b, None, 1, {("t", 0): om}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
    epoch = h.cgroup().group_epoch
    assert h.coord.leave_group("g", [(b, None), ("nobody", None)])[1] == [
        (b, None, E.NONE), ("nobody", None, E.UNKNOWN_MEMBER_ID)]
    assert b not in h.cgroup().members and h.cgroup().group_epoch == epoch + 1


def test_a_classic_member_that_stops_heartbeating_is_fenced_after_its_session_timeout() -> None:
    h = Harness()
    a = h.hb()
    b = h.join_classic()
    h.join(b, session_ms=8_000)
    h.sync(b, 2)
    h.advance(7_000)
    assert h.coord.heartbeat("g", b, None, 2) == E.NONE  # the heartbeat restarts its session
    h.hb(a.member_id, 1, {T1: ALL})
    h.advance(7_000)
    assert b in h.cgroup().members
    h.advance(2_000)
    assert b not in h.cgroup().members and h.cgroup().group_epoch == 3


def test_offset_delete_refuses_the_topics_a_consumer_group_subscribes_to() -> None:
    h = Harness()
    a = h.hb()
    om = OffsetAndMetadata(5, -1, "", 0)
    h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): om, ("other", 0): om})
    err, out = h.coord.delete_offsets("g", [("t", 0), ("other", 0)])
    assert err == E.NONE and out == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}


def classic_group(h: Harness) -> tuple[str, str]:
    """A Stable classic group of two members, t-0,1 and t-2,3, offsets committed."""
    first = h.join_classic()
    parked = h.join(first)
    assert parked[0].error_code == E.NONE and parked[0].generation_id == 1
    second = h.join_classic()
    rejoins = h.join(second) + h.join(first)  # a new member: everyone rejoins
    assert all(r.error_code == E.NONE and r.generation_id == 2 for r in rejoins), rejoins
    leader = rejoins[0].leader_id
    follower = second if leader == first else first
    assignments = {leader: cp.encode_assignment({"t": frozenset({0, 1})}, 1),
                   follower: cp.encode_assignment({"t": frozenset({2, 3})}, 1)}
    h.sync(follower, 2)
    assert assigned(h.sync(leader, 2, assignments)[0]) == {"t": frozenset({0, 1})}
    om = OffsetAndMetadata(7, -1, "", 0)
    assert h.coord.commit_offsets("g", leader, None, 2, {("t", 0): om}) == {("t", 0): E.NONE}
    return leader, follower


def test_a_classic_group_is_upgraded_at_the_first_consumer_heartbeat() -> None:
    h = Harness()
    leader, follower = classic_group(h)
    c = h.hb()
    assert c.error_code == E.NONE and c.member_epoch == 3
    group = h.cgroup()
    assert set(group.members) == {leader, follower, c.member_id}
    assert group.members[leader].assigned == {T1: frozenset({0, 1})}
    assert h.coord.groups["g"].is_empty  # the classic group is gone, its offsets stay
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7
    assert h.coord.list_groups()[1] == [("g", "consumer", "Reconciling", "consumer")]
    # the classic members learn of the new epoch at their next heartbeat and rejoin
    assert h.coord.heartbeat("g", leader, None, 2) == E.REBALANCE_IN_PROGRESS
    for m in (leader, follower):
        before, target = group.members[m].assigned[T1], group.target[m].get(T1, frozenset())
        rejoined = h.join(m, owned={"t": sorted(before)})[0]
        revoking = not before <= target
        assert rejoined.error_code == E.NONE and rejoined.generation_id == (2 if revoking else 3)  # epoch stays
        got = assigned(h.sync(m, rejoined.generation_id)[0]).get("t", frozenset())
        assert got == before & target if revoking else got <= target
    # a restart reloads the converted group, classic members and all
    epochs = {m: (x.member_epoch, x.assigned) for m, x in group.members.items()}
    again = h.restart()
    group = again.cgroup()
    assert set(group.members) == {leader, follower, c.member_id}
    assert group.members[follower].classic is not None and group.members[c.member_id].classic is None
    assert again.coord.groups.get("g") is None or again.coord.groups["g"].is_empty
    assert {m: (x.member_epoch, x.assigned) for m, x in group.members.items()} == epochs
    assert again.coord.heartbeat("g", follower, None, epochs[follower][0]) in (E.NONE, E.REBALANCE_IN_PROGRESS)


def test_the_policy_decides_upgrade_and_downgrade() -> None:
    for policy, upgrades in [("disabled", False), ("downgrade", False), ("upgrade", True), ("BIDIRECTIONAL", True)]:
        h = Harness(policy)
        classic_group(h)
        r = h.hb()
        assert (r.error_code == E.NONE) == upgrades, policy
        if not upgrades:
            assert r.error_code == E.GROUP_ID_NOT_FOUND
            assert h.coord.list_groups()[1] == [("g", "consumer", "Stable", "classic")]
    h = Harness("upgrade")
    a = h.hb()
    b = h.join_classic()
    h.join(b)
    assert h.hb(a.member_id, -1).error_code == E.NONE
    assert list(h.cgroup().members) == [b]  # no downgrade: a consumer group of one classic member


def test_a_consumer_group_left_with_classic_members_is_downgraded() -> None:
    h = Harness()
    a = h.hb()
    b = h.join_classic()
    h.join(b)
    h.sync(b, 2)
    h.hb(a.member_id, 1, {T1: ALL})
    h.hb(a.member_id, 1, {T1: h.cgroup().members[a.member_id].assigned[T1]})
    h.join(b)
    assert len(assigned(h.sync(b, 2)[0])["t"]) == 2
    h.coord.commit_offsets("g", b, None, 2, {("t", 3): OffsetAndMetadata(4, -1, "", 0)})
    assert h.hb(a.member_id, -1).error_code == E.NONE  # the last consumer-protocol member leaves
    assert "g" not in h.coord.consumer.groups
    classic = h.coord.groups["g"]
    assert classic.state.value == "PreparingRebalance" and list(classic.members) == [b]
    assert classic.generation_id == 2 and classic.protocol_name == "range"
    assert h.coord.heartbeat("g", b, None, 2) == E.REBALANCE_IN_PROGRESS
    rejoined = h.join(b)[0]
    assert rejoined.error_code == E.NONE and rejoined.generation_id == 3 and rejoined.leader_id == b
    assert h.coord.list_groups()[1] == [("g", "consumer", "CompletingRebalance", "classic")]
    assert h.coord.fetch_offsets("g", [("t", 3)])[1][("t", 3)].offset == 4
    assert assigned(h.sync(b, 3, {b: cp.encode_assignment({"t": ALL}, 1)})[0]) == {"t": ALL}
    again = h.restart()
    assert "g" not in again.coord.consumer.groups and again.coord.groups["g"].generation_id == 3


def test_an_upgrade_whose_records_fail_to_append_leaves_the_classic_group_as_it_was() -> None:
    """The conversion is part of the heartbeat's one write: if it fails the heartbeat answers
    the write's error (NOT_COORDINATOR for a disk error, as Kafka's handleOperationException)
    and the classic group goes on, its members and their generation untouched."""
    h = Harness()
    leader, follower = classic_group(h)
    written = len(h.store.records)
    h.store.fail = True
    assert h.hb().error_code == E.NOT_COORDINATOR
    assert "g" not in h.coord.consumer.groups and len(h.store.records) == written
    classic = h.coord.groups["g"]
    assert classic.state.value == "Stable" and set(classic.members) == {leader, follower}
    assert h.coord.heartbeat("g", leader, None, 2) == E.NONE  # its heartbeat timers still run
    h.store.fail = False
    assert h.hb().error_code == E.NONE  # the next heartbeat upgrades it
    assert set(h.cgroup().members) >= {leader, follower}


def test_a_downgrade_whose_records_fail_to_append_keeps_the_consumer_group() -> None:
    h = Harness()
    a = h.hb()
    b = h.join_classic()
    h.join(b)
    h.store.fail = True
    left = h.hb(a.member_id, -1)
    assert left.error_code == E.NOT_COORDINATOR
    assert set(h.cgroup().members) == {a.member_id, b} and h.coord.groups.get("g") is None
    h.store.fail = False
    assert h.hb(a.member_id, -1).error_code == E.NONE  # the client leaves again: downgraded now
    assert "g" not in h.coord.consumer.groups and list(h.coord.groups["g"].members) == [b]


def test_a_classic_join_whose_records_fail_to_append_changes_nothing() -> None:
    h = Harness()
    a = h.hb()
    epoch = h.cgroup().group_epoch
    b = h.join_classic()
    h.store.fail = True
    assert h.join(b)[0].error_code == E.NOT_COORDINATOR
    assert set(h.cgroup().members) == {a.member_id} and h.cgroup().group_epoch == epoch
    h.store.fail = False
    assert h.join(b)[0].error_code == E.NONE and b in h.cgroup().members


def test_a_classic_leave_downgrades_a_consumer_group_of_classic_members() -> None:
    """Kafka's validateOnlineDowngradeWithFencedMember holds for any member that goes: a
    consumer group left with classic members only (its consumer member went while the
    policy was `upgrade`) becomes a classic group when one of them leaves, once the policy
    allows it; the LeaveGroup's next member then leaves the classic group."""
    h = Harness("upgrade")
    a = h.hb()
    b, c, d = (h.join_classic() for _ in range(3))
    for m in (b, c, d):
        assert h.join(m)[0].error_code == E.NONE
    assert h.hb(a.member_id, -1).error_code == E.NONE
    assert set(h.cgroup().members) == {b, c, d}  # no downgrade under `upgrade`
    again = Harness("bidirectional", h.store, h.time)  # restarted with Kafka 4.0's default
    assert set(again.cgroup().members) == {b, c, d}
    err, results = again.coord.leave_group("g", [(b, None), (c, None)])
    assert err == E.NONE and results == [(b, None, E.NONE), (c, None, E.NONE)]
    assert "g" not in again.coord.consumer.groups
    classic = again.coord.groups["g"]
    assert list(classic.members) == [d] and classic.state.value == "PreparingRebalance"
    assert again.coord.list_groups()[1] == [("g", "consumer", "PreparingRebalance", "classic")]


def test_a_consumer_member_whose_session_expires_downgrades_a_group_of_classic_members() -> None:
    """The fencing by the session timer converts as a leave does: the classic members are
    a classic group then, rebalancing, their offsets kept."""
    h = Harness()
    a = h.hb()
    b = h.join_classic()
    h.join(b, session_ms=60_000)
    h.sync(b, 2)
    h.coord.commit_offsets("g", b, None, 2, {("t", 1): OffsetAndMetadata(3, -1, "", 0)})
    for _ in range(5):  # B heartbeats; A says nothing
        h.advance(10_000)
        assert h.coord.heartbeat("g", b, None, 2) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    assert "g" not in h.coord.consumer.groups and a.member_id not in h.coord.groups["g"].members
    assert list(h.coord.groups["g"].members) == [b] and h.coord.groups["g"].state.value == "PreparingRebalance"
    assert h.coord.fetch_offsets("g", [("t", 1)])[1][("t", 1)].offset == 3
