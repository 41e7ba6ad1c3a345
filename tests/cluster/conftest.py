"""Cluster tests: one real ZooKeeper (Debian's package) per test session, i.e. per
pytest-xdist worker, stopped by its PID at the session's end. Each cluster on it has a
chroot of its own (`zookeeper.connect=127.0.0.1:PORT/kbroker-<unique>`, support.new_cluster),
so tests share the JVM, never a znode. A test that stops, pauses, cuts or reconfigures
ZooKeeper itself starts its own ZooKeeperServer instead of taking this fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kbroker.cluster.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
