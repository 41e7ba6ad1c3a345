"""Share groups (KIP-932): membership and assignment by ShareGroupHeartbeat, as Kafka's
GroupMetadataManager.shareGroupHeartbeat (read, not copied).

A share group's members share its partitions: Kafka's SimpleAssignor may give one
partition to several members, since which records each gets is decided per record by
the share partitions (share_partition.py), not by the assignment. Here every member is
assigned every partition of the topics it subscribes to, the simplest assignment that
keeps every partition consumed.

A heartbeat is checked as Kafka checks it (INVALID_REQUEST for a malformed one,
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND for
a group id that a classic or consumer group holds); a new member, a departed one, a
changed subscription or a change of the subscribed topics bumps the group epoch, and
every member then takes the new assignment at once (a share group has nothing to
revoke: no member owns a partition alone), its member epoch the group epoch.

A member silent for `group.share.session.timeout.ms` is fenced; a member leaving or
fenced has its acquired records released (`on_member_removed`, the share partitions'
owner). Membership is kept in memory only: after a restart members heartbeat, get
UNKNOWN_MEMBER_ID and join again, as a client does when its coordinator lost it; a group
with persisted share partition state comes back empty (`restore_group`).

The share partitions of a group that hold state (or may: every partition it was ever
assigned, and those altered) are the group's `initialized` partitions, which the
share-group admin APIs read in a cluster, written to __consumer_offsets as Kafka's
ShareGroupStatePartitionMetadata record (share_group_records.py) whenever they change,
and replayed when the group coordinator loads the partition (`replay`): after a move of
the group coordinator, or a restart, the group is known again, empty, with them.

Lock: the broker's event-loop thread only; timers on the injected Timers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator import share_group_records as sgr
from kbroker.coordinator.consumer_group_coordinator import HeartbeatError, TopicLookup
from kbroker.coordinator.timers import Timer, Timers

log = logging.getLogger(__name__)
E = ErrorCode
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: Assignment = field(default_factory=dict)
    session_timer: Timer | None = None


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    subscribed: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # of the assignment epoch
    # the share partitions that may hold state (Kafka's ShareGroupStatePartitionMetadata
    # initialized topics): every partition ever assigned, and those altered; with the
    # topics' names, as the record has them
    initialized: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState names."""
        return "Stable" if self.members else "Empty"


