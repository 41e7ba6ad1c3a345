"""pytest plugin (entry point `kbroker`): a real broker, or a real cluster, inside your tests.

    def test_roundtrip(kbroker_broker):
        p = confluent_kafka.Producer({"bootstrap.servers": kbroker_broker.bootstrap_servers})

    def test_failover(kbroker_cluster):
        p = confluent_kafka.Producer({"bootstrap.servers": kbroker_cluster.bootstrap_servers,
                                      "acks": "all"})
        ...
        kbroker_cluster.kill(1)          # SIGKILL broker 1; restart(1) brings it back

`kbroker_broker` is a started embedded Broker on 127.0.0.1 with a free port and
its data in the test's tmp_path, stopped (gracefully) after the test. It uses
`group.initial.rebalance.delay.ms=0` so consumer groups form without the 3 s
wait. `kbroker_config` (a dict of Kafka keys) can be overridden per module to
change settings.

`kbroker_cluster` is a started kbroker.Cluster: a real ZooKeeper (Debian's `zookeeper`
package, which must be installed: `kbroker cluster up` or scripts/bootstrap test install
it) and `kbroker_cluster_size` broker processes (3 by default, node ids 1..N) on
127.0.0.1, with their data in the test's tmp_path; start() has returned, so every broker
sees every other one and a controller. After the test every broker gets SIGTERM (a
controlled shutdown), then ZooKeeper; all are signalled by PID. `kbroker_cluster_config`
(Kafka keys for every broker, e.g. {"min.insync.replicas": "2"}) and
`kbroker_cluster_size` can be overridden like `kbroker_config`. A cluster takes a few
seconds to start: share one per module with a module-scoped fixture of your own
(`Cluster(brokers=3, directory=tmp_path_factory.mktemp("cluster")).start()`) when the
tests do not disturb it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.cluster.local_cluster import Cluster


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    """Extra broker settings for `kbroker_broker` (override this fixture to change them)."""
    return {}


@pytest.fixture
def kbroker_broker(tmp_path: Path, kbroker_config: dict[str, str]) -> Iterator[Broker]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "kbroker-logs"),
        "group.initial.rebalance.delay.ms": "0",
        **kbroker_config,
    }
    broker = Broker(props)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kbroker_cluster_size() -> int:
    """How many brokers `kbroker_cluster` starts (override this fixture to change it)."""
    return 3


@pytest.fixture
def kbroker_cluster_config() -> dict[str, str]:
    """Extra settings for every broker of `kbroker_cluster` (override to change them)."""
    return {}


@pytest.fixture
def kbroker_cluster(tmp_path: Path, kbroker_cluster_size: int,
                    kbroker_cluster_config: dict[str, str]) -> Iterator[Cluster]:
    cluster = Cluster(brokers=kbroker_cluster_size, directory=tmp_path / "kbroker-cluster",
                      overrides=kbroker_cluster_config)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
