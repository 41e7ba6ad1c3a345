"""Followers copy their leaders: ReplicaFetcherManager and its fetchers (Kafka's
ReplicaFetcherManager / ReplicaFetcherThread, as asyncio tasks).

Partitions led by one broker are spread over `num.replica.fetchers` fetchers for that
broker (by a hash of the partition). A fetcher takes each new partition through two
states:

  truncating  OffsetForLeaderEpoch to the leader with the follower's latest epoch;
              the log is cut where it diverges from the leader's (never blindly at the
              high watermark), in as many rounds as Kafka's rules need
              (AbstractFetcherThread.getOffsetTruncationState). A log without a leader
              epoch (a new replica's empty log) has nothing to compare: it is cut at its
              high watermark locally and fetches at once, with no request, as Kafka's
              fetcher treats partitions without epochs (maybeTruncate ->
              truncateToHighWatermark). A new topic's followers so start fetching in the
              fetch after their LeaderAndIsr, not after an OffsetForLeaderEpoch that a
              leader which has not yet handled its own LeaderAndIsr answers with
              UNKNOWN_TOPIC_OR_PARTITION (and replica.fetch.backoff.ms, 1 s, of waiting)
  fetching    Fetch with replica_id set, from the log end offset, long-polling
              `replica.fetch.wait.max.ms` for `replica.fetch.min.bytes`; the leader's
              batches are appended byte for byte (Log.append_as_follower checks their
              CRCs) and the high watermark follows the leader's, capped at our log end.

An answer applies only to the fetch state it was asked for: a LeaderAndIsr that
replaced the partition's state while the request was in flight wins.

Errors per partition: FENCED_LEADER_EPOCH drops the partition until the controller's
next LeaderAndIsr; NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH and the like retry after
`replica.fetch.backoff.ms` (the leader has not heard from the controller yet);
OFFSET_OUT_OF_RANGE truncates again, or restarts the log at the leader's log start when
the follower fell below it. A failed connection backs off and reconnects.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.cluster.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from kbroker.cluster.partition import Partition
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kbroker.records.batch_header import complete_batches_size
from kbroker.security.settings import InterBrokerLogin
from kbroker.utils.java_hash import java_string_hash

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topics by name, last_fetched_epoch
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
UNDEFINED = -1
SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                            ErrorCode.INVALID_FETCH_SESSION_EPOCH})
RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_ID,
})


@dataclass(frozen=True)
class FetcherConfig:
    num_replica_fetchers: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    login: InterBrokerLogin | None = None  # a SASL inter-broker listener's


@dataclass(slots=True)
class FetchState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


class ReplicaFetcherManager:
    def __init__(self, node_id: int, config: FetcherConfig,
                 leader_endpoint: Callable[[int], tuple[str, int] | None]) -> None:
        self.node_id = node_id
        self.config = config
        self.leader_endpoint = leader_endpoint
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, tuple[int, int]] = {}
        self._shut_down = False

    def fetcher_id(self, tp: TopicPartition) -> int:
        n = max(self.config.num_replica_fetchers, 1)
        return (31 * java_string_hash(tp.topic) + tp.partition) % n

    def add_partitions(self, partitions: list[Partition]) -> None:
        self.remove_partitions([p.topic_partition for p in partitions])
        if self._shut_down:
            # A LeaderAndIsr handled while the broker stops (after shutdown()) starts no
            # fetcher: one would outlive the broker and keep its process from exiting.
            return
        for p in partitions:
            if p.leader_id < 0 or p.leader_id == self.node_id:
                continue
            key = (p.leader_id, self.fetcher_id(p.topic_partition))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(self, p.leader_id, key[1])
            fetcher.add(p)
            self._owner[p.topic_partition] = key

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = self._owner.pop(tp, None)
            if key is None:
                continue
            fetcher = self.fetchers.get(key)
            if fetcher is not None:
                fetcher.remove(tp)
                if fetcher.idle:
                    fetcher.stop()
                    del self.fetchers[key]

    def reconfigure(self, config: FetcherConfig) -> None:
        """Kafka's resizeThreadPool: a new num.replica.fetchers re-spreads the partitions
        fetched over the new count of fetchers (running fetchers keep the config they were
        started with)."""
        resized = config.num_replica_fetchers != self.config.num_replica_fetchers
        self.config = config
        if resized:
            followers = [s.partition for f in list(self.fetchers.values())
                         for s in f.partitions.values() if not s.partition.is_leader]
            self.add_partitions(followers)

    def fetching(self, tp: TopicPartition) -> bool:
        return tp in self._owner

    def shutdown(self) -> None:
        self._shut_down = True
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self._owner.clear()


class ReplicaFetcher:
    """Fetches the partitions one leader leads for this broker. See the module docstring."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.config = manager.config
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.channel = BrokerChannel(leader_id, lambda: manager.leader_endpoint(leader_id),
                                     f"broker-{manager.node_id}-fetcher-{fetcher_id}",
                                     manager.config.login)
        self._wake = asyncio.Event()
        self.session = FetchSessionHandler()
        self._task = asyncio.ensure_future(self._run())

    @property
    def idle(self) -> bool:
        return not self.partitions

    def add(self, partition: Partition) -> None:
        self.partitions[partition.topic_partition] = FetchState(partition, partition.leader_epoch)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def stop(self) -> None:
        self._task.cancel()
        self.channel.close()

    async def _run(self) -> None:
        backoff = self.config.replica_fetch_backoff_ms / 1000
        while True:
            try:
                if not self.partitions:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                await self._truncate()
                fetched = await self._fetch()
                if not fetched:
                    await asyncio.sleep(min(backoff, 0.1))
            except asyncio.CancelledError:
                raise
            except KafkaClientError as e:
                if self.channel.closed:
                    # stopped: Python 3.11's wait_for may turn the task's cancellation into
                    # the error of the request close() failed, so the loop ends here too
                    return
                log.info("fetcher %d for leader %d: %s; retrying in %.1f s", self.fetcher_id,
                         self.leader_id, e, backoff)
                self.channel.reset()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("fetcher %d for leader %d failed; retrying", self.fetcher_id,
                              self.leader_id)
                await asyncio.sleep(backoff)

    def _ready(self, truncating: bool) -> list[FetchState]:
        now = asyncio.get_running_loop().time()
        return [s for s in self.partitions.values()
                if s.truncating == truncating and s.delayed_until <= now]

    def _delay(self, state: FetchState) -> None:
        state.delayed_until = (asyncio.get_running_loop().time()
                               + self.config.replica_fetch_backoff_ms / 1000)

    # -- truncation --------------------------------------------------------------------------
    async def _truncate(self) -> None:
        while True:
            pending = []
            for s in self._ready(True):
                if s.partition.local_log().latest_epoch < 0:
                    # nothing to compare with the leader's: as an answer without an end
                    # offset, cut at the high watermark, no request
                    self._truncation_answer(s, ErrorCode.NONE, UNDEFINED, UNDEFINED)
                else:
                    pending.append(s)
            if not pending:
                return
            by_topic: dict[str, list[FetchState]] = {}
            for s in pending:
                by_topic.setdefault(s.partition.topic_partition.topic, []).append(s)
            request = OffsetForLeaderEpochRequest(replica_id=self.manager.node_id, topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=s.partition.topic_partition.partition,
                        current_leader_epoch=s.leader_epoch,
                        leader_epoch=s.partition.local_log().latest_epoch)
                    for s in states])
                for topic, states in by_topic.items()])
            response = await self.channel.request(request, OFFSET_FOR_LEADER_EPOCH_VERSION,
                                                  self.config.replica_socket_timeout_ms / 1000)
            asked = {s.partition.topic_partition: s for s in pending}
            for t in response.topics:
                for p in t.partitions:
                    state = self._current(asked, TopicPartition(t.topic, p.partition))
                    if state is not None and state.truncating:
                        self._truncation_answer(state, p.error_code, p.leader_epoch, p.end_offset)

    def _current(self, asked: dict[TopicPartition, FetchState], tp: TopicPartition) -> FetchState | None:
        """The partition's state if it is still the one the request was made for: a
        LeaderAndIsr may have replaced it meanwhile (another leader epoch), and an answer
        about the old epoch says nothing about the new one."""
        state = self.partitions.get(tp)
        return state if state is not None and state is asked.get(tp) else None

    def _truncation_answer(self, state: FetchState, error: int, leader_epoch: int, end_offset: int) -> None:
        tp = state.partition.topic_partition
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s: leader %d has a newer epoch than %d: waiting for the controller",
                     tp, self.leader_id, state.leader_epoch)
            self.manager.remove_partitions([tp])
            return
        if error != ErrorCode.NONE:
            self._delay(state)
            return
        plog = state.partition.local_log()
        leo = plog.log_end_offset
        if end_offset == UNDEFINED:
            target, done = plog.high_watermark, True
        elif leader_epoch == UNDEFINED:
            target, done = min(end_offset, leo), True
        else:
            f_epoch, f_end = plog.end_offset_for_epoch(leader_epoch)
            if f_end == UNDEFINED:
                target, done = min(end_offset, leo), True
            elif f_epoch != leader_epoch:
                target, done = min(f_end, leo), False
            else:
                target, done = min(f_end, end_offset, leo), True
        if target < leo:
            log.info("%s: truncating from %d to %d (leader %d: epoch %d ends at %d)", tp, leo,
                     target, self.leader_id, leader_epoch, end_offset)
            plog.truncate_to(target)
        if done or target >= leo:
            state.truncating = False

    # -- fetching -------------------------------------------------------------------------------
    async def _fetch(self) -> bool:
        ready = self._ready(False)
        if not ready:
            return False
        cfg = self.config
        session = self.session
        wanted = {}
        for s in ready:
            plog = s.partition.local_log()
            wanted[s.partition.topic_partition] = (s.leader_epoch, plog.log_end_offset,
                                                   plog.log_start_offset)
        full = session.session_id == INVALID_SESSION_ID
        send, forgotten = session.build(wanted)
        by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
        for tp, (epoch, fetch_offset, log_start) in send.items():
            by_topic.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, current_leader_epoch=epoch, fetch_offset=fetch_offset,
                last_fetched_epoch=-1, log_start_offset=log_start,
                partition_max_bytes=cfg.replica_fetch_max_bytes))
        forgot: dict[str, list[int]] = {}
        for tp in forgotten:
            forgot.setdefault(tp.topic, []).append(tp.partition)
        request = FetchRequest(
            replica_id=self.manager.node_id, max_wait_ms=cfg.replica_fetch_wait_max_ms,
            min_bytes=cfg.replica_fetch_min_bytes, max_bytes=cfg.replica_fetch_response_max_bytes,
            isolation_level=0, session_id=session.session_id, session_epoch=session.epoch,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=partitions)
                    for topic, partitions in by_topic.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=topic, partitions=partitions)
                                   for topic, partitions in forgot.items()],
            rack_id="")
        timeout = (cfg.replica_socket_timeout_ms + cfg.replica_fetch_wait_max_ms) / 1000
        try:
            response: FetchResponse = await self.channel.request(request, FETCH_VERSION, timeout)
        except BaseException:
            session.reset()  # the leader may not have seen it, or may be a new process
            raise
        if response.error_code in SESSION_ERRORS:
            # The leader lost the session (restarted, evicted it) or the epochs disagree:
            # the next fetch is a full one that opens a new session.
            log.info("fetcher %d for leader %d: %s; opening a new fetch session", self.fetcher_id,
                     self.leader_id, ErrorCode(response.error_code).name)
            session.reset()
            return True
        if response.error_code != ErrorCode.NONE:
            session.reset()
            raise KafkaClientError(f"Fetch failed: {ErrorCode(response.error_code).name}",
                                   response.error_code)
        session.answered(full, response.session_id)
        asked = {s.partition.topic_partition: s for s in ready}
        for t in response.responses:
            for pd in t.partitions:
                state = self._current(asked, TopicPartition(t.topic, pd.partition_index))
                if state is not None and not state.truncating:
                    self._process(state, pd)
        return True

    def _process(self, state: FetchState, pd: FetchResponse.PartitionData) -> None:
        partition = state.partition
        tp = partition.topic_partition
        code = pd.error_code
        if code == ErrorCode.NONE:
            plog = partition.local_log()
            records = pd.records
            whole = complete_batches_size(records) if isinstance(
                records, bytes | bytearray | memoryview) else 0
            if whole > 0:
                assert isinstance(records, bytes | bytearray | memoryview)
                try:
                    plog.append_as_follower(memoryview(records)[:whole])
                except KafkaError as e:
                    log.warning("%s: cannot append the leader's batches at %d: %s", tp,
                                plog.log_end_offset, e)
                    state.truncating = True
                    self._delay(state)
                    return
                partition.try_complete_delayed_fetches()
            partition.update_follower_high_watermark(pd.high_watermark)
            if pd.log_start_offset > plog.log_start_offset:
                try:
                    plog.delete_records(min(pd.log_start_offset, plog.high_watermark))
                except KafkaError:
                    pass
            return
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s: fenced by leader %d (epoch %d is old): waiting for the controller",
                     tp, self.leader_id, state.leader_epoch)
            self.manager.remove_partitions([tp])
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            plog = partition.local_log()
            if 0 <= plog.log_end_offset < pd.log_start_offset:
                log.info("%s: log end %d is below the leader's log start %d: starting over",
                         tp, plog.log_end_offset, pd.log_start_offset)
                plog.truncate_fully_and_start_at(pd.log_start_offset)
            else:
                state.truncating = True
            return
        if code not in RETRIABLE:
            log.warning("%s: fetch from leader %d failed: %s", tp, self.leader_id, _name(code))
        self._delay(state)


