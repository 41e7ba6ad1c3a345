"""GroupCoordinator state machine, driven by a MockTime: no sockets, no real waiting."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator, JoinRequest
from kbroker.coordinator.group_metadata import GroupState, JoinResult, OffsetAndMetadata, SyncResult
from kbroker.coordinator.group_metadata_manager import MemoryGroupStore
from kbroker.coordinator.timers import Timers
from kbroker.storage.errors import KafkaStorageError, RecordListTooLargeError
from kbroker.utils.time import MockTime

SESSION = 10_000
REBALANCE = 30_000


class Harness:
    def __init__(self, delay_ms: int = 0, store: MemoryGroupStore | None = None) -> None:
        self.time = MockTime()
        self.store = store or MemoryGroupStore()
        self.coord = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=delay_ms),
                                      self.time, self.store, Timers(self.time))
        self.coord.startup()

    def advance(self, ms: int) -> None:
        self.time.sleep(ms)
        self.coord.timers.run_due()

    def join(self, member_id: str = "", group: str = "g", instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, require_known: bool = True,
             session: int = SESSION) -> list[JoinResult]:
        out: list[JoinResult] = []
        req = JoinRequest(group, member_id, instance, "consumer", protocols or [("range", b"m")],
                          session, REBALANCE, require_known, "client", "/127.0.0.1")
        self.coord.join_group(req, out.append)
        return out

    def join_new(self, **kw: Any) -> list[JoinResult]:
        """The v4+ two-step join: MEMBER_ID_REQUIRED, then join with the id."""
        first = self.join(**kw)
        assert first and first[0].error_code == E.MEMBER_ID_REQUIRED
        return self.join(member_id=first[0].member_id, **kw)

    def join_members(self, n: int) -> list[JoinResult]:
        """n new members through the two-step join; the join completes once all are in."""
        firsts = [self.join()[0] for _ in range(n)]
        parked = [self.join(member_id=f.member_id) for f in firsts]
        assert all(len(p) == 1 for p in parked)
        return [p[0] for p in parked]

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             group: str = "g") -> list[SyncResult]:
        out: list[SyncResult] = []
        self.coord.sync_group(group, generation, member_id, None, None, None, assignments or {}, out.append)
        return out

    def group(self, group_id: str = "g") -> Any:
        return self.coord.groups[group_id]


def test_single_member_joins_syncs_and_is_stable() -> None:
    h = Harness()
    res = h.join_new()
    assert len(res) == 1 and res[0].error_code == E.NONE
    r = res[0]
    assert r.generation_id == 1 and r.leader_id == r.member_id and r.protocol_name == "range"
    assert r.members == [(r.member_id, None, b"m")]
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    sync = h.sync(r.member_id, 1, {r.member_id: b"assignment"})
    assert sync[0].error_code == E.NONE and sync[0].assignment == b"assignment"
    assert h.group().state is GroupState.STABLE
    assert h.coord.heartbeat("g", r.member_id, None, 1) == E.NONE


def test_join_completes_when_all_known_members_rejoin_without_waiting_for_timeout() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.sync(a.member_id, 1, {a.member_id: b"all"})
    b_first = h.join()
    b = h.join(member_id=b_first[0].member_id)
    assert b == []  # parked: the group waits for a to rejoin
    assert h.coord.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
    a2 = h.join(member_id=a.member_id)
    assert len(a2) == 1 and len(b) == 1, "completes at once, with no time passing"
    assert a2[0].generation_id == b[0].generation_id == 2
    assert a2[0].leader_id == a.member_id and len(a2[0].members or []) == 2
    assert b[0].members == []


def test_three_members_pending_ids_coalesce_into_one_generation() -> None:
    h = Harness()
    firsts = [h.join()[0] for _ in range(3)]
    results = [h.join(member_id=f.member_id) for f in firsts]
    assert all(len(r) == 1 for r in results)
    assert {r[0].generation_id for r in results} == {1}
    assert len(h.group().members) == 3


def test_sync_from_followers_parks_until_leader_syncs() -> None:
    h = Harness()
    results = h.join_members(2)
    leader = next(r for r in results if r.member_id == r.leader_id)
    follower = next(r for r in results if r.member_id != r.leader_id)
    waiting = h.sync(follower.member_id, 1)
    assert waiting == []
    done = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
    assert done[0].assignment == b"L" and waiting[0].assignment == b"F"
    assert h.group().state is GroupState.STABLE


def test_session_timeout_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b = h.join_members(2)
    h.sync(a.leader_id, 1, {a.member_id: b"1", b.member_id: b"2"})
    h.sync(b.member_id if b.member_id != a.leader_id else a.member_id, 1)
    for _ in range(3):  # a keeps heartbeating, b is silent
        h.advance(SESSION // 2)
        h.coord.heartbeat("g", a.member_id, None, 1)
    assert b.member_id not in h.group().members
    assert h.coord.heartbeat("g", a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
    again = h.join(member_id=a.member_id)
    assert again[0].generation_id == 2 and again[0].members == [(a.member_id, None, b"m")]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b = h.join_members(2)
    h.sync(a.leader_id, 1, {})
    c = h.join_new()
    assert c == []
    for _ in range(REBALANCE // 5000):  # a rejoins; b only heartbeats, never rejoins
        h.advance(5000)
        h.coord.heartbeat("g", b.member_id, None, 1)
        if not h.group().members[a.member_id].is_awaiting_join:
            h.join(member_id=a.member_id)
    h.advance(1)
    assert c and c[0].generation_id == 2
    assert set(h.group().members) == {a.member_id, c[0].member_id}


def test_errors_unknown_member_illegal_generation_and_session_bounds() -> None:
    h = Harness()
    a = h.join_new()[0]
    assert h.coord.heartbeat("g", "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", a.member_id, None, 7) == E.ILLEGAL_GENERATION
    assert h.sync("nobody", 1)[0].error_code == E.UNKNOWN_MEMBER_ID
    assert h.join(member_id="nobody")[0].error_code == E.UNKNOWN_MEMBER_ID
    assert h.join(session=10)[0].error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join(session=3_600_000)[0].error_code == E.INVALID_SESSION_TIMEOUT
    assert h.join(group="")[0].error_code == E.INVALID_GROUP_ID
    res = h.join(protocols=[("other", b"")])
    assert res[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_leave_group_batch_and_empty_group() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.sync(a.member_id, 1, {})
    top, results = h.coord.leave_group("g", [(a.member_id, None), ("ghost", None)])
    assert top == E.NONE
    assert [e for _, _, e in results] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.group().state is GroupState.EMPTY and h.group().generation_id == 2


def test_static_member_rejoin_keeps_assignment_and_fences_old_id() -> None:
    h = Harness()
    a = h.join(instance="i-1")[0]
    assert a.error_code == E.NONE
    h.sync(a.member_id, 1, {a.member_id: b"asg"})
    again = h.join(instance="i-1")[0]  # restart: unknown member id, same instance
    assert again.error_code == E.NONE and again.member_id != a.member_id
    assert again.generation_id == 1 and h.group().state is GroupState.STABLE
    assert h.coord.heartbeat("g", a.member_id, "i-1", 1) == E.FENCED_INSTANCE_ID
    assert h.sync(again.member_id, 1)[0].assignment == b"asg"
    top, res = h.coord.leave_group("g", [(a.member_id, "i-1")])
    assert res[0][2] == E.FENCED_INSTANCE_ID


def test_initial_rebalance_delay_waits_then_completes() -> None:
    h = Harness(delay_ms=3000)
    a = h.join_new()
    assert a == []
    h.advance(2999)
    assert a == []
    h.advance(1)
    assert a and a[0].generation_id == 1


def test_offsets_commit_fetch_persist_reload_and_delete() -> None:
    h = Harness()
    om = OffsetAndMetadata(42, 3, "meta", h.time.milliseconds())
    assert h.coord.commit_offsets("simple", "", None, -1, {("t", 0): om}) == {("t", 0): E.NONE}
    err, got = h.coord.fetch_offsets("simple", [("t", 0), ("t", 1)])
    assert err == E.NONE and got[("t", 0)] == om and got[("t", 1)] is None
    reloaded = Harness(store=h.store)
    assert reloaded.coord.fetch_offsets("simple", None)[1] == {("t", 0): om}
    assert reloaded.coord.delete_groups(["simple", "nope"]) == {"simple": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert Harness(store=h.store).coord.fetch_offsets("simple", None)[1] == {}


def test_commit_checks_generation_and_membership() -> None:
    h = Harness()
    a = h.join_new()[0]
    om = OffsetAndMetadata(1, -1, "", 0)
    assert h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): om}) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    h.sync(a.member_id, 1, {})
    assert h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 0): om}) == {("t", 0): E.NONE}
    assert h.coord.commit_offsets("g", a.member_id, None, 5, {("t", 0): om}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.commit_offsets("g", "x", None, 1, {("t", 0): om}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.coord.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
    big = OffsetAndMetadata(1, -1, "x" * 5000, 0)
    assert h.coord.commit_offsets("g", a.member_id, None, 1, {("t", 1): big}) == {
        ("t", 1): E.OFFSET_METADATA_TOO_LARGE}


def test_offsets_of_empty_group_expire_after_retention() -> None:
    h = Harness()
    h.coord.commit_offsets("old", "", None, -1, {("t", 0): OffsetAndMetadata(5, -1, "", h.time.milliseconds())})
    h.advance(CoordinatorConfig().offsets_retention_ms - 1)
    assert h.coord.expire_offsets() == 0
    h.advance(2)
    assert h.coord.expire_offsets() == 1
    assert "old" not in h.coord.groups


def test_group_metadata_survives_reload_with_members() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.sync(a.member_id, 1, {a.member_id: b"asg"})
    again = Harness(store=h.store)
    g = again.group()
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == a.member_id
    assert again.coord.heartbeat("g", a.member_id, None, 1) == E.NONE
    assert again.sync(a.member_id, 1)[0].assignment == b"asg"
    again.advance(SESSION + 1)
    assert again.group().state is GroupState.EMPTY


def test_store_failure_on_sync_fails_the_generation() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.store.fail = True
    res = h.sync(a.member_id, 1, {a.member_id: b"x"})
    assert res[0].error_code == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("error,expected", [
    (KafkaStorageError("disk gone"), E.NOT_COORDINATOR),
    (RecordListTooLargeError("too big"), E.INVALID_COMMIT_OFFSET_SIZE),
    (OSError("anything else"), E.COORDINATOR_NOT_AVAILABLE),
])
def test_store_failures_map_as_kafkas(error: BaseException, expected: int) -> None:
    """Kafka's GroupMetadataManager maps append errors for SyncGroup and OffsetCommit alike."""
    h = Harness()
    a = h.join_new()[0]
    h.store.fail = error
    assert h.sync(a.member_id, 1, {a.member_id: b"x"})[0].error_code == expected


