"""A broker whose ZooKeeper is gone for good keeps serving, and stops on SIGTERM.

kazoo wakes its connection thread by writing a byte to a socketpair for each request, and
that thread drains it only while connected. The broker's liveness probe (one `exists` every
tenth of the session timeout) and every other request queued in kazoo during the outage
filled that socket's buffer after a few hundred, and the next write blocked the broker's
event loop: no client was served, and SIGTERM could not stop it (found: a broker still
hung 1.5 h after its ZooKeeper died). Requests now wait for a connection before they reach
kazoo. On the way out, what the broker still asks ZooKeeper (a controller deletes its
/controller znode) waits at most zookeeper.connection.timeout.ms, as Kafka's
ZooKeeperClient waits for a connection."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbroker.client.connection import BrokerConnection
from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.messages.metadata import MetadataRequest

from .support import wait_until

pytestmark = pytest.mark.timeout(240)

SESSION_TIMEOUT_MS = 1000  # the probe: 10 requests a second, hundreds within the outage
OUTAGE_S = 45


def test_a_broker_serves_and_stops_long_after_zookeeper_died(tmp_path: Path) -> None:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                 "controlled.shutdown.max.retries": "0", "request.timeout.ms": "10000"}
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper, Cluster(
            1, tmp_path / "cluster", overrides, zookeeper=zookeeper) as cluster:
        broker = cluster.brokers[1]  # the only broker: the controller
        zookeeper.kill()
        wait_until(lambda: "fencing this broker" in broker.output(), "the broker to fence itself")
        deadline = time.monotonic() + OUTAGE_S
        with BrokerConnection(broker.host, broker.port, timeout_s=10.0) as conn:
            while time.monotonic() < deadline:  # still answering, all along the outage
                conn.request(MetadataRequest(topics=None), 1)
                time.sleep(1.0)
        code = broker.stop(timeout=90)  # SIGTERM; SIGKILL (-9) if it has not exited by then
        output = broker.output()
        assert code == 0, output[-3000:]
        assert "resigns as controller" in output
