"""Starting a cluster broker: an unreachable ZooKeeper is a clear error after
zookeeper.connection.timeout.ms naming the address; a log dir of another cluster is
refused; the cluster id is ZooKeeper's; a single broker never imports kazoo."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbroker.cluster.zookeeper_server import ZooKeeperServer, free_port
from kbroker.metadata.meta_properties import read_meta_properties

from .support import metadata, new_cluster

pytestmark = pytest.mark.timeout(120)


def _serve(*overrides: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "kbroker", "serve"]
    for o in overrides:
        args += ["--override", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def test_an_unreachable_zookeeper_is_a_clear_error(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    done = _serve(f"zookeeper.connect=127.0.0.1:{port}/kbroker", "zookeeper.connection.timeout.ms=2000",
                  f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0")
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert f"cannot connect to ZooKeeper at 127.0.0.1:{port}" in done.stderr
    assert "zookeeper.connection.timeout.ms (2000 ms)" in done.stderr
    assert "Traceback" not in done.stderr
    print(f"gave up after {elapsed:.1f} s")


def test_cluster_id_comes_from_zookeeper_and_other_clusters_dirs_are_refused(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    cluster = new_cluster(zookeeper, tmp_path / "c1", brokers=1)
    try:
        md = metadata(cluster)
        assert md is not None and md.cluster_id
        stored = read_meta_properties(str(cluster.brokers[1].log_dir))
        assert stored is not None and stored["cluster.id"] == md.cluster_id
        log_dir = cluster.brokers[1].log_dir
    finally:
        cluster.stop()
    other = f"{zookeeper.connect_string}/another-{free_port()}"  # a new chroot: a new cluster
    done = _serve(f"zookeeper.connect={other}", f"log.dirs={log_dir}", "node.id=1",
                  "listeners=PLAINTEXT://127.0.0.1:0")
    assert done.returncode != 0
    assert "belongs to another cluster" in done.stderr or "different clusters" in done.stderr, done.stderr


def test_a_single_broker_does_not_load_the_zookeeper_client(tmp_path: Path) -> None:
    code = ("import sys, kbroker.broker, kbroker.server.api_table, kbroker.server.listener; "
            "print('kazoo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