@pytest.mark.parametrize("name,expected", [("", 0), ("a", 97), ("group-1", 293458018)])
def test_java_string_hash(name: str, expected: int) -> None:
    from kbroker.utils.java_hash import java_string_hash

    if name == "group-1":
        expected = sum(ord(c) * 31 ** (len(name) - 1 - i) for i, c in enumerate(name))
        expected = (expected + 2**31) % 2**32 - 2**31
    assert java_string_hash(name) == expected


def test_offset_delete_refuses_subscribed_topics() -> None:
    from kbroker.protocol.codec import Writer
    from kbroker.protocol.messages.consumer_protocol_subscription import (
        ConsumerProtocolSubscription,
    )

    w = Writer()
    w.int16(1)
    ConsumerProtocolSubscription(topics=["sub"]).encode(w, 1)
    h = Harness()
    a = h.join_new(protocols=[("range", w.to_bytes())])[0]
    h.sync(a.member_id, 1, {})
    om = OffsetAndMetadata(1, -1, "", 0)
    h.coord.commit_offsets("g", a.member_id, None, 1, {("sub", 0): om, ("other", 0): om})
    err, res = h.coord.delete_offsets("g", [("sub", 0), ("other", 0)])
    assert err == E.NONE and res == {("sub", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
    assert set(h.group().offsets) == {("sub", 0)}


def test_shutdown_answers_parked_requests() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.sync(a.member_id, 1, {})
    parked = h.join_new()
    assert parked == []
    h.coord.shutdown()
    assert parked[0].error_code == E.NOT_COORDINATOR


def test_retried_join_answers_the_earlier_request() -> None:
    h = Harness()
    a = h.join_new()[0]
    h.sync(a.member_id, 1, {})
    b_id = h.join()[0].member_id
    first = h.join(member_id=b_id)  # parked: a has not rejoined yet
    retry = h.join(member_id=b_id)  # the client gave up on it and sent JoinGroup again
    assert first[0].error_code == E.REBALANCE_IN_PROGRESS and retry == []
    h.join(member_id=a.member_id)
    assert retry[0].error_code == E.NONE and retry[0].generation_id == 2


def test_offsets_of_a_deleted_topic_go() -> None:
    h = Harness()
    om = OffsetAndMetadata(3, -1, "", 0)
    h.coord.commit_offsets("s", "", None, -1, {("gone", 0): om, ("gone", 1): om, ("kept", 0): om})
    assert h.coord.on_topic_deleted("gone") == 2
    assert set(Harness(store=h.store).coord.fetch_offsets("s", None)[1]) == {("kept", 0)}
