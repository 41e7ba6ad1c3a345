"""What the cluster tests share: clusters on the session's ZooKeeper, topic creation, who
leads what (asked of the brokers over the Kafka protocol), an idempotent acks=all
producer running in a thread, and reading a partition back."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.messages.describe_configs import DescribeConfigsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kbroker.server.config_describe import ResourceType
from tests.integration.groups_support import set_group_configs

DEADLINE_S = 60.0


def new_cluster(zookeeper: ZooKeeperServer, directory: Path, brokers: int = 3,
                overrides: Mapping[str, str] | None = None, operations: bool = False) -> Cluster:
    """A started cluster on the session's ZooKeeper, in a chroot of its own (`operations`:
    each broker's operations listener, /metrics, on)."""
    chroot = f"/kbroker-{uuid.uuid4().hex[:8]}"
    return Cluster(brokers, directory, overrides, zookeeper=zookeeper, chroot=chroot,
                   operations=operations).start()


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE_S,
               interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def create_topic(cluster: Cluster, name: str, partitions: int = 1, rf: int = 3,
                 config: Mapping[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=dict(config or {}))],
                                  operation_timeout=30, request_timeout=40)
    for f in futures.values():
        f.result(timeout=60)


def metadata(cluster: Cluster, broker_id: int | None = None, topics: list[str] | None = None
             ) -> MetadataResponse | None:
    """Metadata as one running broker (any, by default) answers it; None if none answers."""
    candidates = [cluster.brokers[broker_id]] if broker_id is not None else [
        b for b in cluster.brokers.values() if b.is_running()]
    for b in candidates:
        try:
            with BrokerConnection(b.host, b.port, timeout_s=5.0) as conn:
                request = MetadataRequest(topics=None if topics is None else [
                    MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                    allow_auto_topic_creation=False)
                response: MetadataResponse = conn.request(request, 12)
                return response
        except (KafkaClientError, OSError):
            continue
    return None


def ask(cluster: Cluster, broker_id: int, request: object, version: int) -> Any:
    """One broker's answer to a request over the Kafka protocol; None if it does not answer."""
    b = cluster.brokers[broker_id]
    try:
        with BrokerConnection(b.host, b.port, timeout_s=5.0) as conn:
            return conn.request(request, version)
    except (KafkaClientError, OSError):
        return None


def ask_any(cluster: Cluster, request: object, version: int) -> Any:
    """The answer of the first running broker that answers; None if none does."""
    for broker_id, b in cluster.brokers.items():
        if b.is_running() and (r := ask(cluster, broker_id, request, version)) is not None:
            return r
    return None


def group_coordinator(cluster: Cluster, group: str) -> int | None:
    """The group id's coordinator, as a running broker answers FindCoordinator (key type 0)."""
    r = ask_any(cluster, FindCoordinatorRequest(key=group, key_type=0), 3)
    return int(r.node_id) if r is not None and r.error_code == 0 else None


@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_view(cluster: Cluster, topic: str, partition: int = 0,
                   broker_id: int | None = None) -> PartitionView | None:
    md = metadata(cluster, broker_id, [topic])
    if md is None:
        return None
    for t in md.topics:
        if t.name == topic:
            for p in t.partitions:
                if p.partition_index == partition:
                    return PartitionView(p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                                         tuple(p.isr_nodes))
    return None


def wait_for_leader(cluster: Cluster, topic: str, partition: int = 0,
                    not_on: int | None = None) -> PartitionView:
    def found() -> PartitionView | None:
        v = partition_view(cluster, topic, partition)
        if v is None or v.leader < 0 or v.leader == not_on:
            return None
        return v
    view = wait_until(found, f"a leader of {topic}-{partition}")
    assert isinstance(view, PartitionView)
    return view


def wait_for_isr(cluster: Cluster, topic: str, partition: int, isr: set[int]) -> PartitionView:
    def found() -> PartitionView | None:
        v = partition_view(cluster, topic, partition)
        return v if v is not None and set(v.isr) == isr else None
    view = wait_until(found, f"the ISR of {topic}-{partition} to be {sorted(isr)}")
    assert isinstance(view, PartitionView)
    return view


@dataclass
class ProducerRun:
    """An idempotent acks=all producer sending "0", "1", ... to one partition from a thread;
    `acked` holds the values in the order their deliveries were reported."""

    cluster: Cluster
    topic: str
    partition: int = 0
    config: Mapping[str, object] = field(default_factory=dict)
    acked: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._producer = Producer({"bootstrap.servers": self.cluster.bootstrap_servers,
                                   "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                   "message.timeout.ms": 120000, **self.config})

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._producer.produce(self.topic, str(self.sent).encode(), partition=self.partition,
                                       on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                self._producer.poll(0.05)
                continue
            if self.sent % 50 == 0:
                self._producer.poll(0)
                time.sleep(0.002)
        self._producer.flush(120)

    def start(self) -> ProducerRun:
        self._thread.start()
        return self

    def wait_acked(self, count: int, timeout: float = DEADLINE_S) -> float:
        """Until `count` more deliveries than now; the seconds it took."""
        target = len(self.acked) + count
        started = time.monotonic()
        wait_until(lambda: len(self.acked) >= target, f"{count} more acknowledged records", timeout,
                   interval=0.01)
        return time.monotonic() - started

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)


def read_partition(cluster: Cluster, topic: str, partition: int = 0, expect: int | None = None,
                   timeout: float = DEADLINE_S) -> list[int]:
    """Every record's value (as an int) from offset 0 to the high watermark, in order."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(topic, partition, 0)])
    values: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if expect is None or len(values) >= expect:
                            return values
                    continue
                values.append(int(m.value()))
    finally:
        consumer.close()
    return values


def leaders(cluster: Cluster, topic: str, partitions: int) -> Iterator[int]:
    for p in range(partitions):
        yield wait_for_leader(cluster, topic, p).leader


def described(cluster: Cluster, broker_id: int, group: str) -> dict[str, tuple[str, int]]:
    """The group's configs as one broker answers DescribeConfigs: name -> (value, source)."""
    r = ask(cluster, broker_id, DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=ResourceType.GROUP, resource_name=group, configuration_keys=None)]), 4)
    if r is None:
        return {}
    result = r.results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def shows(cluster: Cluster, broker_id: int, group: str, value: str) -> bool:
    """Whether the broker describes the group's share.auto.offset.reset as `value`."""
    return described(cluster, broker_id, group).get("share.auto.offset.reset", (None, 0))[0] == value


def start_at_earliest(cluster: Cluster, group: str) -> None:
    """The group's share.auto.offset.reset set to earliest (IncrementalAlterConfigs through
    confluent-kafka), once every running broker describes it so."""
    set_group_configs(cluster.bootstrap_servers, group, **{"share.auto.offset.reset": "earliest"})
    for b, broker in cluster.brokers.items():
        if broker.is_running():
            wait_until(lambda b=b: shows(cluster, b, group, "earliest"),
                       f"broker {b} to see the group config")
