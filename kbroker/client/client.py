"""A small synchronous Kafka client: Metadata, ListOffsets, Fetch, Produce, InitProducerId.

It is what kbroker.spark needs and no more: no consumer groups, no background
threads, no buffering. Fetch hands back each partition's records as raw wire bytes
(a memoryview into the response), for callers that decode record batches
themselves; Produce sends record batches the caller built.

Any Kafka-compatible broker will do: versions are negotiated per connection
(ApiVersions) within the ranges below, which every broker from Kafka 2.1 to 4.x
speaks. Fetch stays at v12 or lower so requests name topics rather than topic ids.

Errors that a metadata refresh can cure (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION while a topic is being created...)
are retried a bounded number of times; others raise KafkaClientError. Connections are
secured as `security` says (kbroker.client.sasl: TLS, SASL PLAIN or SCRAM); a failed
authentication raises AuthenticationError at once, never retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kbroker.client.connection import AuthenticationError, BrokerConnection, KafkaClientError
from kbroker.client.sasl import ConnectionSecurity
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.init_producer_id import InitProducerIdRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.produce import ProduceRequest

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AuthenticationError",
    "ClusterMetadata",
    "ConnectionSecurity",
    "FetchedPartition",
    "KafkaClient",
    "KafkaClientError",
    "PendingProduce",
    "TopicPartition",
]

V = TypeVar("V")

# ListOffsets "timestamps" that ask for the log start offset / the high watermark
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

METADATA_VERSIONS = (1, 12)
LIST_OFFSETS_VERSIONS = (1, 9)
FETCH_VERSIONS = (4, 12)
PRODUCE_VERSIONS = (3, 11)
INIT_PRODUCER_ID_VERSIONS = (0, 4)

RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NETWORK_EXCEPTION,
})


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    # topic -> partition -> leader id (-1: none); topics with an error map to {}
    topics: dict[str, dict[int, int]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)

    def partitions(self, topic: str) -> list[int]:
        return sorted(self.topics.get(topic, {}))

    def leader(self, tp: TopicPartition) -> int:
        return self.topics.get(tp.topic, {}).get(tp.partition, -1)


@dataclass
class FetchedPartition:
    """One partition of a Fetch response; `records` holds raw record batches."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: Any  # memoryview into the response (None: no records)
    last_stable_offset: int = -1
    # read_committed: the aborted transactions overlapping `records`, (producer id, first offset)
    aborted_transactions: list[tuple[int, int]] | None = None


