"""Partition: one partition as this broker sees it (Kafka's cluster.Partition).

The controller decides the partition's state (leader, leader epoch, ISR, replicas,
partition epoch) and tells this broker with LeaderAndIsr; the Log holds this broker's
copy. As leader, the Partition keeps each follower's progress (from its Fetch
requests), moves the high watermark, answers acks=all waits, and proposes ISR
changes to the controller (AlterPartition, KIP-497); as follower it only holds the
state (the fetcher copies the data).

Rules, as Kafka's:
  * high watermark = the lowest log end offset among the leader and the followers that
    are in the maximal ISR (the ISR plus a pending expansion), or caught up and alive
    (Kafka's isReplicaIsrEligible: a follower that shut down is not waited for); it
    never goes back while this broker leads.
  * a follower is caught up when its fetch reached the leader's log end offset, or
    reached the log end offset the leader had at its previous fetch, within
    replica.lag.time.max.ms.
  * ISR expansion: a follower not in the ISR whose log end offset reached the high
    watermark and the start of this leader epoch. ISR shrink: a follower of the ISR
    not caught up for replica.lag.time.max.ms. Both go through the controller; until
    it answers the change is pending and no other is proposed.
  * acks=all: NOT_ENOUGH_REPLICAS before the append when the ISR is smaller than
    min.insync.replicas (the topic's, `min_insync_replicas`); afterwards the answer waits
    until the high watermark passes the batch, then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
    ISR shrank below it meanwhile; NOT_LEADER_OR_FOLLOWER if leadership moved first
    (`check_enough_replicas_reach_offset`). The waits themselves are the ReplicaManager's
    (its purgatories); the Partition tells them when its data, high watermark or
    leadership moved (DelayedOperations).

Lock: the broker's event-loop thread only. Invariants: leader_epoch never decreases;
log_start_offset <= high_watermark <= log_end_offset (the Log's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.log import Log
from kbroker.storage.producer_state import AppendOrigin
from kbroker.storage.values import LogAppendInfo

log = logging.getLogger(__name__)

NO_LEADER = -1


class NotLeaderError(KafkaError):
    def __init__(self, message: str, error_code: int = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        super().__init__(message, error_code)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the controller decided for a partition (LeaderAndIsr's partition state)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0
    controller_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(slots=True)
class FollowerState:
    """The leader's view of one follower, from its Fetch requests."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1

    def update(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms

    def caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_ms <= max_lag_ms)


# Proposes a new ISR to the controller; resolves to the state it wrote (or raises).
AlterIsr = Callable[["Partition", tuple[int, ...]], "asyncio.Future[PartitionState]"]


class DelayedOperations(Protocol):
    """What a Partition tells the purgatories of its ReplicaManager (Kafka's
    DelayedOperations): new data or a moved high watermark may complete parked Fetches; a
    moved high watermark or a change of leadership may complete acks=all Produces."""

    def check_and_complete_fetch(self, tp: TopicPartition) -> None: ...

    def check_and_complete_produce(self, tp: TopicPartition) -> None: ...


