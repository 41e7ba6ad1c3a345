"""The ZooKeeper harness: a real server that kazoo talks to, stopped by its PID."""

from __future__ import annotations

import os
import socket
import struct
import time

from kazoo.client import KazooClient

from kbroker.cluster.zookeeper_server import (
    EPHEMERAL_PORTS,
    LOWEST_PORT,
    TICK_TIME_MS,
    ZooKeeperServer,
    four_letter_word,
    free_port,
)


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


def test_sessions_expire_on_a_tenth_of_a_second_tick(zookeeper: ZooKeeperServer) -> None:
    """ZooKeeper expires a session at the first tick after its timeout, and grants no
    session shorter than two ticks: a 300 ms session granted as asked shows a tick of at
    most 150 ms (with ZooKeeper's usual 500-2000 ms it would be raised to 1-4 s).

    ConnectRequest (ZooKeeper's jute encoding, big-endian, length-prefixed):
    protocolVersion int32, lastZxidSeen int64, timeOut int32, sessionId int64, passwd
    (int32 length + bytes); ConnectResponse: protocolVersion int32, timeOut int32,
    sessionId int64, passwd."""
    body = struct.pack(">iqiqi16s", 0, 0, 300, 0, 16, bytes(16))
    answer = b""
    for _attempt in range(50):  # a server that has just said imok may not take sessions yet
        with socket.create_connection(("127.0.0.1", zookeeper.port or 0), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            answer = b""
            while len(answer) < 4 + 4 + 4 + 8 and (chunk := sock.recv(64)):
                answer += chunk
        if len(answer) >= 20:
            break
        time.sleep(0.1)
    assert len(answer) >= 20, "ZooKeeper answered no ConnectRequest"
    _length, _version, granted, session_id = struct.unpack(">iiiq", answer[:20])
    assert session_id != 0
    assert granted == 300
    assert TICK_TIME_MS * 2 <= 300


def test_free_ports_are_below_the_ephemeral_range() -> None:
    """A port the kernel hands out by bind(0) may go to an outgoing connection before the
    server binds it; ports picked below the ephemeral range cannot (a broker of a test once
    failed to start with "Address already in use" on such a port)."""
    low = int(EPHEMERAL_PORTS.read_text().split()[0])
    for _ in range(20):
        port = free_port()
        assert LOWEST_PORT <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
