"""`any_broker`: one test body against the single broker and the cluster (uvloop's mixins,
tansu's one scenario per engine), for what must behave alike in both.

The fixture is module-scoped and parametrized: `single` is an in-process Broker (node 0),
`cluster` three `kbroker serve` processes (nodes 1-3) on a ZooKeeper of their own
(kbroker.Cluster), each started once per module that uses it and stopped after it (the
cluster's processes by PID). The `single` param is marked `integration`, the `cluster` param `cluster`, so
tests/tiers.py puts each in its tier (`scripts/test integration` runs the first,
`scripts/test cluster` the second).

Both yield an AnyBroker: the bootstrap servers, the broker ids, and the few operations the
scenarios need (an AdminClient, creating a topic and waiting until every broker serves
it). Where the two modes differ on purpose (a replication factor above one needs as many
brokers), a test reads it from the AnyBroker's attributes (`max_replication_factor`),
never from the mode's name. Each test makes topics and groups
of its own (`fresh`): the broker is shared by the module. A test module takes the fixture
by importing `any_broker_fixture` (registered under the name `any_broker`), so that no
conftest needs to change:

    from .any_broker import AnyBroker, any_broker_fixture, fresh  # noqa: F401 - a fixture

    def test_x(any_broker: AnyBroker) -> None:
        name = any_broker.create_topic(fresh("x"), rf=any_broker.max_replication_factor)

Owns: the broker or cluster it started, for the module's lifetime.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker import Broker
from kbroker.cluster.local_cluster import Cluster
from tests.cluster.support import wait_until

# what both modes are given, so they differ in nothing but their brokers
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
            "auto.create.topics.enable": "false"}


@dataclass(frozen=True)
class AnyBroker:
    """The broker (or brokers) a test body runs against; see the module docstring."""

    mode: str  # "single" | "cluster": for ids and messages, not for assertions
    bootstrap_servers: str
    broker_ids: tuple[int, ...]

    @property
    def max_replication_factor(self) -> int:
        """The largest replication factor a topic can have here (one replica a broker)."""
        return len(self.broker_ids)

    def admin(self) -> AdminClient:
        """A new AdminClient: keep it until its futures' results are in."""
        return AdminClient({"bootstrap.servers": self.bootstrap_servers})

    def create_topic(self, name: str, partitions: int = 1, rf: int | None = None,
                     config: Mapping[str, str] | None = None) -> str:
        """Create `name` (`rf`: all the brokers by default) and wait until each broker serves
        its metadata with a leader for every partition; returns `name`."""
        topic = NewTopic(name, partitions, rf or self.max_replication_factor,
                         config=dict(config or {}))
        admin = self.admin()  # held until the result: a client destroyed fails its futures
        for future in admin.create_topics([topic], operation_timeout=30,
                                          request_timeout=40).values():
            future.result(timeout=60)
        self.wait_for_leaders(name, partitions)
        return name

    def wait_for_leaders(self, name: str, partitions: int) -> None:
        """Until every broker lists `partitions` partitions of `name`, each with a leader."""
        def served() -> bool:
            for server in self.bootstrap_servers.split(","):
                try:
                    md = AdminClient({"bootstrap.servers": server}).list_topics(name, timeout=10)
                except KafkaException:
                    return False
                t = md.topics.get(name)
                if (t is None or t.error is not None or len(t.partitions) != partitions
                        or any(p.leader < 0 for p in t.partitions.values())):
                    return False
            return True
        wait_until(served, f"every broker to serve {name} with {partitions} partitions")


def fresh(prefix: str) -> str:
    """A name no other test of the module uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _single(directory: Path) -> Iterator[AnyBroker]:
    broker = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(directory / "logs"),
                     **SETTINGS})
    broker.start()
    try:
        yield AnyBroker("single", broker.bootstrap_servers, (broker.config.node_id,))
    finally:
        broker.stop()


def _cluster(directory: Path) -> Iterator[AnyBroker]:
    cluster = Cluster(brokers=3, directory=directory, overrides=SETTINGS).start()
    try:
        yield AnyBroker("cluster", cluster.bootstrap_servers, tuple(sorted(cluster.brokers)))
    finally:
        cluster.stop()


@pytest.fixture(scope="module", params=[
    pytest.param("single", marks=pytest.mark.integration),
    pytest.param("cluster", marks=pytest.mark.cluster)], name="any_broker")
def any_broker_fixture(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyBroker]:
    start = _single if request.param == "single" else _cluster
    yield from start(tmp_path_factory.mktemp(request.param))