class KafkaClient:
    """Connections to the brokers of one cluster, opened lazily; not thread-safe."""

    def __init__(self, bootstrap_servers: str, client_id: str = "kbroker-client",
                 request_timeout_ms: int = 30000, retries: int = 20,
                 retry_backoff_ms: int = 100,
                 security: ConnectionSecurity | None = None) -> None:
        self.security = security
        self.bootstrap = [_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap servers")
        self.client_id = client_id
        self.timeout_s = request_timeout_ms / 1000.0
        self.retries = retries
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.cluster = ClusterMetadata()
        self._connections: dict[int, BrokerConnection] = {}
        self._any: BrokerConnection | None = None

    def close(self) -> None:
        for conn in {id(c): c for c in [*self._connections.values(), self._any] if c}.values():
            conn.close()
        self._connections.clear()
        self._any = None

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # connections

    def _any_connection(self) -> BrokerConnection:
        if self._any is not None:
            return self._any
        errors = []
        for host, port in [*self.bootstrap, *self.cluster.brokers.values()]:
            try:
                self._any = BrokerConnection(host, port, self.client_id, self.timeout_s,
                                             self.security)
                return self._any
            except AuthenticationError:
                raise
            except KafkaClientError as e:
                errors.append(str(e))
        raise KafkaClientError("no broker reachable: " + "; ".join(errors),
                               ErrorCode.NETWORK_EXCEPTION)

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            address = self.cluster.brokers.get(node_id)
            if address is None:
                raise KafkaClientError(f"unknown broker {node_id}", ErrorCode.LEADER_NOT_AVAILABLE)
            conn = BrokerConnection(*address, self.client_id, self.timeout_s, self.security)
            self._connections[node_id] = conn
        return conn

    def _drop(self, conn: BrokerConnection) -> None:
        conn.close()
        for node_id, c in list(self._connections.items()):
            if c is conn:
                del self._connections[node_id]
        if self._any is conn:
            self._any = None

    def _backoff(self, attempt: int, what: str, error: str) -> None:
        if attempt >= self.retries:
            raise KafkaClientError(f"{what}: {error} after {attempt} retries")
        time.sleep(min(self.retry_backoff_s * (1 + attempt), 1.0))

    # Metadata

    def refresh_metadata(self, topics: Iterable[str] | None = None,
                         allow_auto_topic_creation: bool = False) -> ClusterMetadata:
        """Metadata of `topics` (None: every topic), merged into self.cluster."""
        for attempt in range(self.retries + 1):
            conn = self._any_connection()
            try:
                version = conn.version_for(ApiKey.METADATA, *METADATA_VERSIONS)
                names = None if topics is None else list(topics)
                request = MetadataRequest(
                    topics=None if names is None else
                    [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                    allow_auto_topic_creation=allow_auto_topic_creation)
                response = conn.request(request, version)
                break
            except AuthenticationError:
                raise
            except KafkaClientError as e:
                self._drop(conn)
                self._backoff(attempt, "Metadata", str(e))
        cluster = self.cluster
        cluster.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            if t.error_code != ErrorCode.NONE:
                cluster.topic_errors[t.name] = t.error_code
                cluster.topics[t.name] = {}
            else:
                cluster.topic_errors.pop(t.name, None)
                cluster.topics[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
        return cluster

    def topic_partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Partitions of existing topics, waiting (bounded) for leaders; missing topics: []."""
        names = list(topics)
        for attempt in range(self.retries + 1):
            cluster = self.refresh_metadata(names)
            pending = [n for n in names if cluster.topic_errors.get(n) in RETRIABLE - {
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
                or any(leader < 0 for leader in cluster.topics.get(n, {}).values())]
            if not pending:
                return {n: cluster.partitions(n) for n in names}
            self._backoff(attempt, "Metadata", f"no leader for {pending}")
        raise AssertionError("unreachable")

    def all_topics(self) -> list[str]:
        return sorted(self.refresh_metadata(None).topics)

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        missing = [tp for tp in tps if self.cluster.leader(tp) < 0]
        if missing:
            self.refresh_metadata({tp.topic for tp in missing})
        groups: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            groups.setdefault(self.cluster.leader(tp), []).append(tp)
        return groups

    def _per_leader(self, what: str, items: Mapping[TopicPartition, V],
                    send: Callable[[int, dict[TopicPartition, V]],
                                   dict[TopicPartition, tuple[int, int]]],
                    ) -> dict[TopicPartition, int]:
        """Send `items` to their partitions' leaders (one request per leader) and collect
        the answers (error code, number); retriable failures are retried (bounded)
        after a metadata refresh, others raise."""
        result: dict[TopicPartition, int] = {}
        todo = dict(items)
        for attempt in range(self.retries + 1):
            retry: dict[TopicPartition, V] = {}
            last_error = ""
            for leader, tps in self._by_leader(todo).items():
                if leader < 0:
                    retry.update((tp, todo[tp]) for tp in tps)
                    last_error = "no leader"
                    continue
                try:
                    answers = send(leader, {tp: todo[tp] for tp in tps})
                except AuthenticationError:
                    raise
                except KafkaClientError as e:
                    self.forget_leader(leader)
                    retry.update((tp, todo[tp]) for tp in tps)
                    last_error = str(e)
                    continue
                for tp, (code, value) in answers.items():
                    if code == ErrorCode.NONE:
                        result[tp] = value
                    elif code in RETRIABLE:
                        retry[tp] = todo[tp]
                        last_error = f"{tp}: {error_name(code)}"
                    else:
                        raise KafkaClientError(f"{what} {tp}: {error_name(code)}", code)
            if not retry:
                return result
            todo = retry
            self.refresh_metadata({tp.topic for tp in todo})
            self._backoff(attempt, what, last_error)
        raise AssertionError("unreachable")

    # ListOffsets

    def list_offsets(self, timestamps: Mapping[TopicPartition, int],
                     isolation_level: int = 0) -> dict[TopicPartition, int]:
        """For each partition: the first offset whose timestamp is >= the given one, the
        log start offset (EARLIEST_TIMESTAMP) or the high watermark (LATEST_TIMESTAMP).
        A timestamp after every record gives -1, as Kafka's ListOffsets does."""
        return self._per_leader("ListOffsets", timestamps,
                                lambda leader, part: self._list_offsets_on(leader, part,
                                                                           isolation_level))

    def _list_offsets_on(self, leader: int, timestamps: Mapping[TopicPartition, int],
                         isolation_level: int) -> dict[TopicPartition, tuple[int, int]]:
        conn = self.connection(leader)
        version = conn.version_for(ApiKey.LIST_OFFSETS, *LIST_OFFSETS_VERSIONS)
        topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
        for tp, ts in timestamps.items():
            topics.setdefault(tp.topic, []).append(
                ListOffsetsRequest.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts))
        response = conn.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=n, partitions=ps)
                    for n, ps in topics.items()]), version)
        return {TopicPartition(t.name, p.partition_index): (p.error_code, p.offset)
                for t in response.topics for p in t.partitions}

    # Fetch

    def fetch_request(self, offsets: Mapping[TopicPartition, int], partition_max_bytes: int,
                      max_wait_ms: int = 0, min_bytes: int = 1,
                      max_bytes: int = 64 << 20, isolation_level: int = 0) -> FetchRequest:
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
        return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                            max_bytes=max_bytes, isolation_level=isolation_level,
                            topics=[FetchRequest.FetchTopic(topic=n, partitions=ps)
                                    for n, ps in topics.items()])

    def send_fetch(self, leader: int, request: FetchRequest) -> None:
        """Send a Fetch to `leader` without waiting (pipelining); see receive_fetch()."""
        conn = self.connection(leader)
        conn.send(request, conn.version_for(ApiKey.FETCH, *FETCH_VERSIONS))

    def receive_fetch(self, leader: int) -> dict[TopicPartition, FetchedPartition]:
        response: FetchResponse = self.connection(leader).receive()
        if response.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"Fetch: {error_name(response.error_code)}",
                                   response.error_code)
        return {TopicPartition(t.topic, p.partition_index): FetchedPartition(
                    p.error_code, p.high_watermark, p.log_start_offset, p.records, p.last_stable_offset,
                    None if p.aborted_transactions is None else
                    [(a.producer_id, a.first_offset) for a in p.aborted_transactions])
                for t in response.responses for p in t.partitions}

    def leader_for(self, tp: TopicPartition) -> int:
        """The partition's leader, refreshing metadata (bounded) until there is one."""
        for attempt in range(self.retries + 1):
            leader = self.cluster.leader(tp)
            if leader >= 0 and leader in self.cluster.brokers:
                return leader
            self.refresh_metadata([tp.topic])
            if self.cluster.leader(tp) >= 0:
                continue
            self._backoff(attempt, "Metadata", f"no leader for {tp}")
        raise AssertionError("unreachable")

    def forget_leader(self, leader: int) -> None:
        """Close the connection to `leader` (after an error) and refresh on next use."""
        conn = self._connections.pop(leader, None)
        if conn is not None:
            self._drop(conn)
        self.cluster.topics = {t: {p: (-1 if lead == leader else lead) for p, lead in ps.items()}
                               for t, ps in self.cluster.topics.items()}

    # Produce

    def init_producer_id(self) -> tuple[int, int]:
        """A producer id and epoch for an idempotent producer (no transactional id), from
        any broker; retriable errors (COORDINATOR_LOAD_IN_PROGRESS...) are retried."""
        retriable = RETRIABLE | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                 ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 ErrorCode.NOT_COORDINATOR}
        for attempt in range(self.retries + 1):
            conn = self._any_connection()
            try:
                version = conn.version_for(ApiKey.INIT_PRODUCER_ID, *INIT_PRODUCER_ID_VERSIONS)
                response = conn.request(InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=-1), version)
            except AuthenticationError:
                raise
            except KafkaClientError as e:
                self._drop(conn)
                self._backoff(attempt, "InitProducerId", str(e))
                continue
            if response.error_code == ErrorCode.NONE:
                return response.producer_id, response.producer_epoch
            if response.error_code not in retriable:
                raise KafkaClientError(f"InitProducerId: {error_name(response.error_code)}",
                                       response.error_code)
            self._backoff(attempt, "InitProducerId", error_name(response.error_code))
        raise AssertionError("unreachable")

    def produce(self, batches: Mapping[TopicPartition, bytes | bytearray | memoryview],
                acks: int = -1, timeout_ms: int = 30000) -> dict[TopicPartition, int]:
        """Append one record batch (v2 wire bytes) per partition; returns base offsets
        (-1 with acks=0). Retriable errors are retried: at-least-once."""
        return self._per_leader("Produce", batches,
                                lambda leader, part: self._produce_on(leader, part, acks,
                                                                      timeout_ms))

    def _produce_on(self, leader: int, batches: Mapping[TopicPartition, bytes | bytearray | memoryview],
                    acks: int, timeout_ms: int) -> dict[TopicPartition, tuple[int, int]]:
        conn = self.connection(leader)
        version = conn.version_for(ApiKey.PRODUCE, *PRODUCE_VERSIONS)
        request = _produce_request(batches, acks, timeout_ms)
        if acks == 0:
            conn.send(request, version, expect_response=False)
            return {tp: (ErrorCode.NONE, -1) for tp in batches}
        return _produce_answers(conn.request(request, version))

    def send_produce(self, batches: Mapping[TopicPartition, bytes | bytearray | memoryview],
                     acks: int = -1, timeout_ms: int = 30000) -> PendingProduce:
        """produce() in two halves, so the caller works while the brokers append: the
        requests are sent now (one per leader), PendingProduce.wait() reads the answers
        and retries what failed, as produce() does. Wait before sending more to the same
        partitions: with one request in flight, retries keep the records in order."""
        pending = PendingProduce(self, dict(batches), acks, timeout_ms)
        for leader, tps in self._by_leader(batches).items():
            part = {tp: batches[tp] for tp in tps}
            if leader < 0:
                pending.failed.update(part)
                continue
            try:
                conn = self.connection(leader)
                conn.send(_produce_request(part, acks, timeout_ms),
                          conn.version_for(ApiKey.PRODUCE, *PRODUCE_VERSIONS),
                          expect_response=acks != 0)
            except AuthenticationError:
                raise
            except KafkaClientError:
                self.forget_leader(leader)
                pending.failed.update(part)
                continue
            pending.sent.append((leader, conn, part))
        return pending


