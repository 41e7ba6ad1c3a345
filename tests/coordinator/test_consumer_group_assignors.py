"""The KIP-848 server-side assignors (uniform, range) and the reconciliation of one member
(CurrentAssignmentBuilder), as Kafka's UniformAssignorTest / RangeAssignorTest /
CurrentAssignmentBuilderTest check them: pure functions, no broker."""

from __future__ import annotations

import uuid

import pytest

from kbroker.coordinator.assignors import ASSIGNORS, uniform
from kbroker.coordinator.assignors import range as range_assignor
from kbroker.coordinator.consumer_group_member import ConsumerGroupMember, MemberState
from kbroker.coordinator.current_assignment_builder import reconcile

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _flat(target: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in target.values() for t, ps in a.items() for p in ps)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@pytest.mark.parametrize("members", [1, 2, 3, 5, 7])
def test_every_partition_once_and_balanced(name: str, members: int) -> None:
    subs = {f"m{i}": frozenset({T1, T2}) for i in range(members)}
    target = ASSIGNORS[name](subs, {T1: 6, T2: 4}, {})
    assert _flat(target) == sorted([(T1, p) for p in range(6)] + [(T2, p) for p in range(4)])
    counts = [sum(len(ps) for ps in a.values()) for a in target.values()]
    if name == "uniform":
        assert max(counts) - min(counts) <= 1
    else:  # per topic within one
        for topic in (T1, T2):
            per = [len(a.get(topic, ())) for a in target.values()]
            assert max(per) - min(per) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    subs = {"a": frozenset({T1}), "b": frozenset({T1})}
    first = uniform.assign(subs, {T1: 6}, {})
    second = uniform.assign({**subs, "c": frozenset({T1})}, {T1: 6}, first)
    for m in ("a", "b"):
        assert second[m][T1] <= first[m][T1]  # nobody takes another's partition
        assert len(second[m][T1]) == 2
    assert len(second["c"][T1]) == 2


def test_uniform_with_different_subscriptions() -> None:
    subs = {"a": frozenset({T1}), "b": frozenset({T1, T2})}
    target = uniform.assign(subs, {T1: 2, T2: 4}, {})
    assert target == {"a": {T1: frozenset({0, 1})}, "b": {T2: frozenset(range(4))}}


def test_range_gives_contiguous_ranges_by_member_id() -> None:
    subs = {"b": frozenset({T1}), "a": frozenset({T1})}
    target = range_assignor.assign(subs, {T1: 5}, {})
    assert target == {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})}}


def test_unsubscribed_member_gets_nothing() -> None:
    for assign in ASSIGNORS.values():
        target = assign({"a": frozenset({T1}), "b": frozenset()}, {T1: 3}, {})
        assert target["b"] == {}
        assert target["a"] == {T1: frozenset({0, 1, 2})}


# -- reconciliation


def _member(assigned: dict[uuid.UUID, frozenset[int]], epoch: int = 10) -> ConsumerGroupMember:
    return ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, assigned=assigned)


def test_stable_member_at_the_target_epoch_is_unchanged() -> None:
    m = _member({T1: frozenset({0, 1})})
    assert reconcile(m, 10, {T1: frozenset({0, 1})}, None, lambda t, p: None) is m


def test_new_free_partitions_are_given_with_the_new_epoch() -> None:
    m = _member({T1: frozenset({0})})
    out = reconcile(m, 11, {T1: frozenset({0, 1})}, None, lambda t, p: None)
    assert (out.state, out.member_epoch, out.previous_member_epoch) == (MemberState.STABLE, 11, 10)
    assert out.assigned == {T1: frozenset({0, 1})}


def test_revocation_comes_first_and_keeps_the_epoch() -> None:
    m = _member({T1: frozenset({0, 1})})
    out = reconcile(m, 11, {T1: frozenset({1, 2})}, None, lambda t, p: None)
    assert out.state == MemberState.UNREVOKED_PARTITIONS
    assert out.member_epoch == 10
    assert out.assigned == {T1: frozenset({1})}  # 2 not yet: it must revoke 0 first
    assert out.revoking == {T1: frozenset({0})}
    # a heartbeat that still owns 0 changes nothing; one without it moves on
    assert reconcile(out, 11, {T1: frozenset({1, 2})}, {T1: frozenset({0, 1})}, lambda t, p: None) is out
    done = reconcile(out, 11, {T1: frozenset({1, 2})}, {T1: frozenset({1})}, lambda t, p: None)
    assert (done.state, done.member_epoch) == (MemberState.STABLE, 11)
    assert done.assigned == {T1: frozenset({1, 2})} and done.revoking == {}


def test_partitions_another_member_holds_are_withheld() -> None:
    m = _member({T1: frozenset({0})})
    held = {(T1, 1): "other"}
    out = reconcile(m, 11, {T1: frozenset({0, 1})}, None, lambda t, p: held.get((t, p)))
    assert (out.state, out.member_epoch) == (MemberState.UNRELEASED_PARTITIONS, 11)
    assert out.assigned == {T1: frozenset({0})}
    held.clear()  # released by the other member
    again = reconcile(out, 11, {T1: frozenset({0, 1})}, {T1: frozenset({0})}, lambda t, p: None)
    assert again.state == MemberState.STABLE and again.assigned == {T1: frozenset({0, 1})}
