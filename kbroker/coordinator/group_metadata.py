"""GroupMetadata and MemberMetadata: one classic consumer group's in-memory state.

States and the transitions the coordinator makes (Kafka's classic GroupCoordinator):

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader SyncGroup--> Stable
    Stable | CompletingRebalance --join, leave, member expiry--> PreparingRebalance
    PreparingRebalance --no member left--> Empty
    any --DeleteGroups / all offsets expired while Empty--> Dead

Offsets committed in a transaction (TxnOffsetCommit) wait in `pending_txn_offsets`, per
producer id, until the transaction's marker: a COMMIT makes them the committed offsets
(unless a later plain commit of the same partition was written after them, as Kafka's
"olderThan"), an ABORT drops them. `record_offset` is where an offset's batch lies in
__consumer_offsets, which orders them.

Lock: the broker's event-loop thread only. Invariants: `leader_id` is a member
(or None when there are none); a static member's `group_instance_id` maps to its
current member id in `static_members`; Empty means no members.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kbroker.coordinator.timers import Timer


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    record_offset: int = -1  # the base offset of its batch in __consumer_offsets


JoinCallback = Callable[["JoinResult"], None]
SyncCallback = Callable[["SyncResult"], None]


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool = True
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class JoinResult:
    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] | None = None
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class MemberMetadata:
    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.await_join: JoinCallback | None = None
        self.await_sync: SyncCallback | None = None
        self.is_new = False
        self.heartbeat_timer: Timer | None = None

    def __repr__(self) -> str:
        return f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r})"

    @property
    def is_awaiting_join(self) -> bool:
        return self.await_join is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise KeyError("no supported protocol")


class GroupMetadata:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, Timer | None] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # producer id -> offsets committed in its transaction in progress
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.new_member_added = False
        self.join_timer: Timer | None = None
        self.join_deadline_ms = 0

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
                f"members={list(self.members)})")

    # -- state
    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- transactional offsets
    def complete_pending_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """The transaction of `producer_id` ended: its offsets become the committed ones
        (a commit, unless a later plain commit was written after them) or go (an abort)."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not commit or not pending:
            return
        for tp, om in pending.items():
            current = self.offsets.get(tp)
            if current is None or current.record_offset < om.record_offset:
                self.offsets[tp] = om

    def has_pending_txn_offsets(self, tp: tuple[str, int] | None = None) -> bool:
        """Whether a transaction in progress committed an offset (of `tp`, when given)."""
        if tp is None:
            return bool(self.pending_txn_offsets)
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    # -- members
    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member presenting a member id other than its instance's current one."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # most votes; ties broken by the order of the first member's preferences
        first = next(iter(self.members.values())).protocol_names()
        return max(votes, key=lambda p: (votes[p], -first.index(p) if p in first else -len(first)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics of a `consumer` group's members' subscriptions (each read as its version-0
        prefix, kbroker.coordinator.consumer_protocol); None when unknown: not a `consumer`
        group, no protocol chosen yet, or a subscription that does not read."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        from kbroker.coordinator.consumer_protocol import subscription_topics

        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics

    def summary(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "state": self.state.value,
                "protocol_type": self.protocol_type or "", "members": len(self.members)}
