"""ConsumerGroupMember: one member of a KIP-848 consumer group, and its assignment.

Learned from Apache Kafka's group-coordinator ConsumerGroupMember and MemberState
(read, not copied). A member owns its subscription (topic names, the server assignor
it named, rack, rebalance timeout), its member epoch (the group's assignment epoch it
has reconciled to; `previous_member_epoch` is the one before, which a heartbeat may
still carry once), its reconciliation state, the partitions it may own now
(`assigned`) and those it must give up first (`revoking`). An assignment maps a
topic id to a frozenset of partition numbers.

Epochs a client sends: 0 to join, -1 to leave, -2 (static members) to leave for a
while; a static member that left with -2 keeps its assignment for a new member with
the same `group.instance.id` until its session times out.

A member that joined with the classic protocol (JoinGroup, in a group being upgraded
member by member: coordinator/consumer_group_classic.py) also has `classic`: its
session timeout and the protocols of its JoinGroup (name, embedded subscription), as
Kafka's ClassicMemberMetadata.

Lock: the broker's event-loop thread only (the consumer group coordinator's).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

Assignment = dict[uuid.UUID, frozenset[int]]

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(Enum):
    """Kafka's MemberState, as ConsumerGroupDescribe names it."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ClassicMemberMetadata:
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's order

    @property
    def protocol_name(self) -> str:
        """The member's first protocol: the one its JoinGroup and SyncGroup name."""
        return self.protocols[0][0] if self.protocols else ""


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None
    # not part of the member's value: its timers
    session_timer: Any = field(default=None, compare=False, repr=False)
    rebalance_timer: Any = field(default=None, compare=False, repr=False)

    def replace(self, **changes: Any) -> ConsumerGroupMember:
        return dataclasses.replace(self, **changes)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def owned_partitions(self) -> set[tuple[uuid.UUID, int]]:
        """Every partition the member holds: assigned, or still to revoke."""
        return {(t, p) for a in (self.assigned, self.revoking) for t, ps in a.items() for p in ps}

    def subscription_key(self) -> tuple[object, ...]:
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor,
                self.rack_id)


def assignment_of(pairs: dict[uuid.UUID, set[int]] | dict[uuid.UUID, frozenset[int]]) -> Assignment:
    """An assignment without empty topics."""
    return {t: frozenset(ps) for t, ps in pairs.items() if ps}


def partition_count(a: Assignment) -> int:
    return sum(len(ps) for ps in a.values())
