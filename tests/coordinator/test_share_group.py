"""ShareGroupCoordinator (KIP-932 membership) with a fake clock, and the share session
cache's epochs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.coordinator.share_group import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareHeartbeatRequest,
)
from kbroker.coordinator.timers import Timers
from kbroker.server.share_session_cache import (
    SHARE_SESSION_LIMIT_REACHED,
    ShareSessionCache,
    ShareSessionError,
)
from kbroker.utils.time import MockTime

T1, T2 = uuid.uuid4(), uuid.uuid4()


@dataclass
class Info:
    topic_id: uuid.UUID
    partitions: int


class Topics:
    def __init__(self) -> None:
        self.topics = {"a": Info(T1, 3), "b": Info(T2, 1)}

    def get(self, name: str) -> Info | None:
        return self.topics.get(name)

    def names(self) -> list[str]:
        return list(self.topics)


def make(max_size: int = 10) -> tuple[ShareGroupCoordinator, MockTime, Timers, list[tuple[str, str]]]:
    time = MockTime()
    timers = Timers(time)
    removed: list[tuple[str, str]] = []
    coord = ShareGroupCoordinator(ShareGroupConfig(1000, 100, max_size), timers, lambda g: g == "classic")
    coord.add_member_removed_listener(lambda g, m: removed.append((g, m)))
    return coord, time, timers, removed


def hb(coord: ShareGroupCoordinator, member: str, epoch: int, topics: list[str] | None = None,
       topic_lookup: Topics | None = None, group: str = "g"):  # type: ignore[no-untyped-def]
    return coord.heartbeat(ShareHeartbeatRequest(group, member, epoch, None, topics), topic_lookup or Topics())


def test_members_share_every_partition_and_take_new_epochs_at_their_heartbeat() -> None:
    coord, _, _, _ = make()
    a = hb(coord, "m1", 0, ["a"])
    assert (a.error_code, a.member_epoch, a.assignment) == (E.NONE, 1, {T1: frozenset({0, 1, 2})})
    b = hb(coord, "m2", 0, ["a", "b"])
    assert (b.member_epoch, b.assignment) == (2, {T1: frozenset({0, 1, 2}), T2: frozenset({0})})
    again = hb(coord, "m1", 1)  # behind the group: takes epoch 2, its assignment unchanged
    assert (again.error_code, again.member_epoch, again.assignment) == (E.NONE, 2, None)
    assert hb(coord, "m1", 1).error_code == E.FENCED_MEMBER_EPOCH


def test_new_partitions_bump_the_epoch_and_reach_members() -> None:
    coord, _, _, _ = make()
    topics = Topics()
    hb(coord, "m1", 0, ["a"], topics)
    topics.topics["a"] = Info(T1, 5)
    r = hb(coord, "m1", 1, None, topics)
    assert (r.member_epoch, r.assignment) == (2, {T1: frozenset(range(5))})


def test_checks() -> None:
    coord, _, _, _ = make(max_size=1)
    assert hb(coord, "", 0, ["a"]).error_code == E.INVALID_REQUEST
    assert hb(coord, "m1", 0, None).error_code == E.INVALID_REQUEST
    assert hb(coord, "m1", -2, ["a"]).error_code == E.INVALID_REQUEST
    assert hb(coord, "m1", 4, ["a"]).error_code == E.UNKNOWN_MEMBER_ID
    assert hb(coord, "m1", 0, ["a"], group="classic").error_code == E.GROUP_ID_NOT_FOUND
    assert hb(coord, "m1", 0, ["a"]).error_code == E.NONE
    assert hb(coord, "m2", 0, ["a"]).error_code == E.GROUP_MAX_SIZE_REACHED
    assert hb(coord, "m9", -1).error_code == E.UNKNOWN_MEMBER_ID


def test_leaving_and_session_timeout_remove_members_and_tell_the_listener() -> None:
    coord, time, timers, removed = make()
    hb(coord, "m1", 0, ["a"])
    hb(coord, "m2", 0, ["a"])
    assert hb(coord, "m1", -1).member_epoch == -1
    assert removed == [("g", "m1")]
    time.sleep(999)
    timers.run_due()
    assert coord.is_member("g", "m2")
    time.sleep(1)
    timers.run_due()
    assert removed == [("g", "m1"), ("g", "m2")]
    assert coord.describe("g") is not None and coord.describe("g").state == "Empty"  # type: ignore[union-attr]
    assert coord.delete("g") == E.NONE and coord.describe("g") is None


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=1)
    with pytest.raises(ShareSessionError) as e:
        cache.get("g", "m", 1)
    assert e.value.code == E.SHARE_SESSION_NOT_FOUND
    session, old = cache.open("g", "m")
    assert old is None and session.epoch == 1
    assert cache.get("g", "m", 1) is session and session.epoch == 2
    with pytest.raises(ShareSessionError) as e:
        cache.get("g", "m", 1)
    assert e.value.code == E.INVALID_SHARE_SESSION_EPOCH
    assert cache.get("g", "m", -1) is session and session.epoch == 2  # the final request
    with pytest.raises(ShareSessionError) as e:
        cache.open("g", "other")
    assert e.value.code == SHARE_SESSION_LIMIT_REACHED
    again, old = cache.open("g", "m")  # replaces the member's session
    assert old is session and again.epoch == 1
    session.update([(T1, 0), (T1, 1)], [(T1, 0)])
    assert list(session.partitions) == [(T1, 1)]


def test_the_share_partitions_assigned_are_recorded_and_a_replay_knows_the_group_again() -> None:
    """ShareGroupStatePartitionMetadata (record type 15): written when the initialized
    share partitions change (an assignment, an alter, a delete), a tombstone when the group
    is deleted; replayed into another coordinator (a new group coordinator), the group is
    known again, empty, with them."""
    records: list[tuple[str, bytes, bytes | None]] = []
    coord = ShareGroupCoordinator(ShareGroupConfig(1000, 100, 10), Timers(MockTime()), lambda g: False,
                                  lambda g, rs: records.extend((g, k, v) for k, v in rs))
    assert hb(coord, "m1", 0, ["a"]).error_code == E.NONE
    assert hb(coord, "m2", 0, ["a"]).error_code == E.NONE  # the same partitions: nothing new to record
    assert len(records) == 1 and records[0][0] == "g"
    coord.mark_initialized("g", T2, "b", 0)
    coord.mark_initialized("g", T2, "b", 0)  # known already
    coord.mark_deleted("g", T1, 2)
    assert len(records) == 3

    again = ShareGroupCoordinator(ShareGroupConfig(1000, 100, 10), Timers(MockTime()), lambda g: False)
    for _g, key, value in records:
        again.replay(key, value)
    group = again.describe("g")
    assert group is not None and group.state == "Empty"
    assert again.initialized_partitions("g") == {T1: {0, 1}, T2: {0}}
    assert group.topic_names == {T1: "a", T2: "b"}

    for m in ("m1", "m2"):
        assert hb(coord, m, -1).error_code == E.NONE
    assert coord.delete("g") == E.NONE and records[-1][2] is None
    again.replay(records[-1][1], None)
    assert again.describe("g") is None
