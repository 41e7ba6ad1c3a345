"""A broker's registration in ZooKeeper: it survives a connection lost under it (the
broker retries, as Kafka retries its ZooKeeper requests until connected, instead of
failing), and no client request is served before it.

Both made to happen for sure: a broker restarted right after a SIGKILL waits for
ZooKeeper to expire its previous session, retrying its create. To lose the connection,
ZooKeeper is frozen (SIGSTOP, by PID) until the broker's client drops it, which fails the
create in flight."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.messages.produce import ProduceRequest

from .support import wait_until

pytestmark = pytest.mark.timeout(180)


class Restarted:
    """A one-broker cluster whose broker was SIGKILLed and started again at once: it is
    waiting for ZooKeeper to expire its previous session."""

    def __init__(self, zookeeper: ZooKeeperServer, cluster: Cluster) -> None:
        self.zookeeper = zookeeper
        self.cluster = cluster
        self.broker = cluster.brokers[1]
        cluster.kill(1)
        self.before = len(self.broker.output())
        self.broker.start()
        wait_until(lambda: self.logged("still registered by an earlier session"),
                   "the broker to wait for its earlier session")

    def logged(self, text: str) -> bool:
        """Whether the restarted broker logged `text` (it must still run)."""
        output = self.broker.output()[self.before:]
        assert self.broker.is_running(), f"the broker exited:\n{output[-3000:]}"
        return text in output


@contextmanager
def restarted(tmp_path: Path) -> Iterator[Restarted]:
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper, Cluster(
            1, tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        yield Restarted(zookeeper, cluster)


def test_registration_retries_when_the_connection_drops(tmp_path: Path) -> None:
    with restarted(tmp_path) as r:
        assert r.zookeeper.pid is not None
        os.kill(r.zookeeper.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: r.logged("Connection dropped"),
                       "the broker's client to drop the connection")
        finally:
            os.kill(r.zookeeper.pid, signal.SIGCONT)
        wait_until(lambda: r.logged("registered broker 1 in ZooKeeper"), "the registration", 60)
        r.cluster.wait_formed(60)
        assert r.logged("retrying")


def test_no_request_is_served_before_the_broker_is_registered(tmp_path: Path) -> None:
    """As Kafka enables request processing at the end of its startup: a broker that waits
    for ZooKeeper to expire its previous session knows nothing of the cluster yet, and
    answered Metadata with LEADER_NOT_AVAILABLE for existing topics (trying to create
    them again) and Produce with UNKNOWN_TOPIC_OR_PARTITION, which sent librdkafka off
    track. Its listener now takes connections and leaves them waiting until then."""
    with restarted(tmp_path) as r:
        try:  # the connection's first request, ApiVersions, waits too
            with BrokerConnection(r.broker.host, r.broker.port, timeout_s=1.0) as conn:
                conn.request(ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]), 9)
                answered = True
        except KafkaClientError:
            answered = False  # connected, no answer: what the broker should do now
        waiting = not r.logged("registered broker 1 in ZooKeeper")
        assert not (waiting and answered), "answered before it registered"
        r.cluster.wait_formed(60)
