"""The ZooKeeper harness: a real server that kazoo talks to, stopped by its PID."""

from __future__ import annotations

import os

from kazoo.client import KazooClient

from kbroker.cluster.zookeeper_server import ZooKeeperServer, four_letter_word


def test_kazoo_reads_what_it_wrote(zookeeper: ZooKeeperServer) -> None:
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    client.start(timeout=15)
    try:
        client.create("/harness/ephemeral", b"hello", ephemeral=True, makepath=True)
        data, stat = client.get("/harness/ephemeral")
        assert data == b"hello"
        assert stat.ephemeralOwner == client.client_id[0]
    finally:
        client.stop()
        client.close()
    assert "Mode: standalone" in four_letter_word("127.0.0.1", zookeeper.port or 0, "srvr")


def test_stop_ends_the_jvm_and_frees_the_port(tmp_path: object) -> None:
    server = ZooKeeperServer(str(tmp_path)).start()
    pid, port = server.pid, server.port
    assert pid is not None and port is not None
    assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
    server.stop()
    assert not server.is_running()
    assert not os.path.exists(f"/proc/{pid}") or _is_zombie_free(pid)
    assert four_letter_word("127.0.0.1", port, "ruok") == ""


def _is_zombie_free(pid: int) -> bool:
    """The PID may have been reused by now; it must at least not be our JVM any more."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"QuorumPeerMain" not in f.read()
    except OSError:
        return True
