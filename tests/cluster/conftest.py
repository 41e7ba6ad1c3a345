"""Cluster tests: a real ZooKeeper (Debian's package) per test module, stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kbroker.cluster.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
