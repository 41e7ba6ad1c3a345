"""Classic members inside a KIP-848 consumer group: the JoinGroup, SyncGroup, Heartbeat
and LeaveGroup of members that still speak the classic protocol, in a group being
upgraded (or downgraded) member by member (group.consumer.migration.policy,
consumer_group_migration.py).

Learned from Apache Kafka's GroupMetadataManager (read, not copied):
classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup, classicGroupLeaveToConsumerGroup. The broker
assigns, as for every member of a consumer group; a classic member is a follower that
is handed its share:

- JoinGroup: the protocol type must be `consumer` and one of the member's protocols
  one every classic member has (else INCONSISTENT_GROUP_PROTOCOL); a dynamic member
  without id gets MEMBER_ID_REQUIRED and a new id (v4+). Its subscription (topics,
  owned partitions, rack) is read from the embedded metadata
  (coordinator/consumer_protocol.py), the member is reconciled as a heartbeat would
  reconcile it (current_assignment_builder; the owned partitions are the ones its
  subscription names: none for an eager client) and answered at once: generation =
  member epoch, no leader and no member list, the protocol its first one.
- SyncGroup: the generation must be the member epoch (ILLEGAL_GENERATION), type and
  name the member's (INCONSISTENT_GROUP_PROTOCOL); REBALANCE_IN_PROGRESS when the
  group epoch is ahead of the member's (and it is not revoking); else its current
  assignment, a ConsumerProtocolAssignment at the version of its subscription.
- Heartbeat: REBALANCE_IN_PROGRESS tells it to rejoin when the group epoch is ahead of
  its epoch, it has partitions to revoke, or partitions it waits for are free now.
- LeaveGroup: the member goes and the group epoch is bumped, or the group becomes a
  classic group if only classic members remain and the policy allows it.

Timeouts, each fencing the member: its session timeout (the one its JoinGroup gave),
SyncGroup within its rebalance timeout after a join, JoinGroup within its rebalance
timeout after it was told to rejoin (one deadline, `rebalance_timer`).

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator import consumer_protocol as cp
from kbroker.coordinator.consumer_group import ConsumerGroup
from kbroker.coordinator.consumer_group_coordinator import (
    ConsumerGroupCoordinator,
    Records,
    TopicLookup,
    new_member_id,
)
from kbroker.coordinator.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from kbroker.coordinator.consumer_group_snapshot import GroupSnapshot
from kbroker.coordinator.group_metadata import JoinRequest, JoinResult, SyncResult

log = logging.getLogger(__name__)
E = ErrorCode
PROTOCOL_TYPE = "consumer"


class ClassicMemberError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ClassicMembers:
    def __init__(self, consumer: ConsumerGroupCoordinator) -> None:
        self.consumer = consumer

    # -- JoinGroup
    def join(self, group: ConsumerGroup, req: JoinRequest, topics: TopicLookup) -> JoinResult:
        """One operation, as a heartbeat is: the records appended in one batch, the group put
        back as it was if the append fails (GroupSnapshot)."""
        snapshot = GroupSnapshot(self.consumer.groups, group.group_id, self.consumer.timers)
        records: Records = []
        try:
            result = self._join(group, req, topics, records)
        except ClassicMemberError as e:
            snapshot.revert()
            return JoinResult(e.code, req.member_id)
        code = self.consumer.append_or_revert(snapshot, group.group_id, records)
        return result if code == E.NONE else JoinResult(code, req.member_id)

    def _join(self, group: ConsumerGroup, req: JoinRequest, topics: TopicLookup, records: Records) -> JoinResult:
        unknown = not req.member_id
        member_id = new_member_id() if unknown else req.member_id
        if member_id not in group.members and len(group.members) >= self.consumer.config.max_size:
            raise ClassicMemberError(E.GROUP_MAX_SIZE_REACHED)
        if not supports(group, req.protocol_type, req.protocols):
            raise ClassicMemberError(E.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and req.require_known_member_id and req.group_instance_id is None:
            log.info("group %s: a classic member joins; it is to rejoin as %s", group.group_id, member_id)
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id)
        member = self._member(group, member_id, req.group_instance_id, unknown, records)
        try:
            sub = cp.decode_subscription(req.protocols[0][1])
        except ValueError:
            raise ClassicMemberError(E.UNKNOWN_SERVER_ERROR) from None  # as Kafka's IllegalStateException
        joining = member.member_id not in group.members
        updated = member.replace(
            instance_id=req.group_instance_id, rack_id=sub.rack_id or member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(sub.topics))), client_id=req.client_id,
            client_host=req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)))
        reconciled = self.consumer.reconcile_member(
            group, member, updated, topic_ids(sub.owned, topics), topics, joining, records)
        self._restart_session(group, reconciled)
        self._deadline(group, reconciled, "did not send SyncGroup within its rebalance timeout", restart=True)
        log.info("group %s: classic member %s joined at epoch %d (%s)", group.group_id, reconciled.member_id,
                 reconciled.member_epoch, reconciled.state.value)
        assert reconciled.classic is not None
        return JoinResult(E.NONE, reconciled.member_id, reconciled.member_epoch, PROTOCOL_TYPE,
                          reconciled.classic.protocol_name, "", [])

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                unknown: bool, records: Records) -> ConsumerGroupMember:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member."""
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id)
        old = group.static_member(instance_id)
        if old is None:
            return ConsumerGroupMember(member_id, instance_id)
        if unknown:  # the instance is back under a new id: it takes over the old one's place
            return self.consumer.replace_static(group, old, member_id, records)
        if old.member_id != member_id:
            raise ClassicMemberError(E.FENCED_INSTANCE_ID)
        return old

    # -- SyncGroup
    def sync(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None, topics: TopicLookup) -> SyncResult:
        try:
            member = self._classic_member(group, member_id, instance_id, generation_id)
        except ClassicMemberError as e:
            return SyncResult(e.code)
        assert member.classic is not None
        name = member.classic.protocol_name
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._deadline(group, member, "did not rejoin within its rebalance timeout")
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self._cancel_deadline(member)
        self._restart_session(group, member)
        version = cp.version_of(member.classic.protocols[0][1])
        return SyncResult(E.NONE, cp.encode_assignment(topic_names(member.assigned, topics), version),
                          PROTOCOL_TYPE, name)

    # -- Heartbeat
    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> int:
        try:
            member = self._classic_member(group, member_id, instance_id, generation_id)
        except ClassicMemberError as e:
            return e.code
        self._restart_session(group, member)
        if (member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not waiting_on_unreleased(group, member))):
            self._deadline(group, member, "did not rejoin within its rebalance timeout")
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # -- LeaveGroup
    def leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> tuple[str, int]:
        """One member of a LeaveGroup: (its member id, the error). It is fenced as a heartbeat
        would fence it, so the group may become a classic group (Kafka's
        validateOnlineDowngradeWithFencedMember), the LeaveGroup's other members then
        leaving that."""
        try:
            member = self._validate(group, member_id, instance_id, leaving=True)
            if member.classic is None:
                raise ClassicMemberError(E.UNKNOWN_MEMBER_ID)
        except ClassicMemberError as e:
            return member_id, e.code
        log.info("group %s: classic member %s leaves", group.group_id, member.member_id)
        return member.member_id, self.consumer.fence(group, member, "left the group")

    # -- checks and timers
    def _validate(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                  leaving: bool = False) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise ClassicMemberError(E.UNKNOWN_MEMBER_ID)
            return member
        member = group.static_member(instance_id)
        if member is None:
            raise ClassicMemberError(E.UNKNOWN_MEMBER_ID)
        if member.member_id != member_id and not (leaving and not member_id):
            raise ClassicMemberError(E.FENCED_INSTANCE_ID)
        return member

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation_id: int) -> ConsumerGroupMember:
        member = self._validate(group, member_id, instance_id)
        if member.classic is None:
            raise ClassicMemberError(E.UNKNOWN_MEMBER_ID)  # it does not use the classic protocol
        if generation_id != member.member_epoch:
            raise ClassicMemberError(E.ILLEGAL_GENERATION)
        return member

    def _restart_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        assert member.classic is not None
        member_id = member.member_id
        member.session_timer = self.consumer.timers.schedule(
            member.classic.session_timeout_ms, lambda: self.consumer.expired(group, member_id, "session timeout"))

    def _deadline(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str,
                  restart: bool = False) -> None:
        """The join (or sync) deadline: the member's rebalance timeout, unless one runs."""
        if member.rebalance_timer is not None:
            if not restart:
                return
            member.rebalance_timer.cancel()
        member_id = member.member_id
        member.rebalance_timer = self.consumer.timers.schedule(
            member.rebalance_timeout_ms, lambda: self.consumer.expired(group, member_id, reason))

    def _cancel_deadline(self, member: ConsumerGroupMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None


def supports(group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: type `consumer`, and a protocol
    every classic member of the group has."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(n == name for n, _ in c.protocols) for c in classic) for name, _ in protocols)


def waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of the member's target that it does not hold yet is still held
    by another member (Kafka's waitingOnUnreleasedPartition)."""
    for topic, partitions in group.target.get(member.member_id, {}).items():
        held = member.assigned.get(topic, frozenset())
        if any(group.holder(topic, p) not in (None, member.member_id) for p in partitions - held):
            return True
    return False


def topic_ids(by_name: dict[str, frozenset[int]], topics: TopicLookup) -> Assignment:
    """Partitions by topic name -> by topic id; topics the broker does not have are left out."""
    out: Assignment = {}
    for name, partitions in by_name.items():
        info = topics.get(name)
        if info is not None and partitions:
            out[info.topic_id] = frozenset(partitions)
    return out


def topic_names(by_id: Assignment, topics: TopicLookup) -> dict[str, frozenset[int]]:
    names: dict[uuid.UUID, str] = {}
    for name in topics.names():
        info = topics.get(name)
        if info is not None:
            names[info.topic_id] = name
    return {names[t]: ps for t, ps in by_id.items() if t in names and ps}

