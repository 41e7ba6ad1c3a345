"""ConsumerGroupCoordinator: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
ConsumerGroupDescribe, the offset checks of consumer-protocol members).

Learned from Apache Kafka's GroupMetadataManager.consumerGroupHeartbeat (read, not
copied). A heartbeat:

1. is checked as Kafka checks it (INVALID_REQUEST for a malformed first heartbeat,
   UNSUPPORTED_ASSIGNOR, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
   UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND for a classic
   group with members that may not be upgraded: consumer_group_migration.py);
2. updates the member's subscription; a changed subscription, a new or departed
   member, or a change of the subscribed topics (created, deleted, more partitions:
   compared at every heartbeat against the broker's topics) bumps the group epoch;
3. computes a new target assignment with the group's assignor when the group epoch
   is ahead of the assignment epoch (target_assignment: the assignors package);
4. reconciles the member towards its target (current_assignment_builder) and answers
   its epoch, the heartbeat interval and, when it changed, its assignment.

A member silent for `group.consumer.session.timeout.ms` is fenced (removed, the group
epoch bumped, its partitions free for the others); one that does not revoke within
its rebalance timeout is fenced too. Timers run on the classic coordinator's
`Timers`, so tests drive them with a MockTime.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator import consumer_group_records as cr
from kbroker.coordinator.assignors import ASSIGNORS
from kbroker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    TopicMetadata,
    metadata_hash,
)
from kbroker.coordinator.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from kbroker.coordinator.consumer_group_snapshot import GroupSnapshot, operation_error
from kbroker.coordinator.current_assignment_builder import reconcile
from kbroker.coordinator.timers import Timers

log = logging.getLogger(__name__)
E = ErrorCode
FENCE_RETRY_BACKOFF_MS = 500  # a timer's write that failed runs again (Kafka's CoordinatorTimer retry)


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy


class TopicInfoLike(Protocol):
    topic_id: uuid.UUID
    partitions: int


class TopicLookup(Protocol):
    def get(self, name: str) -> TopicInfoLike | None: ...

    def names(self) -> list[str]: ...


class _NoTopics:
    """A TopicLookup with no topics (a coordinator built without the broker's)."""

    def get(self, name: str) -> TopicInfoLike | None:
        return None

    def names(self) -> list[str]:
        return []


NO_TOPICS: TopicLookup = _NoTopics()


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1  # v1 (KIP-1082): the client generates its member id


@dataclass
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = field(default=None)


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


Records = list[tuple[bytes, "bytes | None"]]
# (group id, the broker's topics, the operation's records, what follows once they are written)
Upgrade = Callable[[str, "TopicLookup", Records, list[Callable[[], None]]], "ConsumerGroup | None"]


class ConsumerGroupCoordinator:
    def __init__(self, config: ConsumerGroupConfig, timers: Timers,
                 classic_group_active: Callable[[str], bool],
                 write: Callable[[str, Records], object] = lambda group_id, records: None) -> None:
        """`write(group_id, records)` appends to the group's __consumer_offsets partition, in
        one batch; it raises if it fails (the answer is then operation_error's)."""
        self.config = config
        self.timers = timers
        self.classic_group_active = classic_group_active
        self.write = write
        self.groups: dict[str, ConsumerGroup] = {}
        # online migration (consumer_group_migration.py, set by the group coordinator): a
        # classic group with members becomes a consumer group at a member's first heartbeat
        # (its records added to the heartbeat's, the classic group emptied once they are
        # written; None: refused), and a consumer group whose last consumer-protocol member
        # goes becomes a classic one (None: not converted; else the conversion's write error)
        self.upgrade: Upgrade = lambda group_id, topics, records, on_written: None
        self.downgrade: Callable[[ConsumerGroup, ConsumerGroupMember], int | None] = lambda group, member: None

    # -- ConsumerGroupHeartbeat
    def heartbeat(self, req: HeartbeatRequest, topics: TopicLookup) -> HeartbeatResult:
        """One operation, as Kafka's coordinator runtime runs it: the group changes while its
        records are built, the records are appended in one batch, and if the append fails
        the group is put back as it was (GroupSnapshot) and the answer is the write's error."""
        snapshot = GroupSnapshot(self.groups, req.group_id, self.timers)
        records: Records = []
        on_written: list[Callable[[], None]] = []  # what follows once the records are in (an upgrade)
        try:
            _validate(req, self.config.assignors)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(req, records)
            else:
                result = self._heartbeat(req, topics, records, on_written)
        except HeartbeatError as e:
            snapshot.revert()
            return HeartbeatResult(e.code, e.message)
        code = self.append_or_revert(snapshot, req.group_id, records)
        if code != E.NONE:
            return HeartbeatResult(code, "The group's records could not be written.")
        for action in on_written:
            action()
        return result

    def _heartbeat(self, req: HeartbeatRequest, topics: TopicLookup, records: Records,
                   on_written: list[Callable[[], None]]) -> HeartbeatResult:
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(req.group_id, joining, topics, records, on_written)
        member = self._member(group, req, records)
        updated = member.replace(
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0
                                  else member.rebalance_timeout_ms),
            subscribed_topic_names=(tuple(sorted(req.subscribed_topic_names))
                                    if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex if req.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            client_id=req.client_id, client_host=req.client_host)
        reconciled = self.reconcile_member(group, member, updated, req.owned, topics, joining, records)
        self.schedule_timers(group, reconciled)
        send = (joining or reconciled.assigned != member.assigned
                or (req.owned is not None and req.owned != reconciled.assigned))
        return HeartbeatResult(E.NONE, None, reconciled.member_id, reconciled.member_epoch,
                               self.config.heartbeat_interval_ms,
                               reconciled.assigned if send else None)

    def reconcile_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                         owned: Assignment | None, topics: TopicLookup, joining: bool,
                         records: Records) -> ConsumerGroupMember:
        """Steps 2-4 of a heartbeat (or of a classic member's JoinGroup): store the updated
        member, bump the group epoch if its subscription or the subscribed topics changed,
        compute the target if the group epoch is ahead, reconcile the member. Returns the
        member as it is now; the records to write are added to `records`."""
        gid, mid = group.group_id, updated.member_id
        bump = mid not in group.members or updated.subscription_key() != member.subscription_key()
        if bump or (updated.client_id, updated.client_host, updated.classic) != (
                member.client_id, member.client_host, member.classic):
            records.append((cr.encode_key(cr.RecordKey(cr.MEMBER_METADATA, gid, mid)), cr.encode_member(updated)))
        group.put_member(updated)
        if self.refresh_subscribed(group, topics) or bump:
            group.group_epoch += 1
            records.append(_epoch_record(group))
            log.info("group %s: epoch %d (member %s)", gid, group.group_epoch, mid)
        if group.group_epoch > group.assignment_epoch:
            records += self._compute_target(group)
        reconciled = reconcile(updated, group.assignment_epoch, group.target.get(mid, {}), owned, group.holder)
        if _assignment_key(reconciled) != _assignment_key(member) or joining:
            records.append((cr.encode_key(cr.RecordKey(cr.CURRENT_ASSIGNMENT, gid, mid)),
                            cr.encode_current(reconciled)))
        group.put_member(reconciled)
        return reconciled

    def append(self, group_id: str, records: Records) -> int:
        """Append the records in one batch; the write's error as a client gets it."""
        try:
            self.write(group_id, records)
        except Exception as e:
            log.error("group %s: writing its records failed: %s", group_id, e)
            return operation_error(e)
        return E.NONE

    def append_or_revert(self, snapshot: GroupSnapshot, group_id: str, records: Records) -> int:
        """The end of an operation: its records appended, or the group put back as it was."""
        code = self.append(group_id, records) if records else E.NONE
        if code != E.NONE:
            snapshot.revert()
        return code

    def _group(self, group_id: str, create: bool, topics: TopicLookup, records: Records,
               on_written: list[Callable[[], None]]) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None and not group.dead:
            return group
        if self.classic_group_active(group_id):
            upgraded = self.upgrade(group_id, topics, records, on_written) if create else None
            if upgraded is None:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            return upgraded
        if not create:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member of that id.")
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def _member(self, group: ConsumerGroup, req: HeartbeatRequest, records: Records) -> ConsumerGroupMember:
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            existing = group.members.get(req.member_id) if req.member_id else None
            if existing is not None:  # a member rejoining with epoch 0 starts over
                return existing.replace(member_epoch=0, previous_member_epoch=-1,
                                        state=MemberState.STABLE, assigned={}, revoking={})
            if req.instance_id is not None:
                old = group.static_member(req.instance_id)
                if old is not None:
                    if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise HeartbeatError(E.UNRELEASED_INSTANCE_ID,
                                             f"Static member {req.instance_id} is still in the group.")
                    return self.replace_static(group, old, req.member_id or new_member_id(), records)
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                     f"The group has reached its maximum size ({self.config.max_size}).")
            return ConsumerGroupMember(req.member_id or new_member_id(), req.instance_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not in group {group.group_id}.")
        if req.instance_id is not None and member.instance_id != req.instance_id:
            raise HeartbeatError(E.FENCED_INSTANCE_ID, "The instance id does not match the member's.")
        _check_epoch(member, req.member_epoch, req.owned)
        return member

    def replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember,
                       new_id: str, records: Records) -> ConsumerGroupMember:
        """A static member back under a new member id takes over the old one's epoch and
        assignment, with no new group epoch (Kafka's static member replacement)."""
        self._cancel_timers(old)
        target = group.target.get(old.member_id)
        group.remove_member(old.member_id)
        records += _tombstones(group.group_id, old.member_id)
        new = old.replace(member_id=new_id, member_epoch=old.previous_member_epoch
                          if old.previous_member_epoch > 0 else group.assignment_epoch,
                          previous_member_epoch=-1, session_timer=None, rebalance_timer=None)
        gid = group.group_id
        records.append((cr.encode_key(cr.RecordKey(cr.MEMBER_METADATA, gid, new_id)), cr.encode_member(new)))
        if target is not None:
            group.target[new_id] = target
            records.append((cr.encode_key(cr.RecordKey(cr.TARGET_MEMBER, gid, new_id)), cr.encode_target(target)))
        group.put_member(new)
        log.info("group %s: static member %s is now %s", group.group_id, old.instance_id, new_id)
        return new

    def refresh_subscribed(self, group: ConsumerGroup, topics: TopicLookup) -> bool:
        names = set(group.subscribed_topic_names())
        for regex in {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}:
            pattern = re.compile(regex)
            names.update(n for n in topics.names() if pattern.fullmatch(n) and not n.startswith("__"))
        now: TopicMetadata = {}
        for name in names:
            info = topics.get(name)
            if info is not None:
                now[name] = (info.topic_id, info.partitions)
        if now == group.subscribed:
            return False
        loaded, group.subscribed = group.subscribed is None, now
        before, group.metadata_hash = group.metadata_hash, metadata_hash(now)
        # after a load only the stored hash tells whether a topic changed meanwhile (KIP-1101)
        return not loaded or group.metadata_hash != before

    def _compute_target(self, group: ConsumerGroup) -> Records:
        assignor = ASSIGNORS[group.assignor_name(self.config.assignors[0])]
        subscribed = group.subscribed or {}
        ids = {name: tid for name, (tid, _n) in subscribed.items()}
        counts = {tid: n for tid, n in subscribed.values()}
        subscriptions = {}
        for m in group.members.values():
            wanted = set(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                pattern = re.compile(m.subscribed_topic_regex)
                wanted.update(n for n in ids if pattern.fullmatch(n))
            subscriptions[m.member_id] = frozenset(ids[n] for n in wanted if n in ids)
        before, group.target = group.target, assignor(subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment of epoch %d computed", group.group_id, group.assignment_epoch)
        gid = group.group_id
        records: Records = [(cr.encode_key(cr.RecordKey(cr.TARGET_MEMBER, gid, m)), cr.encode_target(a))
                            for m, a in group.target.items() if before.get(m) != a]
        records.append((cr.encode_key(cr.RecordKey(cr.TARGET_METADATA, gid)), cr.encode_assignment_epoch(group.assignment_epoch)))
        return records

    # -- leaving, fencing
    def _leave(self, req: HeartbeatRequest, records: Records) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Group {req.group_id} has no members.")
        member = group.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not in the group.")
        if req.instance_id is not None and member.member_id != req.member_id:
            raise HeartbeatError(E.FENCED_INSTANCE_ID, "The instance id belongs to another member.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
            left = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                  previous_member_epoch=member.member_epoch, rebalance_timer=None)
            group.put_member(left)
            records.append((cr.encode_key(cr.RecordKey(cr.CURRENT_ASSIGNMENT, group.group_id, left.member_id)),
                            cr.encode_current(left)))
            log.info("group %s: static member %s leaves for now", group.group_id, member.instance_id)
        else:
            code = self.fence(group, member, "left the group", records)
            if code != E.NONE:  # the group's conversion to a classic group could not be written
                raise HeartbeatError(code, "The group's records could not be written.")
        return HeartbeatResult(E.NONE, None, member.member_id, req.member_epoch)

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str,
              records: Records | None = None) -> int:
        """Remove the member and bump the group epoch: its partitions go to the others. With
        `records`, part of a heartbeat (which writes them); alone, written here, and on a
        failed write the group stays as it was. Returns the write's error. When the others
        all use the classic protocol the group may become a classic group instead (Kafka's
        consumerGroupFenceMember), in a write of its own."""
        if member.member_id not in group.members:
            return E.NONE
        converted = self.downgrade(group, member)
        if converted is not None:
            if converted == E.NONE:
                log.info("group %s: member %s removed (%s); the group is a classic group now",
                         group.group_id, member.member_id, reason)
            return converted
        alone = records is None
        snapshot = GroupSnapshot(self.groups, group.group_id, self.timers) if alone else None
        out: Records = [] if records is None else records
        self._cancel_timers(member)
        group.remove_member(member.member_id)
        group.group_epoch += 1
        out += _tombstones(group.group_id, member.member_id) + [_epoch_record(group)]
        code = self.append(group.group_id, out) if alone else E.NONE
        if code != E.NONE and snapshot is not None:
            snapshot.revert()
            return code
        log.info("group %s: member %s removed (%s), epoch %d", group.group_id, member.member_id, reason,
                 group.group_epoch)
        return E.NONE

    def schedule_timers(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member_id = member.member_id
        member.session_timer = self.timers.schedule(
            member.classic.session_timeout_ms if member.classic is not None else self.config.session_timeout_ms,
            lambda: self.expired(group, member_id, "session timeout"))
        if member.classic is not None:
            return  # its join and sync timeouts: consumer_group_classic.py
        revoking = member.state == MemberState.UNREVOKED_PARTITIONS
        if revoking and member.rebalance_timer is None:
            member.rebalance_timer = self.timers.schedule(
                member.rebalance_timeout_ms,
                lambda: self.expired(group, member_id, "did not revoke within its rebalance timeout"))
        elif not revoking and member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    def _cancel_timers(self, member: ConsumerGroupMember) -> None:
        for timer in (member.session_timer, member.rebalance_timer):
            if timer is not None:
                timer.cancel()
        member.session_timer = member.rebalance_timer = None

    def expired(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        member = group.members.get(member_id)
        if member is not None and self.groups.get(group.group_id) is group:
            member.session_timer = member.rebalance_timer = None
            if self.fence(group, member, reason) != E.NONE:  # retried, as Kafka's timers retry
                member.session_timer = self.timers.schedule(
                    FENCE_RETRY_BACKOFF_MS, lambda: self.expired(group, member_id, reason))

    # -- offsets
    def check_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int) -> int | None:
        """OffsetCommit by a consumer group's member (Kafka's validateOffsetCommit); None: not a
        consumer group (the classic checks apply)."""
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return None
        if member_epoch < 0 and not member_id and not group.members:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member commits with its generation: the epoch
            return E.ILLEGAL_GENERATION if member_epoch != member.member_epoch else E.NONE
        if api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch > member.member_epoch:
            return E.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9 with a member (Kafka's validateOffsetFetch)."""
        group = self.groups.get(group_id)
        if member_epoch < 0 and not member_id or group is None or group.dead:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return E.NONE
        return E.ILLEGAL_GENERATION if member.classic is not None else E.STALE_MEMBER_EPOCH

    def is_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.dead and bool(group.members)

    def drop(self, group_id: str, forget: bool = False) -> int:
        """The group is deleted, or becomes a classic group (tombstones for its records, written
        first: on a failed write the group stays and the error is returned); with `forget`,
        another broker coordinates it now (nothing written)."""
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE
        if not forget:
            code = self.append(group_id, group_tombstones(group))
            if code != E.NONE:
                return code  # the group stays, as nothing of its end was written
        del self.groups[group_id]
        group.dead = True
        for member in group.members.values():
            self._cancel_timers(member)
        return E.NONE

    # -- loading (__consumer_offsets replayed, later records winning)
    def replay(self, key: bytes, value: bytes | None) -> None:
        k = cr.decode_key(key)
        group = self.groups.get(k.group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[k.group_id] = ConsumerGroup(k.group_id)
            group.subscribed = None
        if k.record_type == cr.GROUP_METADATA:
            if value is None:
                del self.groups[k.group_id]
            else:
                group.group_epoch, group.metadata_hash = cr.decode_epoch(value)
        elif k.record_type == cr.TARGET_METADATA and value is not None:
            group.assignment_epoch = cr.decode_assignment_epoch(value)
        elif k.record_type == cr.TARGET_MEMBER and k.member_id is not None:
            if value is None:
                group.target.pop(k.member_id, None)
            else:
                group.target[k.member_id] = cr.decode_target(value)
        elif k.record_type == cr.MEMBER_METADATA and k.member_id is not None:
            self._replay_member(group, k.member_id, value)
        elif k.record_type == cr.CURRENT_ASSIGNMENT and k.member_id is not None and value is not None:
            current = group.members.get(k.member_id) or ConsumerGroupMember(k.member_id)
            group.put_member(cr.decode_current(current, value))

    def _replay_member(self, group: ConsumerGroup, member_id: str, value: bytes | None) -> None:
        if value is None:
            group.remove_member(member_id)
            return
        loaded = cr.decode_member(member_id, value)
        current = group.members.get(member_id)
        if current is not None:
            loaded = loaded.replace(member_epoch=current.member_epoch,
                                    previous_member_epoch=current.previous_member_epoch,
                                    state=current.state, assigned=current.assigned, revoking=current.revoking)
        group.put_member(loaded)

    def after_load(self, group_ids: set[str] | None = None) -> None:
        """Start the session timers of the loaded groups' members, as Kafka does on load."""
        for group in self.groups.values():
            if group_ids is not None and group.group_id not in group_ids:
                continue
            for member in group.members.values():
                self.schedule_timers(group, member)

    def state_of(self, group_id: str) -> ConsumerGroupState | None:
        group = self.groups.get(group_id)
        return None if group is None else group.state


def _validate(req: HeartbeatRequest, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (v0, v1)."""
    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(E.INVALID_REQUEST, message)

    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if req.api_version >= 1 and not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid(f"MemberEpoch {epoch} is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(assignors)}.")
    if req.subscribed_topic_regex is not None:
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as e:
            raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                                 f"regular expression: {e}.") from None


def _check_epoch(member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfMemberEpochIsInvalid: an epoch ahead is fenced; one behind only when it
    is the previous epoch and the member still owns no more than it is assigned."""
    if received > member.member_epoch:
        raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member "
                             f"epoch ({received}) than the one known by the group coordinator "
                             f"({member.member_epoch}).")
    if received < member.member_epoch:
        if received != member.previous_member_epoch or owned is None or not _subset(owned, member.assigned):
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member "
                                 f"epoch ({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}).")


def _epoch_record(group: ConsumerGroup) -> tuple[bytes, bytes | None]:
    return (cr.encode_key(cr.RecordKey(cr.GROUP_METADATA, group.group_id)),
            cr.encode_epoch(group.group_epoch, group.metadata_hash))


def _tombstones(group_id: str, member_id: str) -> Records:
    """A departed member's records, as Kafka writes them when it fences one."""
    return [(cr.encode_key(cr.RecordKey(kind, group_id, member_id)), None)
            for kind in (cr.CURRENT_ASSIGNMENT, cr.TARGET_MEMBER, cr.MEMBER_METADATA)]


def group_tombstones(group: ConsumerGroup) -> Records:
    """A group's end, deleted or converted to a classic group: its members' records, then its
    own (Kafka's ConsumerGroup.createGroupTombstoneRecords)."""
    gid = group.group_id
    return [r for m in group.members for r in _tombstones(gid, m)] + [
        (cr.encode_key(cr.RecordKey(kind, gid)), None) for kind in (cr.TARGET_METADATA, cr.GROUP_METADATA)]


def _assignment_key(m: ConsumerGroupMember) -> tuple[object, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.revoking)


def _subset(owned: Assignment, assigned: Assignment) -> bool:
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())
