"""A broker's registration in ZooKeeper survives a connection lost under it: the broker
retries (as Kafka retries its ZooKeeper requests until connected) instead of failing.

Made to happen for sure: a broker restarted right after a SIGKILL waits for ZooKeeper to
expire its previous session, retrying its create; ZooKeeper is frozen (SIGSTOP, by PID)
until the broker's client drops the connection, which fails the create in flight."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer

from .support import wait_until

pytestmark = pytest.mark.timeout(180)


def test_registration_retries_when_the_connection_drops(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper, Cluster(
            1, tmp_path / "cluster", zookeeper=zookeeper) as cluster:
        broker = cluster.brokers[1]
        cluster.kill(1)
        before = len(broker.output())
        broker.start()

        def logged(text: str) -> bool:
            assert broker.is_running(), f"the broker exited:\n{broker.output()[before:][-3000:]}"
            return text in broker.output()[before:]

        wait_until(lambda: logged("still registered by an earlier session"),
                   "the broker to wait for its earlier session")
        assert zookeeper.pid is not None
        os.kill(zookeeper.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: logged("Connection dropped"), "the broker's client to drop the connection")
        finally:
            os.kill(zookeeper.pid, signal.SIGCONT)
        wait_until(lambda: logged("registered broker 1 in ZooKeeper"), "the registration", 60)
        cluster.wait_formed(60)
        assert "retrying" in broker.output()[before:]
