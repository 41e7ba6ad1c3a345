"""CurrentAssignmentBuilder: moves one member of a consumer group towards its target
assignment, incrementally (KIP-848's reconciliation).

Learned from Apache Kafka's CurrentAssignmentBuilder (read, not copied). A member is
given only partitions no other member still holds, and gives up first what it must
revoke:

- partitions it holds that are not in its target go to `revoking`; while any are
  left the member is UNREVOKED_PARTITIONS, keeps its epoch and is given nothing new;
  it acknowledges the revocation by a heartbeat whose owned partitions no longer
  name them;
- partitions of its target another member still holds are withheld: the member
  takes the new epoch and is UNRELEASED_PARTITIONS until they are released;
- otherwise it is STABLE at the target's epoch, holding exactly its target.

Pure: it reads the member and returns a new one; `holder(topic_id, partition)` says
which member holds a partition now (None: free).

Lock: none (no state).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kbroker.coordinator.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    assignment_of,
)

Holder = Callable[[uuid.UUID, int], "str | None"]


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              owned: Assignment | None, holder: Holder) -> ConsumerGroupMember:
    """The member after this heartbeat; `owned` is what the client says it holds (None:
    it did not say)."""
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _still_owns(owned, member.revoking):
            return member
        return _next(member.replace(revoking={}), target_epoch, target, holder)
    if member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next(member, target_epoch, target, holder)
    return member


def _still_owns(owned: Assignment, revoking: Assignment) -> bool:
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def _next(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
          holder: Holder) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    given: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic in set(member.assigned) | set(target):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        kept[topic] = set(current & wanted)
        revoking[topic] = set(current - wanted)
        free = {p for p in wanted - current if holder(topic, p) in (None, member.member_id)}
        unreleased = unreleased or len(free) < len(wanted - current)
        given[topic] = kept[topic] | free
    if any(revoking.values()):
        return member.replace(state=MemberState.UNREVOKED_PARTITIONS, assigned=assignment_of(kept),
                              revoking=assignment_of(revoking))
    epochs = {} if member.member_epoch == target_epoch else {
        "member_epoch": target_epoch, "previous_member_epoch": member.member_epoch}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.replace(state=state, assigned=assignment_of(given), revoking={}, **epochs)