@dataclass
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class ShareGroupCoordinator:
    def __init__(self, config: ShareGroupConfig, timers: Timers,
                 other_group_active: Callable[[str], bool],
                 write: Callable[[str, list[tuple[bytes, bytes | None]]], object] | None = None) -> None:
        """`write(group_id, records)` appends to the group id's __consumer_offsets
        partition (the group coordinator's store; raises when it cannot)."""
        self.config = config
        self.timers = timers
        self.other_group_active = other_group_active
        self.write = write
        self.groups: dict[str, ShareGroup] = {}
        self.member_removed_listeners: list[Callable[[str, str], None]] = []

    def add_member_removed_listener(self, listener: Callable[[str, str], None]) -> None:
        """`listener(group_id, member_id)` when a member leaves or is fenced."""
        self.member_removed_listeners.append(listener)

    def heartbeat(self, req: ShareHeartbeatRequest, topics: TopicLookup) -> ShareHeartbeatResult:
        try:
            _validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req, topics)
        except HeartbeatError as e:
            return ShareHeartbeatResult(e.code, e.message)

    def _heartbeat(self, req: ShareHeartbeatRequest, topics: TopicLookup) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if self.other_group_active(req.group_id):
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            if req.member_epoch != JOIN_EPOCH:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Group {req.group_id} has no member of that id.")
            group = self.groups[req.group_id] = ShareGroup(req.group_id)
        member = group.members.get(req.member_id)
        bump = False
        if member is None:
            if req.member_epoch != JOIN_EPOCH:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not in group {group.group_id}.")
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                     f"The group has reached its maximum size ({self.config.max_size}).")
            member = group.members[req.member_id] = ShareGroupMember(req.member_id)
            bump = True
            log.info("share group %s: member %s joins", group.group_id, req.member_id)
        elif req.member_epoch != JOIN_EPOCH and req.member_epoch != member.member_epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The share group member has epoch "
                                 f"{req.member_epoch}, the coordinator knows {member.member_epoch}.")
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            bump = bump or names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if self._refresh_subscribed(group, topics) or bump:
            group.group_epoch += 1
        before = dict(member.assignment)
        if group.assignment_epoch < group.group_epoch:
            self._assign(group)
        member.assignment = group.target.get(member.member_id, {})
        member.member_epoch = group.assignment_epoch
        self._schedule_session(group, member)
        send = req.member_epoch == JOIN_EPOCH or member.assignment != before
        return ShareHeartbeatResult(E.NONE, None, member.member_id, member.member_epoch,
                                    self.config.heartbeat_interval_ms, member.assignment if send else None)

    def _refresh_subscribed(self, group: ShareGroup, topics: TopicLookup) -> bool:
        now: dict[str, tuple[uuid.UUID, int]] = {}
        for name in {n for m in group.members.values() for n in m.subscribed_topic_names}:
            info = topics.get(name)
            if info is not None:
                now[name] = (info.topic_id, info.partitions)
        changed, group.subscribed = now != group.subscribed, now
        return changed

    def _assign(self, group: ShareGroup) -> None:
        """The target of the group epoch: every member gets every partition of its
        subscribed topics. Each member takes its own at its next heartbeat, and its epoch
        with it (nothing to revoke first)."""
        group.target = {m.member_id: {group.subscribed[n][0]: frozenset(range(group.subscribed[n][1]))
                                      for n in m.subscribed_topic_names if n in group.subscribed}
                        for m in group.members.values()}
        group.assignment_epoch = group.group_epoch
        before = {t: set(ps) for t, ps in group.initialized.items()}
        for target in group.target.values():
            for topic_id, partitions in target.items():
                group.initialized.setdefault(topic_id, set()).update(partitions)
        group.topic_names.update({topic_id: name for name, (topic_id, _n) in group.subscribed.items()})
        if group.initialized != before:
            self._write_initialized(group)
        log.info("share group %s: assignment of epoch %d", group.group_id, group.group_epoch)

    def _leave(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if group is None or member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not in the group.")
        self.fence(group, member, "left the group")
        return ShareHeartbeatResult(E.NONE, None, member.member_id, LEAVE_EPOCH)

    def fence(self, group: ShareGroup, member: ShareGroupMember, reason: str) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        if group.members.pop(member.member_id, None) is None:
            return
        group.group_epoch += 1
        log.info("share group %s: member %s removed (%s), epoch %d", group.group_id, member.member_id,
                 reason, group.group_epoch)
        for listener in self.member_removed_listeners:
            listener(group.group_id, member.member_id)

    def _schedule_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id

        def expired() -> None:
            current = group.members.get(member_id)
            if current is not None and self.groups.get(group.group_id) is group:
                current.session_timer = None
                self.fence(group, current, "session timeout")

        member.session_timer = self.timers.schedule(self.config.session_timeout_ms, expired)

    # -- what other parts ask
    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def restore_group(self, group_id: str) -> None:
        """A group known from its persisted share partition state (at startup): empty,
        unless a classic or consumer group holds the id."""
        if group_id not in self.groups and not self.other_group_active(group_id):
            self.groups[group_id] = ShareGroup(group_id)

    def initialized_partitions(self, group_id: str) -> dict[uuid.UUID, set[int]]:
        group = self.groups.get(group_id)
        return {} if group is None else {t: set(ps) for t, ps in group.initialized.items() if ps}

    def mark_initialized(self, group_id: str, topic_id: uuid.UUID, topic_name: str, partition: int) -> None:
        group = self.groups.get(group_id)
        if group is not None and partition not in group.initialized.get(topic_id, set()):
            group.initialized.setdefault(topic_id, set()).add(partition)
            group.topic_names[topic_id] = topic_name
            self._write_initialized(group)

    def mark_deleted(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        group = self.groups.get(group_id)
        if group is not None and partition in group.initialized.get(topic_id, set()):
            group.initialized[topic_id].discard(partition)
            self._write_initialized(group)

    # -- ShareGroupStatePartitionMetadata records (share_group_records.py)
    def _write_initialized(self, group: ShareGroup) -> None:
        """The group's initialized share partitions, to __consumer_offsets (not waited
        for: only the admin APIs after a move of the group coordinator read it)."""
        meta = sgr.StatePartitionMetadata({t: (group.topic_names.get(t, ""), frozenset(ps))
                                           for t, ps in group.initialized.items() if ps})
        self._append(group.group_id, sgr.encode_value(meta, self.timers.time.milliseconds()))

    def _append(self, group_id: str, value: bytes | None) -> None:
        if self.write is None:
            return
        try:
            self.write(group_id, [(sgr.encode_key(group_id), value)])
        except Exception as e:  # noqa: BLE001 - logged: the state itself is at the share coordinators
            log.warning("share group %s: its share partitions not recorded in __consumer_offsets: %s",
                        group_id, e)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A ShareGroupStatePartitionMetadata record, as __consumer_offsets is loaded: the
        group is known again (empty) with its initialized share partitions; a tombstone
        forgets an empty group."""
        group_id = sgr.decode_key(key)
        if value is None:
            group = self.groups.get(group_id)
            if group is not None and not group.members:
                del self.groups[group_id]
            return
        meta = sgr.decode_value(value)
        self.restore_group(group_id)
        group = self.groups.get(group_id)
        if group is not None:
            group.initialized = {t: set(ps) for t, (_name, ps) in meta.initialized.items()}
            group.topic_names = {t: name for t, (name, _ps) in meta.initialized.items()}

    def describe(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._append(group_id, None)  # its ShareGroupStatePartitionMetadata record ends
        return E.NONE

    def on_resigned(self, coordinated_elsewhere: Callable[[str], bool]) -> None:
        """Cluster mode: another broker coordinates these groups now (their
        __consumer_offsets partition moved): forget them, members and timers; what their
        members hold stays with the share-partition leaders, and the members join the
        new coordinator."""
        for group_id in [g for g in self.groups if coordinated_elsewhere(g)]:
            for member in self.groups.pop(group_id).members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()

    def shutdown(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()


def _validate(req: ShareHeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
    if not req.group_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if not req.member_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise HeartbeatError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise HeartbeatError(E.INVALID_REQUEST, f"MemberEpoch is {req.member_epoch}, but must be "
                             "greater than or equal to -1.")
