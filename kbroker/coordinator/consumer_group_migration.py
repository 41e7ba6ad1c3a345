"""Online migration between the group types: a classic group with members becomes a
KIP-848 consumer group (upgrade), a consumer group left with only classic members
becomes a classic group (downgrade), as `group.consumer.migration.policy` allows.

Learned from Apache Kafka's GroupMetadataManager (validateOnlineUpgrade,
convertToConsumerGroup, validateOnlineDowngradeWithFencedMember,
convertToClassicGroup), ConsumerGroup.fromClassicGroup and
ClassicGroup.fromConsumerGroup (read, not copied).

The policy (Kafka's ConsumerGroupMigrationPolicy; Kafka 4.0's default is
`bidirectional`): `disabled`, `upgrade`, `downgrade`, `bidirectional`. It governs
only the conversion of groups with members; an Empty group of either type simply
becomes the other type at its first member, whatever the policy (its offsets stay).

- Upgrade, at the first ConsumerGroupHeartbeat to a classic group with members: the
  policy allows it, the group's protocol type is `consumer` (Kafka's
  usesConsumerGroupProtocol) and it has no more members than
  group.consumer.max.size. Every classic member becomes a classic member of the new
  consumer group at member epoch = group epoch = assignment epoch = the classic
  generation, Stable, its target and current assignment the one its last SyncGroup
  gave it, its subscription read from its protocol metadata. Members waiting in
  JoinGroup or SyncGroup get REBALANCE_IN_PROGRESS and rejoin the consumer group
  (consumer_group_classic.py). Written: a tombstone for the classic GroupMetadata,
  then the consumer group's records (members, epoch, targets, target epoch, current
  assignments). A subscription or assignment that does not read leaves the group
  classic (the heartbeat answers GROUP_ID_NOT_FOUND).
- Downgrade, when a member is fenced or leaves (by heartbeat, LeaveGroup or a timeout)
  and every other member uses the classic protocol: the policy allows it, there is another member, and no more of
  them than group.max.size. The classic group has generation = the group epoch, protocol
  type `consumer`, the protocol all members share, each member's assignment its target
  (serialized at the version of its subscription), and starts a rebalance at once, so
  the members rejoin as classic ones. Written: the consumer group's tombstones, then
  the classic GroupMetadata.

The group's committed offsets stay where they are: GroupMetadata.offsets, which both
types share.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator import consumer_group_records as cr
from kbroker.coordinator import consumer_protocol as cp
from kbroker.coordinator import group_records as gr
from kbroker.coordinator.consumer_group import ConsumerGroup
from kbroker.coordinator.consumer_group_classic import PROTOCOL_TYPE, topic_ids, topic_names
from kbroker.coordinator.consumer_group_coordinator import Records, TopicLookup, group_tombstones
from kbroker.coordinator.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from kbroker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from kbroker.coordinator.group_metadata_manager import group_record

if TYPE_CHECKING:
    from kbroker.coordinator.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)
E = ErrorCode


class MigrationPolicy(Enum):
    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class GroupMigration:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.policy = MigrationPolicy(coordinator.config.consumer.migration_policy.lower())

    # -- classic -> consumer
    def upgrade(self, group_id: str, topics: TopicLookup, records: Records,
                on_written: list[Callable[[], None]]) -> ConsumerGroup | None:
        """Part of the heartbeat that converts the group: the consumer group is in place and
        its records are in `records` (the heartbeat reverts both if its write fails); the
        classic group is emptied once they are written."""
        coord = self.coordinator
        classic = coord.groups[group_id]
        why = self._why_not_upgrade(classic)
        if why is not None:
            log.info("group %s: not upgraded to a consumer group: %s", group_id, why)
            return None
        try:
            group = from_classic_group(classic, topics)
        except (ValueError, KeyError) as e:
            log.warning("group %s: not upgraded, its embedded consumer protocol does not read: %s", group_id, e)
            return None
        coord.consumer.refresh_subscribed(group, topics)
        records.append((gr.encode_group_key(gr.GroupMetadataKey(group_id)), None))
        records += consumer_group_records(group)
        coord.consumer.groups[group_id] = group
        for member in group.members.values():
            coord.consumer.schedule_timers(group, member)

        def upgraded() -> None:
            _empty(coord, classic, JoinResult(E.REBALANCE_IN_PROGRESS, ""), SyncResult(E.REBALANCE_IN_PROGRESS))
            log.info("group %s: upgraded from classic to consumer group at epoch %d with %d members", group_id,
                     group.group_epoch, len(group.members))

        on_written.append(upgraded)
        return group

    def _why_not_upgrade(self, classic: GroupMetadata) -> str | None:
        if not self.policy.upgrade_enabled:
            return f"group.consumer.migration.policy is {self.policy.value}"
        if classic.protocol_type != PROTOCOL_TYPE:
            return f"its protocol type is {classic.protocol_type!r}, not {PROTOCOL_TYPE!r}"
        if len(classic.members) > self.coordinator.config.consumer.max_size:
            return "it has more members than group.consumer.max.size"
        return None

    # -- consumer -> classic
    def downgrade(self, group: ConsumerGroup, leaving: ConsumerGroupMember) -> int | None:
        """Kafka's validateOnlineDowngradeWithFencedMember and convertToClassicGroup, in one
        write of their own: None when the group stays a consumer group, else the write's
        error (NONE: the group is a classic one now, the leaving member gone with it)."""
        coord = self.coordinator
        others = [m for m in group.members.values() if m.member_id != leaving.member_id]
        if not others or any(m.classic is None for m in others):
            return None
        if not self.policy.downgrade_enabled:
            log.info("group %s: not downgraded to a classic group: group.consumer.migration.policy is %s",
                     group.group_id, self.policy.value)
            return None
        if len(others) > coord.config.group_max_size:
            log.info("group %s: not downgraded: more members than group.max.size", group.group_id)
            return None
        topics = coord.topics
        classic = GroupMetadata(group.group_id, coord.now())
        for m in others:
            assert m.classic is not None
            classic.add(MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.classic.session_timeout_ms, PROTOCOL_TYPE,
                                       list(m.classic.protocols)))
        classic.protocol_type = PROTOCOL_TYPE
        classic.generation_id = group.group_epoch
        classic.protocol_name = classic.select_protocol()
        for member in classic.members.values():
            version = cp.version_of(member.metadata(classic.protocol_name))
            member.assignment = cp.encode_assignment(topic_names(group.target.get(member.member_id, {}), topics),
                                                     version)
        classic.transition(GroupState.STABLE, coord.now())
        code = coord.consumer.append(group.group_id, group_tombstones(group) + [group_record(classic)])
        if code != E.NONE:
            return code
        coord.consumer.drop(group.group_id, forget=True)  # its tombstones are written
        old = coord.groups.get(group.group_id)
        if old is not None:  # the Empty classic group of the offsets: they stay the group's
            _empty(coord, old, None, None)
            classic.offsets, classic.pending_txn_offsets = old.offsets, old.pending_txn_offsets
        coord.groups[group.group_id] = classic
        for member in classic.members.values():
            coord.schedule_heartbeat(classic, member, member.session_timeout_ms)
        log.info("group %s: downgraded from consumer to classic group at generation %d with %d members",
                 group.group_id, classic.generation_id, len(classic.members))
        coord.rebalance(classic, f"downgrade of group {group.group_id} from consumer to classic")
        return E.NONE


def from_classic_group(classic: GroupMetadata, topics: TopicLookup) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup; ValueError when a member's subscription or
    assignment does not read."""
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation_id
    group.group_epoch = group.assignment_epoch = epoch
    for m in classic.members.values():
        metadata = m.metadata(classic.protocol_name) if classic.protocol_name else m.protocols[0][1]
        sub = cp.decode_subscription(metadata)
        assigned = topic_ids(cp.decode_assignment(m.assignment), topics)
        member = ConsumerGroupMember(
            m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            tuple(sorted(set(sub.topics))), member_epoch=epoch, previous_member_epoch=epoch,
            state=MemberState.STABLE, assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)))
        group.target[m.member_id] = assigned
        group.put_member(member)
    return group