# (current leader epoch, fetch offset, log start offset) of a partition in a fetch
_Position = tuple[int, int, int]


class FetchSessionHandler:
    """The follower's side of an incremental fetch session (KIP-227; Kafka's
    FetchSessionHandler): what the leader's session holds, and which partitions the next
    fetch must name. Without a session (at first, and after any failure) a fetch names
    every partition and asks for a session (epoch 0); in one, it names the partitions
    whose position changed or that are new, and forgets those no longer fetched."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[TopicPartition, _Position] = {}  # what the leader's session holds

    def build(self, wanted: dict[TopicPartition, _Position]
              ) -> tuple[dict[TopicPartition, _Position], list[TopicPartition]]:
        """The partitions the next fetch names, and those it forgets; the session is
        taken to hold `wanted` from now on."""
        if self.session_id == INVALID_SESSION_ID:
            self._sent = dict(wanted)
            return dict(wanted), []
        sent = self._sent
        forgotten = [tp for tp in sent if tp not in wanted]
        send = {tp: pos for tp, pos in wanted.items() if sent.get(tp) != pos}
        self._sent = dict(wanted)
        return send, forgotten

    def answered(self, full: bool, session_id: int) -> None:
        """A fetch was answered without error: the session it opened, or its next epoch."""
        if full:
            if session_id != INVALID_SESSION_ID:
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)

    def reset(self) -> None:
        self.session_id, self.epoch, self._sent = INVALID_SESSION_ID, INITIAL_EPOCH, {}


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