class Partition:
    """See the module docstring."""

    def __init__(self, tp: TopicPartition, local_id: int, log: Log | None,
                 now_ms: Callable[[], int], *, replica_lag_time_max_ms: int = 30000,
                 alter_isr: AlterIsr | None = None,
                 delayed_operations: DelayedOperations | None = None,
                 is_alive: Callable[[int], bool] | None = None,
                 on_isr_change: Callable[[int, int], None] | None = None) -> None:
        self.topic_partition = tp
        self.local_id = local_id
        self.log = log
        self._now_ms = now_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._alter_isr = alter_isr
        self._delayed = delayed_operations  # the ReplicaManager's purgatories
        self._is_alive = is_alive  # is a broker registered (cluster mode)
        self._on_isr_change = on_isr_change  # (old size, new size): IsrShrinks/IsrExpands
        self.state = PartitionState(NO_LEADER, -1, (), ())
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset = -1
        self.fenced = False  # the broker lost ZooKeeper: no writes as leader

    def __repr__(self) -> str:
        s = self.state
        return (f"Partition({self.topic_partition}, leader={s.leader}, epoch={s.leader_epoch}, "
                f"isr={list(s.isr)}, replicas={list(s.replicas)})")

    # -- state ---------------------------------------------------------------------------
    @property
    def leader_id(self) -> int:
        return self.state.leader

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.state.isr
        return tuple(dict.fromkeys(self.state.isr + self.pending_isr))

    def local_log(self) -> Log:
        if self.log is None:
            raise NotLeaderError(f"{self.topic_partition} has no replica on broker {self.local_id}")
        return self.log

    def check_leader(self, current_leader_epoch: int = -1) -> Log:
        """The log, if this broker leads the partition at `current_leader_epoch` (-1: any);
        else NotLeaderError with the code Kafka answers."""
        if not self.is_leader or self.fenced or self.log is None:
            raise NotLeaderError(f"broker {self.local_id} is not the leader of {self.topic_partition}")
        self.check_epoch(current_leader_epoch)
        return self.log

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0 or current_leader_epoch == self.state.leader_epoch:
            return
        if current_leader_epoch < self.state.leader_epoch:
            raise NotLeaderError(f"{self.topic_partition}: leader epoch {current_leader_epoch} is "
                                 f"older than {self.state.leader_epoch}", ErrorCode.FENCED_LEADER_EPOCH)
        raise NotLeaderError(f"{self.topic_partition}: leader epoch {current_leader_epoch} is "
                             f"newer than {self.state.leader_epoch}", ErrorCode.UNKNOWN_LEADER_EPOCH)

    def make_leader(self, state: PartitionState) -> bool:
        """Become (or stay) the leader with `state`. Returns whether this broker was not
        the leader before (a new leadership)."""
        plog = self.local_log()
        new_leader = not self.is_leader or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.pending_isr = None
        if new_leader:
            self.leader_epoch_start_offset = plog.log_end_offset
            plog.leader_epoch_cache.assign(state.leader_epoch, plog.log_end_offset)
            now = self._now_ms()
            self.followers = {
                r: FollowerState(r, last_caught_up_ms=now if r in state.isr else 0)
                for r in state.replicas if r != self.local_id}
        else:
            for r in state.replicas:
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerState(r)
        plog.auto_high_watermark = False
        self.maybe_increment_high_watermark()
        return new_leader

    def make_follower(self, state: PartitionState) -> None:
        self.state = state
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = -1
        if self.log is not None:
            self.log.auto_high_watermark = False
        self.try_complete_delayed_produces()

    def make_local_leader(self) -> None:
        """A single broker: leader of its only replica, epoch 0, forever. The high
        watermark is the log end offset (the Log keeps it so after every append)."""
        self.state = PartitionState(self.local_id, 0, (self.local_id,), (self.local_id,))

    # -- leader: appends and acks=all ----------------------------------------------------
    @property
    def min_insync_replicas(self) -> int:
        """The topic's min.insync.replicas (its log's config)."""
        return self.local_log().config.min_insync_replicas

    def append_records_to_leader(self, records: bytes | bytearray | memoryview, acks: int,
                                 min_insync_replicas: int | None = None,
                                 origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Append as leader (Kafka's Partition.appendRecordsToLeader). acks=all with an ISR
        smaller than `min_insync_replicas` (default: the topic's) stores nothing:
        NOT_ENOUGH_REPLICAS."""
        plog = self.check_leader()
        isr = len(self.state.isr)
        if acks == -1:
            min_isr = plog.config.min_insync_replicas if min_insync_replicas is None else min_insync_replicas
            if isr < min_isr:
                raise KafkaError(
                    f"the in-sync replicas of {self.topic_partition} ({isr}) are fewer than "
                    f"min.insync.replicas ({min_isr})", ErrorCode.NOT_ENOUGH_REPLICAS)
        info = plog.append_as_leader(records, leader_epoch=self.state.leader_epoch, origin=origin)
        if not plog.auto_high_watermark:
            self.maybe_increment_high_watermark()
        self.try_complete_delayed_fetches()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int, min_insync_replicas: int) -> int | None:
        """acks=all (Kafka's checkEnoughReplicasReachOffset): None while the high watermark
        is below `required_offset`; then NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
        ISR is smaller than `min_insync_replicas`; NOT_LEADER_OR_FOLLOWER once this broker
        no longer leads (or is fenced)."""
        plog = self.log
        if plog is None or not self.is_leader or self.fenced:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if plog.high_watermark < required_offset:
            return None
        if len(self.state.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def try_complete_delayed_produces(self) -> None:
        """The high watermark moved, or this broker stopped leading (or was fenced, or the
        partition went): acks=all waits on it may answer."""
        if self._delayed is not None:
            self._delayed.check_and_complete_produce(self.topic_partition)

    def try_complete_delayed_fetches(self) -> None:
        """New data or a moved high watermark: parked Fetches on it read again."""
        if self._delayed is not None:
            self._delayed.check_and_complete_fetch(self.topic_partition)

    # -- leader: followers -----------------------------------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int,
                                    leader_log_end_offset: int) -> None:
        """A follower fetched from `fetch_offset`: it holds everything below it."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        moved = follower.log_end_offset != fetch_offset
        follower.update(fetch_offset, leader_log_end_offset, self._now_ms())
        if not moved and replica_id in self.state.isr:
            return  # an ISR member that holds what it held: neither the ISR nor the HW moves
        self.maybe_expand_isr(follower)
        if self.maybe_increment_high_watermark():
            self.try_complete_delayed_fetches()

    def maybe_increment_high_watermark(self) -> bool:
        plog = self.log
        if plog is None or not self.is_leader:
            return False
        leo = plog.log_end_offset
        new_hw = leo
        maximal = self.maximal_isr
        now = self._now_ms()
        for f in self.followers.values():
            if f.log_end_offset < new_hw and (
                    f.broker_id in maximal
                    or (f.caught_up(leo, now, self.replica_lag_time_max_ms)
                        and (self._is_alive is None or self._is_alive(f.broker_id)))):
                new_hw = max(f.log_end_offset, 0) if f.log_end_offset >= 0 else plog.high_watermark
        if plog.maybe_increment_high_watermark(new_hw):
            self.try_complete_delayed_produces()
            return True
        return False

    def maybe_expand_isr(self, follower: FollowerState) -> None:
        plog = self.log
        if (plog is None or self.pending_isr is not None or self._alter_isr is None
                or follower.broker_id in self.state.isr
                or follower.broker_id not in self.state.replicas):
            return
        if (follower.log_end_offset >= plog.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start_offset):
            self._propose_isr(self.state.isr + (follower.broker_id,))

    def maybe_shrink_isr(self) -> None:
        """Drop followers that have not caught up for replica.lag.time.max.ms (periodic)."""
        plog = self.log
        if plog is None or not self.is_leader or self.pending_isr is not None or self._alter_isr is None:
            return
        leo = plog.log_end_offset
        now = self._now_ms()
        lagging = [r for r in self.state.isr if r != self.local_id
                   and r in self.followers
                   and not self.followers[r].caught_up(leo, now, self.replica_lag_time_max_ms)]
        if lagging:
            log.info("%s: shrinking the ISR from %s: %s not caught up for %d ms",
                     self.topic_partition, list(self.state.isr), lagging, self.replica_lag_time_max_ms)
            self._propose_isr(tuple(r for r in self.state.isr if r not in lagging))

    def _propose_isr(self, new_isr: tuple[int, ...]) -> None:
        assert self._alter_isr is not None
        self.pending_isr = new_isr
        epoch = self.state.leader_epoch
        fut = self._alter_isr(self, new_isr)
        fut.add_done_callback(lambda f: self._isr_answered(f, epoch))

    def _isr_answered(self, fut: asyncio.Future[PartitionState], epoch: int) -> None:
        if self.state.leader_epoch != epoch or not self.is_leader:
            return  # a LeaderAndIsr came meanwhile: it wins
        self.pending_isr = None
        if fut.cancelled() or fut.exception() is not None:
            err = None if fut.cancelled() else fut.exception()
            log.info("%s: ISR change not applied: %s", self.topic_partition, err)
            return
        state = fut.result()
        if state.leader_epoch != epoch or state.leader != self.local_id:
            return
        log.info("%s: ISR now %s (partition epoch %d)", self.topic_partition, list(state.isr),
                 state.partition_epoch)
        if self._on_isr_change is not None:
            self._on_isr_change(len(self.state.isr), len(state.isr))
        self.state = state
        if self.maybe_increment_high_watermark():
            self.try_complete_delayed_fetches()

    # -- follower ----------------------------------------------------------------------------
    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        plog = self.log
        if plog is not None:
            new_hw = min(leader_high_watermark, plog.log_end_offset)
            if new_hw > plog.high_watermark:
                plog.update_high_watermark(new_hw)

