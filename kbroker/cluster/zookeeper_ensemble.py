"""A ZooKeeper ensemble on one machine: N members of Debian's ZooKeeper, each a
foreground JVM (a ZooKeeperServer with a Quorum), for tests that lose a ZooKeeper server.

Layout under `directory`:

    zk-<id>/       one member's (zoo.cfg with the server.N lines, data/myid, zookeeper.log)

Every member listens on `host` with three ports of its own, chosen once and kept across
restarts: the client port (`connect_string` lists them all), the quorum port (followers
to the leader) and the leader election port. start() spawns every member and returns
once each serves (answers `srvr` with a Mode); a killed member restarts on its ports and
rejoins. Each member is signalled by its PID only.

Lock: one thread uses an ensemble.
"""

from __future__ import annotations

import os
from pathlib import Path

from kbroker.cluster.zookeeper_server import (
    Quorum,
    QuorumPeer,
    ZooKeeperError,
    ZooKeeperServer,
    free_port,
)


class ZooKeeperEnsemble:
    """See the module docstring."""

    def __init__(self, directory: str | os.PathLike[str], size: int = 3,
                 host: str = "127.0.0.1") -> None:
        if size < 1:
            raise ValueError("an ensemble needs at least one member")
        self.directory = Path(directory)
        self.host = host
        ports = _distinct_free_ports(host, 3 * size)
        peers = tuple(QuorumPeer(i, host, ports[3 * (i - 1) + 1], ports[3 * (i - 1) + 2])
                      for i in range(1, size + 1))
        self.members: dict[int, ZooKeeperServer] = {
            p.server_id: ZooKeeperServer(self.directory / f"zk-{p.server_id}",
                                         port=ports[3 * (p.server_id - 1)], host=host,
                                         quorum=Quorum(p.server_id, peers))
            for p in peers}

    @property
    def connect_string(self) -> str:
        """Every member's host:port, for `zookeeper.connect` (add a chroot after it)."""
        return ",".join(m.connect_string for m in self.members.values())

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        try:
            for member in self.members.values():
                member.spawn()
            for server_id, member in self.members.items():
                if not member.wait_ready(timeout):
                    raise ZooKeeperError(f"ZooKeeper member {server_id} did not join a quorum on "
                                         f"{member.connect_string}:\n{member.output()[-4000:]}")
        except BaseException:
            self.stop()
            raise
        return self

    def modes(self) -> dict[int, str | None]:
        """Each member's `srvr` mode: "leader", "follower" or None (down, or no quorum)."""
        return {server_id: m.mode() for server_id, m in self.members.items()}

    def leader(self) -> int | None:
        """The id of the member that says "Mode: leader", if one does."""
        for server_id, mode in self.modes().items():
            if mode == "leader":
                return server_id
        return None

    def kill(self, server_id: int) -> None:
        """SIGKILL one member."""
        self.members[server_id].kill()

    def restart(self, server_id: int, timeout: float = 60.0) -> None:
        """Start a stopped member again on its ports; returns once it serves."""
        member = self.members[server_id]
        if member.is_running():
            raise ZooKeeperError(f"ZooKeeper member {server_id} is running")
        member.spawn()
        if not member.wait_ready(timeout):
            raise ZooKeeperError(f"ZooKeeper member {server_id} did not rejoin the ensemble:\n"
                                 f"{member.output()[-4000:]}")

    def stop(self) -> None:
        for member in self.members.values():
            member.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _distinct_free_ports(host: str, count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports
