"""ConsumerGroup: a KIP-848 consumer group's members, epochs and target assignment.

Learned from Apache Kafka's group-coordinator ConsumerGroup (read, not copied). The
group epoch grows whenever what the assignment depends on changes (a member joins,
leaves, changes its subscription or assignor; a subscribed topic is created, deleted
or grows); the target assignment is computed for a group epoch and carries it as the
assignment epoch; members reconcile to it one by one (current_assignment_builder).

State (ConsumerGroupDescribe/ListGroups names): Empty (no members), Assigning (the
target is older than the group epoch), Reconciling (some member is not yet at the
assignment epoch, or is withholding/revoking), Stable.

Owns: members by id, static members by instance id, the target assignment by member
id, which member holds each partition (`holders`: assigned or still revoking), and the
topics the subscriptions resolved to when the target was computed (`subscribed`:
name -> (topic id, partition count)) and their hash (`metadata_hash`, KIP-1101: stored
with the group epoch, so a load can tell whether a subscribed topic changed meanwhile). A group's committed offsets are not here: they
stay with its GroupMetadata (group_metadata.py), which both group types share.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from enum import Enum

from kbroker.coordinator.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)

TopicMetadata = dict[str, tuple[uuid.UUID, int]]


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.holders: dict[tuple[uuid.UUID, int], str] = {}
        # None: loaded from __consumer_offsets, taken from the topics at the next heartbeat
        self.subscribed: TopicMetadata | None = {}
        self.metadata_hash = 0  # of `subscribed` (metadata_hash()); 0: none known
        self.dead = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def holder(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.holders.get((topic_id, partition))

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member (by member id), keeping `holders` and the static map."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        for tp in member.owned_partitions():
            self.holders[tp] = member.member_id
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
            self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            if self.holders.get(tp) == member.member_id:
                del self.holders[tp]

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def assignor_name(self, default: str) -> str:
        """The assignor the members named most (ties: by name), else `default`."""
        named: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                named[m.server_assignor] = named.get(m.server_assignor, 0) + 1
        if not named:
            return default
        return min(named, key=lambda n: (-named[n], n))


def metadata_hash(topics: TopicMetadata) -> int:
    """The group's metadata hash (Kafka 4.1's ConsumerGroupMetadataValue.MetadataHash,
    KIP-1101): over each subscribed topic, by name, its id, name and partition count (what
    the assignment depends on; rack-aware assignment is not implemented, so racks are
    not in it). An int64; 0 for no topics. The inputs are Kafka's, the function is not
    (BLAKE2b-64 here, XXH3 in Kafka): a hash another broker wrote just differs once,
    which costs one new target assignment, never a wrong one."""
    if not topics:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(topics):
        topic_id, partitions = topics[name]
        encoded = name.encode()
        h.update(struct.pack(">b16sH", 0, topic_id.bytes, len(encoded)) + encoded + struct.pack(">i", partitions))
    return int.from_bytes(h.digest(), "big", signed=True)