def consumer_group_records(group: ConsumerGroup) -> Records:
    """Kafka's ConsumerGroup.createConsumerGroupRecords: what a converted group writes."""
    gid = group.group_id
    members = list(group.members.values())
    records: Records = [(cr.encode_key(cr.RecordKey(cr.MEMBER_METADATA, gid, m.member_id)), cr.encode_member(m))
                        for m in members]
    records.append((cr.encode_key(cr.RecordKey(cr.GROUP_METADATA, gid)),
                    cr.encode_epoch(group.group_epoch, group.metadata_hash)))
    records += [(cr.encode_key(cr.RecordKey(cr.TARGET_MEMBER, gid, m.member_id)),
                 cr.encode_target(group.target.get(m.member_id, {}))) for m in members]
    records.append((cr.encode_key(cr.RecordKey(cr.TARGET_METADATA, gid)),
                    cr.encode_assignment_epoch(group.assignment_epoch)))
    records += [(cr.encode_key(cr.RecordKey(cr.CURRENT_ASSIGNMENT, gid, m.member_id)), cr.encode_current(m))
                for m in members]
    return records


def _empty(coord: GroupCoordinator, classic: GroupMetadata, join: JoinResult | None,
           sync: SyncResult | None) -> None:
    """The classic group without its members (its offsets stay): timers stopped, parked
    JoinGroup and SyncGroup answered."""
    for member in list(classic.members.values()):
        coord.cancel_heartbeat(member)
        if member.await_join is not None and join is not None:
            cb, member.await_join = member.await_join, None
            cb(JoinResult(join.error_code, member.member_id))
        if member.await_sync is not None and sync is not None:
            scb, member.await_sync = member.await_sync, None
            scb(sync)
        classic.remove(member.member_id)
    for timer in classic.pending_members.values():
        if timer is not None:
            timer.cancel()
    classic.pending_members.clear()
    if classic.join_timer is not None:
        classic.join_timer.cancel()
        classic.join_timer = None
    classic.protocol_name = classic.protocol_type = classic.leader_id = None
    classic.transition(GroupState.EMPTY, coord.now())