@dataclass
class PendingProduce:
    """Produce requests sent by KafkaClient.send_produce(), their answers not yet read."""

    client: KafkaClient
    batches: dict[TopicPartition, Any]
    acks: int
    timeout_ms: int
    sent: list[tuple[int, BrokerConnection, dict[TopicPartition, Any]]] = field(default_factory=list)
    failed: dict[TopicPartition, Any] = field(default_factory=dict)

    def wait(self) -> dict[TopicPartition, int]:
        """Base offsets (-1 with acks=0); what failed is produced again (produce())."""
        result: dict[TopicPartition, int] = {}
        retry = dict(self.failed)
        for leader, conn, part in self.sent:
            if self.acks == 0:
                result.update((tp, -1) for tp in part)
                continue
            try:
                answers = _produce_answers(conn.receive())
            except AuthenticationError:
                raise
            except KafkaClientError:
                self.client.forget_leader(leader)
                retry.update(part)
                continue
            for tp, (code, offset) in answers.items():
                if code == ErrorCode.NONE:
                    result[tp] = offset
                elif code in RETRIABLE:
                    retry[tp] = part[tp]
                else:
                    raise KafkaClientError(f"Produce {tp}: {error_name(code)}", code)
        if retry:
            self.client.refresh_metadata({tp.topic for tp in retry})
            result.update(self.client.produce(retry, self.acks, self.timeout_ms))
        return result


def _produce_request(batches: Mapping[TopicPartition, bytes | bytearray | memoryview], acks: int,
                     timeout_ms: int) -> ProduceRequest:
    topics: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
    for tp, records in batches.items():
        topics.setdefault(tp.topic, []).append(
            ProduceRequest.PartitionProduceData(index=tp.partition, records=records))
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[ProduceRequest.TopicProduceData(name=n, partition_data=ps)
                                      for n, ps in topics.items()])


def _produce_answers(response: Any) -> dict[TopicPartition, tuple[int, int]]:
    return {TopicPartition(t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


def _host_port(server: str) -> tuple[str, int]:
    server = server.strip()
    for prefix in ("PLAINTEXT://", "plaintext://"):
        if server.startswith(prefix):
            server = server[len(prefix):]
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad bootstrap server {server!r} (want host:port)")
    return host.strip("[]"), int(port)
