"""GroupCoordinator: the classic consumer group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), offsets, and the group admin operations.

Learned from Apache Kafka's classic GroupCoordinator (read, not copied). The broker
never assigns partitions: the member elected leader gets every member's protocol
metadata in its JoinGroup response and returns the assignments in SyncGroup; the
coordinator picks the protocol all members support and passes the bytes through.

Rebalances are fast: a join completes as soon as every known member has rejoined
and no member id handed out with MEMBER_ID_REQUIRED is still outstanding (the
rebalance timeout only bounds the wait for members that do not come back).
`group.initial.rebalance.delay.ms` delays the first rebalance of an Empty group,
extended while new members keep arriving, as Kafka's InitialDelayedJoin.

JoinGroup and SyncGroup complete through callbacks (the API handlers turn them
into futures); everything else returns at once. Timeouts run on `Timers`, so tests
drive them with a MockTime.

Lock: the broker's event-loop thread only. Invariants: see GroupMetadata; a
member awaiting join or sync is never expired by its session timer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator import consumer_group_coordinator as cgc
from kbroker.coordinator.consumer_group import ConsumerGroup
from kbroker.coordinator.consumer_group_classic import ClassicMembers
from kbroker.coordinator.consumer_group_migration import GroupMigration
from kbroker.coordinator.group_coordinator_config import CoordinatorConfig
from kbroker.coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinRequest,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncCallback,
    SyncResult,
)
from kbroker.coordinator.group_metadata_manager import GroupMetadataManager, GroupStore, store_error
from kbroker.coordinator.timers import Timers
from kbroker.utils.time import Time

log = logging.getLogger(__name__)

E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
UNKNOWN_MEMBER_ID = ""
PREPARING, COMPLETING, STABLE, EMPTY, DEAD = (
    GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
    GroupState.EMPTY, GroupState.DEAD)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, time: Time, store: GroupStore,
                 timers: Timers | None = None, *, clustered: bool = False,
                 topics: cgc.TopicLookup | None = None) -> None:
        self.config = config
        self.time = time
        self.timers = timers or Timers(time)
        self.store = store
        # KIP-848 consumer groups; their offsets stay in `groups` (one store for both types)
        self.consumer = cgc.ConsumerGroupCoordinator(config.consumer, self.timers, self._classic_active,
                                                     store.append)
        self.manager = GroupMetadataManager(store, config.offsets_retention_ms,
                                            self.consumer.is_active, self.consumer.replay)
        self.loading = False  # the start-up load (every partition)
        self.loading_partitions: set[int] = set()  # cluster mode: being loaded on election
        self.completed_rebalances = 0  # group-completed-rebalance-count (/metrics)
        # Cluster mode: the __consumer_offsets partitions this broker leads, whose groups it
        # coordinates (None: every group, a single broker).
        self.owned_partitions: set[int] | None = set() if clustered else None
        # the broker's topics: classic members of consumer groups name them, KIP-848 ids them
        self.topics: cgc.TopicLookup = topics if topics is not None else cgc.NO_TOPICS
        # classic members inside consumer groups, and the conversions between the types
        self.classic_in_consumer = ClassicMembers(self.consumer)
        self.migration = GroupMigration(self)
        self.consumer.upgrade = self.migration.upgrade
        self.consumer.downgrade = self.migration.downgrade

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The KIP-848 consumer group of that id: classic requests of its members go to it."""
        group = self.consumer.groups.get(group_id)
        return None if group is None or group.dead else group

    def add_record_replay(self, record_type: int, replay: Callable[[bytes, bytes | None], None]) -> None:
        """Another owner's records in __consumer_offsets (share groups), replayed to it
        whenever a partition is loaded."""
        self.manager.add_replay(record_type, replay)

    def is_consumer_group(self, group_id: str) -> bool:
        """Whether the group is a KIP-848 consumer group now (with classic members, maybe)."""
        return self._consumer_group(group_id) is not None

    def _classic_active(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.is_(EMPTY, DEAD)

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def now(self) -> int:
        return self.time.milliseconds()

    # -- life cycle
    def startup(self) -> None:
        """Load groups and offsets; attach the timers to the running event loop, if any."""
        if self.timers.loop is None:
            try:
                self.timers.loop = asyncio.get_running_loop()
            except RuntimeError:
                pass
        self.loading = True
        try:
            for group in self.manager.load(self.now()):
                for member in group.members.values():
                    self.schedule_heartbeat(group, member, member.session_timeout_ms)
            self.consumer.after_load()
        finally:
            self.loading = False

    def shutdown(self) -> None:
        """Stop the timers; parked JoinGroup and SyncGroup requests get NOT_COORDINATOR, so
        clients look for the coordinator again instead of holding the broker's shutdown."""
        self.timers.close()
        for group_id in list(self.consumer.groups):
            self.consumer.drop(group_id, forget=True)
        for group in self.groups.values():
            self._release(group)

    def _release(self, group: GroupMetadata) -> None:
        """Stop the group's timers; parked JoinGroup and SyncGroup get NOT_COORDINATOR."""
        for member in group.members.values():
            self.cancel_heartbeat(member)
            if member.await_join is not None:
                cb, member.await_join = member.await_join, None
                cb(JoinResult(E.NOT_COORDINATOR, member.member_id))
            if member.await_sync is not None:
                scb, member.await_sync = member.await_sync, None
                scb(SyncResult(E.NOT_COORDINATOR))

    def _check_group_id(self, group_id: str | None) -> int:
        if not group_id:
            return E.COORDINATOR_LOAD_IN_PROGRESS if self.loading else E.INVALID_GROUP_ID
        if self.loading or self.store.partition_for(group_id) in self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.is_coordinator_for(group_id):
            return E.NOT_COORDINATOR
        return E.NONE

    def coordinator_error(self, group_id: str) -> int:
        """NONE when this broker coordinates the group id now, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS: the share groups' check, their coordinator living
        where the group id's (Kafka's GroupCoordinatorService)."""
        return self._check_group_id(group_id) if group_id else E.NONE

    def is_coordinator_for(self, group_id: str) -> bool:
        owned = self.owned_partitions
        return owned is None or self.store.partition_for(group_id) in owned

    # -- cluster mode: leadership of __consumer_offsets partitions
    def on_elected(self, partition: int) -> None:
        """This broker now leads __consumer_offsets-`partition`: load its groups (Kafka's
        onElection) before serving them."""
        if self.owned_partitions is None:
            self.owned_partitions = set()
        if partition in self.owned_partitions:
            return
        self.loading_partitions.add(partition)
        try:
            loaded = self.manager.load(self.now(), self.store.read_partition(partition))
            for group in loaded:
                for member in group.members.values():
                    self.schedule_heartbeat(group, member, member.session_timeout_ms)
            self.consumer.after_load({g for g in self.consumer.groups if self.store.partition_for(g) == partition})
        finally:
            self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        log.info("coordinating the groups of __consumer_offsets-%d (%d with members)", partition,
                 len(loaded))

    def on_resigned(self, partition: int) -> None:
        """Another broker leads the partition now: forget its groups (Kafka's onResignation);
        their clients find the new coordinator."""
        if self.owned_partitions is None:
            self.owned_partitions = set()
        self.owned_partitions.discard(partition)
        for group_id in [g for g in self.groups if self.store.partition_for(g) == partition]:
            self._release(self.groups.pop(group_id))
        for group_id in [g for g in self.consumer.groups if self.store.partition_for(g) == partition]:
            self.consumer.drop(group_id, forget=True)

    # -- KIP-848 consumer groups (consumer_group_coordinator.py)
    def consumer_heartbeat(self, req: cgc.HeartbeatRequest, topics: cgc.TopicLookup) -> cgc.HeartbeatResult:
        err = self._check_group_id(req.group_id)
        return cgc.HeartbeatResult(err) if err != E.NONE else self.consumer.heartbeat(req, topics)

    def consumer_describe(self, group_id: str) -> tuple[int, ConsumerGroup | None]:
        err = self._check_group_id(group_id)
        group = self.consumer.groups.get(group_id) if err == E.NONE else None
        return (E.GROUP_ID_NOT_FOUND if err == E.NONE and (group is None or group.dead) else err), group

    # -- JoinGroup
    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        err = self._check_group_id(req.group_id)
        if err == E.NONE and not (self.config.group_min_session_timeout_ms <= req.session_timeout_ms
                                  <= self.config.group_max_session_timeout_ms):
            err = E.INVALID_SESSION_TIMEOUT
        if err != E.NONE:
            callback(JoinResult(err, req.member_id))
            return
        consumer_group = self._consumer_group(req.group_id)
        if consumer_group is not None and consumer_group.members:  # a classic member of a consumer group
            callback(self.classic_in_consumer.join(consumer_group, req, self.topics))
            return
        err = self.consumer.drop(req.group_id)  # an Empty consumer group becomes a classic one
        if err != E.NONE:
            callback(JoinResult(err, req.member_id))
            return
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                callback(JoinResult(E.UNKNOWN_MEMBER_ID, req.member_id))
                return
            group = GroupMetadata(req.group_id, self.now())
            self.groups[req.group_id] = group
        if group.is_(DEAD):
            callback(JoinResult(E.COORDINATOR_NOT_AVAILABLE, req.member_id))
        elif not group.supports(req.protocol_type, req.protocols):
            callback(JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        elif (unknown or req.member_id in group.pending_members) and \
                len(group.members) + len(group.pending_members) >= self.config.group_max_size + \
                (0 if unknown else 1):
            callback(JoinResult(E.GROUP_MAX_SIZE_REACHED, req.member_id))
        elif unknown:
            self._join_unknown_member(group, req, callback)
        else:
            self._join_known_member(group, req, callback)

    def _join_unknown_member(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, req, old_id, new_id, callback)
            else:
                self._add_member_and_rebalance(group, req, new_id, callback)
        elif req.require_known_member_id:
            timer = self.timers.schedule(req.session_timeout_ms,
                                         lambda: self._expire_pending_member(group, new_id))
            group.pending_members[new_id] = timer
            callback(JoinResult(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, callback)

    def _join_known_member(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, req, member_id, callback)
            return
        if group.is_fenced(member_id, req.group_instance_id):
            callback(JoinResult(E.FENCED_INSTANCE_ID, member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.is_(EMPTY, DEAD):
            callback(JoinResult(E.UNKNOWN_MEMBER_ID, member_id))
        elif group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_(COMPLETING):
            if member.matches(req.protocols):
                callback(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        elif member_id == group.leader_id or not member.matches(req.protocols):
            self._update_member_and_rebalance(group, member, req, callback)
        else:
            callback(self._join_result(group, member))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata,
                     skip_assignment: bool = False) -> JoinResult:
        members = None
        if member.member_id == group.leader_id and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(E.NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", members or [], skip_assignment)

    def _add_member_and_rebalance(self, group: GroupMetadata, req: JoinRequest, member_id: str,
                                  callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                list(req.protocols))
        member.is_new = True
        member.await_join = callback
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     req: JoinRequest, callback: JoinCallback) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.await_join is not None:  # a retry: the earlier request is answered, not lost
            stale, member.await_join = member.await_join, None
            stale(JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.await_join = callback
        self.rebalance(group, f"member {member.member_id} rejoined")

    def _replace_static_member(self, group: GroupMetadata, req: JoinRequest, old_id: str, new_id: str,
                               callback: JoinCallback) -> None:
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        if member.await_join is not None:
            cb, member.await_join = member.await_join, None
            cb(JoinResult(E.FENCED_INSTANCE_ID, old_id))
        if member.await_sync is not None:
            scb, member.await_sync = member.await_sync, None
            scb(SyncResult(E.FENCED_INSTANCE_ID))
        member.client_id, member.client_host = req.client_id, req.client_host
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(STABLE) and member.matches(req.protocols):
            leader = new_id == group.leader_id
            callback(self._join_result(group, member, skip_assignment=leader))
            return
        self._update_member_and_rebalance(group, member, req, callback)

    def rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)
        self._try_complete_join(group)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(COMPLETING):
            self._fail_sync_waiters(group, E.REBALANCE_IN_PROGRESS)
        initial = group.is_(EMPTY)
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        group.transition(PREPARING, self.now())
        timeout = group.rebalance_timeout_ms()
        delay = self.config.group_initial_rebalance_delay_ms
        if group.join_timer is not None:
            group.join_timer.cancel()
        if initial and delay > 0:
            group.new_member_added = False
            first = min(delay, timeout)
            group.join_deadline_ms = -max(timeout - first, 0)  # negative: remaining initial delay
            group.join_timer = self.timers.schedule(first, lambda: self._initial_join_expired(group))
        else:
            group.join_deadline_ms = 0
            group.join_timer = self.timers.schedule(timeout, lambda: self._complete_join(group))

    def _initial_join_expired(self, group: GroupMetadata) -> None:
        remaining = -group.join_deadline_ms
        if group.new_member_added and remaining > 0 and group.is_(PREPARING):
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.join_deadline_ms = -max(remaining - delay, 0)
            group.join_timer = self.timers.schedule(delay, lambda: self._initial_join_expired(group))
            return
        group.join_deadline_ms = 0
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(PREPARING) and group.join_deadline_ms >= 0 and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        if not group.is_(PREPARING):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_deadline_ms = 0
        for member in [m for m in group.members.values() if not m.is_awaiting_join]:
            log.info("group %s: removing member %s, which did not rejoin", group.group_id, member.member_id)
            self.cancel_heartbeat(member)
            group.remove(member.member_id)
        group.generation_id += 1
        now = self.now()
        if not group.members:
            group.protocol_name = None
            group.transition(EMPTY, now)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._store_group_quietly(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(COMPLETING, now)
        self.completed_rebalances += 1
        log.info("group %s: generation %d with %d members (protocol %s, leader %s)", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            cb, member.await_join = member.await_join, None
            member.is_new = False
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            if cb is not None:
                cb(self._join_result(group, member))

    def _store_group_quietly(self, group: GroupMetadata) -> None:
        try:
            self.manager.store_group(group)
        except Exception:
            log.exception("group %s: storing group metadata failed", group.group_id)

    # -- SyncGroup
    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], callback: SyncCallback) -> None:
        err = self._check_group_id(group_id)
        consumer_group = self._consumer_group(group_id) if err == E.NONE else None
        if consumer_group is not None:
            callback(self.classic_in_consumer.sync(consumer_group, member_id, group_instance_id, generation_id,
                                                   protocol_type, protocol_name, self.topics))
            return
        group = self.groups.get(group_id)
        if err == E.NONE:
            err = self._check_member(group, member_id, group_instance_id, generation_id)
        if err == E.NONE and group is not None and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            err = E.INCONSISTENT_GROUP_PROTOCOL
        if err != E.NONE or group is None:
            callback(SyncResult(err))
            return
        member = group.members[member_id]
        if group.is_(PREPARING):
            callback(SyncResult(E.REBALANCE_IN_PROGRESS))
            return
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(STABLE):
            callback(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            return
        if member.await_sync is not None:  # a retry: the earlier request is answered, not lost
            stale_sync, member.await_sync = member.await_sync, None
            stale_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        member.await_sync = callback
        if member_id != group.leader_id:
            return
        full = {mid: assignments.get(mid, b"") for mid in group.members}
        code = self._write(group.group_id, "storing the assignment",
                           lambda: self.manager.store_group(group, full))
        if code != E.NONE:
            self._fail_sync_waiters(group, code)
            self.rebalance(group, "storing the assignment failed")
            return
        for mid, m in group.members.items():
            m.assignment = full[mid]
        group.transition(STABLE, self.now())
        for m in group.members.values():
            if m.await_sync is not None:
                scb, m.await_sync = m.await_sync, None
                scb(SyncResult(E.NONE, m.assignment, group.protocol_type, group.protocol_name))

    def _fail_sync_waiters(self, group: GroupMetadata, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.await_sync is not None:
                scb, m.await_sync = m.await_sync, None
                scb(SyncResult(error))

    def _check_member(self, group: GroupMetadata | None, member_id: str, instance_id: str | None,
                      generation_id: int) -> int:
        """The checks SyncGroup and Heartbeat share (Kafka's order)."""
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        if member_id not in group.members or group.is_(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    # -- Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        err = self._check_group_id(group_id)
        if err != E.NONE:
            return err
        consumer_group = self._consumer_group(group_id)
        if consumer_group is not None:
            return self.classic_in_consumer.heartbeat(consumer_group, member_id, group_instance_id, generation_id)
        group = self.groups.get(group_id)
        err = self._check_member(group, member_id, group_instance_id, generation_id)
        if err != E.NONE or group is None:
            return err
        member = group.members[member_id]
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        return E.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else E.NONE

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        self.cancel_heartbeat(member)
        member.heartbeat_timer = self.timers.schedule(
            timeout_ms, lambda: self._heartbeat_expired(group, member))

    def cancel_heartbeat(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member or group.is_(DEAD):
            return
        if (member.is_awaiting_join and not member.is_new) or member.await_sync is not None:
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        log.info("group %s: member %s failed to heartbeat in time", group.group_id, member.member_id)
        self._remove_member(group, member, "session timeout")

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            log.info("group %s: pending member %s did not join in time", group.group_id, member_id)
        self._try_complete_join(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self.cancel_heartbeat(member)
        if member.await_join is not None:
            cb, member.await_join = member.await_join, None
            cb(JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))
        if member.await_sync is not None:
            scb, member.await_sync = member.await_sync, None
            scb(SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_(STABLE, COMPLETING, PREPARING):
            self.rebalance(group, f"member {member.member_id} left ({reason})")

    # -- LeaveGroup
    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[int, list[tuple[str, str | None, int]]]:
        err = self._check_group_id(group_id)
        if err != E.NONE:
            return err, [(m, i, err) for m, i in members]
        results = []
        for member_id, instance_id in members:  # a consumer group may become a classic one on the way
            consumer_group = self._consumer_group(group_id)
            group = self.groups.get(group_id)
            if consumer_group is not None:
                member_id, code = self.classic_in_consumer.leave(consumer_group, member_id, instance_id)
            elif group is None or group.is_(DEAD):
                code = E.UNKNOWN_MEMBER_ID
            else:
                code = self._leave_one(group, member_id, instance_id)
            results.append((member_id, instance_id, code))
        return E.NONE, results

    def _leave_one(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id != UNKNOWN_MEMBER_ID and member_id != current:
                return E.FENCED_INSTANCE_ID
            member_id = current
        elif member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._try_complete_join(group)
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        log.info("group %s: member %s leaves", group.group_id, member_id)
        self._remove_member(group, member, "left the group")
        return E.NONE

    # -- offsets
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata],
                       api_version: int = 9) -> dict[tuple[str, int], int]:
        """Classic members commit with their generation, KIP-848 members their member epoch."""
        err = self._check_group_id(group_id)
        group = self.groups.get(group_id)
        consumer_err = None if err != E.NONE else self.consumer.check_commit(
            group_id, member_id, generation_id, api_version)
        if consumer_err is not None:
            if consumer_err != E.NONE:
                return {tp: consumer_err for tp in offsets}
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id, self.now())
            return self._store_offsets(group, offsets)
        if err == E.NONE:
            if group is None:
                if generation_id < 0:
                    group = GroupMetadata(group_id, self.now())
                    self.groups[group_id] = group
                else:
                    err = E.ILLEGAL_GENERATION
            else:
                err = self._check_commit(group, member_id, group_instance_id, generation_id)
        if err != E.NONE or group is None:
            return {tp: err for tp in offsets}
        return self._store_offsets(group, offsets)

    def _store_offsets(self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata],
                       producer_id: int = -1, producer_epoch: int = -1) -> dict[tuple[str, int], int]:
        """Write the offsets whose metadata fits offset.metadata.max.bytes; an error each."""
        results: dict[tuple[str, int], int] = {}
        valid: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        what = "storing offsets" if producer_id < 0 else "storing transactional offsets"
        code = self._write(group.group_id, what,
                           lambda: self.manager.store_offsets(group, valid, producer_id, producer_epoch))
        for tp in valid:
            results[tp] = code
        return results

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: the offsets are written in a transactional batch of the producer
        and stay pending until its transaction's marker (on_transaction_completed). Member
        and generation are checked only when given (KIP-447; older clients send none)."""
        err = self._check_group_id(group_id)
        group = self.groups.get(group_id)
        if err == E.NONE:
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id, self.now())
            err = self._check_txn_commit(group, member_id, group_instance_id, generation_id)
        if err != E.NONE or group is None:
            return {tp: err for tp in offsets}
        return self._store_offsets(group, offsets, producer_id, producer_epoch)

    def _check_txn_commit(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                          generation_id: int) -> int:
        """Kafka's validateOffsetCommit for a transactional commit."""
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and member_id == UNKNOWN_MEMBER_ID and instance_id is None:
            return E.NONE
        if instance_id is not None:
            if group.static_member_id(instance_id) is None:
                return E.UNKNOWN_MEMBER_ID
            if group.is_fenced(member_id, instance_id):
                return E.FENCED_INSTANCE_ID
        elif member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    def on_transaction_completed(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A marker of `producer_id`'s transaction was written to these __consumer_offsets
        partitions: its pending offsets of their groups become committed (or go)."""
        wanted = set(partitions)
        for group in self.groups.values():
            if producer_id in group.pending_txn_offsets and self.store.partition_for(group.group_id) in wanted:
                group.complete_pending_txn_offsets(producer_id, commit)

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of the group with an offset committed in a transaction in progress
        (OffsetFetch require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def _write(self, group_id: str, what: str, write: Callable[[], object]) -> int:
        """Run a write to __consumer_offsets; the error the client gets if it fails."""
        try:
            write()
        except Exception as e:
            log.error("group %s: %s failed: %s", group_id, what, e)
            return store_error(e)
        return E.NONE

    def _check_commit(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                      generation_id: int) -> int:
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return E.NONE
        if group.is_(COMPLETING):
            return E.REBALANCE_IN_PROGRESS
        if group.is_fenced(member_id, instance_id):
            return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                      ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """(error, offsets); `partitions` None means every committed offset of the group."""
        err = self._check_group_id(group_id)
        if err != E.NONE:
            return err, {}
        group = self.groups.get(group_id)
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return E.NONE, dict(offsets)
        return E.NONE, {tp: offsets.get(tp) for tp in partitions}

    def on_topic_deleted(self, topic: str) -> int:
        """Drop every group's committed offsets of a deleted topic (tombstones), as Kafka does."""
        removed = 0
        for group in list(self.groups.values()):
            doomed = [tp for tp in group.offsets if tp[0] == topic]
            if doomed and self._write(group.group_id, "deleting offsets of a deleted topic",
                                      lambda g=group, d=doomed: self.manager.delete_offsets(g, d)) == E.NONE:  # type: ignore[misc]
                removed += len(doomed)
        return removed

    def expire_offsets(self) -> int:
        return self.manager.expire_offsets(self.now())

    # -- admin
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()
                    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        if self.loading or self.loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        out = []
        for group_id in self.groups.keys() | self.consumer.groups.keys():
            consumer_state = self.consumer.state_of(group_id)
            g = self.groups.get(group_id)
            if consumer_state is not None:
                kind, ptype, state = "consumer", "consumer", consumer_state.value
            elif g is not None:
                kind, ptype, state = "classic", g.protocol_type or "", g.state.value
            else:
                continue
            if want_states and state.lower() not in want_states:
                continue
            if want_types and kind not in want_types:
                continue
            out.append((group_id, ptype, state, kind))
        return E.NONE, out

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        err = self._check_group_id(group_id)
        if err != E.NONE:
            return err, None
        return E.NONE, self.groups.get(group_id)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        results = {}
        for group_id in group_ids:
            err = self._check_group_id(group_id)
            group = self.groups.get(group_id)
            if err == E.NONE:
                if group is None or group.is_(DEAD):
                    err = E.GROUP_ID_NOT_FOUND
                elif not group.is_(EMPTY) or self.consumer.is_active(group_id):
                    err = E.NON_EMPTY_GROUP
            if err == E.NONE and group is not None:
                err = self._write(group_id, "deleting the group",
                                  lambda g=group: self.manager.delete_group(g, self.now()))  # type: ignore[misc]
            if err == E.NONE:
                err = self.consumer.drop(group_id)
            results[group_id] = err
        return results

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[int, dict[tuple[str, int], int]]:
        err = self._check_group_id(group_id)
        group = self.groups.get(group_id)
        if err == E.NONE and (group is None or group.is_(DEAD)):
            err = E.GROUP_ID_NOT_FOUND
        if err != E.NONE or group is None:
            return err, {}
        # as Kafka's ClassicGroup (validateOffsetDelete, isSubscribedToTopic): a group with
        # members must be a `consumer` group, and a topic counts as subscribed when the
        # subscriptions cannot be read (None)
        subscribed: set[str] | None = set()
        consumer_group = self._consumer_group(group_id)
        if consumer_group is not None and consumer_group.members:  # Kafka's ConsumerGroup.isSubscribedToTopic
            subscribed = consumer_group.subscribed_topic_names() | set(consumer_group.subscribed or {})
        elif not group.is_(EMPTY):
            if group.protocol_type != "consumer":
                return E.NON_EMPTY_GROUP, {}
            subscribed = group.subscribed_topics()
        results: dict[tuple[str, int], int] = {
            tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if subscribed is None or tp[0] in subscribed}
        deletable = [tp for tp in partitions if tp not in results]
        code = self._write(group_id, "deleting offsets", lambda: self.manager.delete_offsets(group, deletable))
        results.update({tp: code for tp in deletable})
        return E.NONE, results

