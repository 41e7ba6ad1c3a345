"""ZooKeeperClient's watches across a lost connection (the session survives): a child
replaced while the client was disconnected is reported after the reconnection, even
though the children's names are the same as before.

The case the randomized fault test met: the controller's connection dropped for a few
seconds; meanwhile a broker restarted and registered again under its id (same name,
new epoch). kazoo's ChildrenWatch compares names only after a reconnection and said
nothing, so the controller never learned of the restart: the broker got no metadata
and no LeaderAndIsr, for good.

The connection is cut by a TCP proxy between the client and ZooKeeper, which closes its
connections and refuses new ones while cut; ZooKeeper itself keeps serving."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kbroker.cluster.zk_client import ZooKeeperClient
from kbroker.cluster.zookeeper_server import ZooKeeperServer

pytestmark = pytest.mark.timeout(120)

DEADLINE_S = 30.0


class CuttableProxy:
    """Forwards 127.0.0.1:<port> to a target; cut() closes every connection and refuses
    new ones until heal()."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.cut_off = threading.Event()
        self.stopped = threading.Event()
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cut_off.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            s.close()

    def cut(self) -> None:
        self.cut_off.set()
        with self._lock:
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._open.clear()

    def heal(self) -> None:
        self.cut_off.clear()

    def stop(self) -> None:
        self.stopped.set()
        self.cut()
        self.server.close()


async def wait_for(condition: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def replaced_while_disconnected(zookeeper: ZooKeeperServer, proxy: CuttableProxy) -> list[list[str]]:
    loop = asyncio.get_running_loop()
    direct = KazooClient(hosts=zookeeper.connect_string, timeout=10)
    await loop.run_in_executor(None, direct.start, 15)
    await loop.run_in_executor(None, lambda: direct.create("/ids/1", b"first life", makepath=True))
    client = ZooKeeperClient(f"127.0.0.1:{proxy.port}", 10000, 10000, loop)
    await client.start()
    seen: list[list[str]] = []
    client.watch_children("/ids", seen.append)
    try:
        await wait_for(lambda: seen == [["1"]], "the first report")
        proxy.cut()
        await wait_for(lambda: not client.kazoo.connected, "the client to lose its connection")

        def replace() -> None:  # a restart: the same name, a new znode
            direct.delete("/ids/1")
            direct.create("/ids/1", b"second life")
        await loop.run_in_executor(None, replace)
        proxy.heal()
        await wait_for(lambda: client.kazoo.connected, "the client to reconnect")
        await wait_for(lambda: len(seen) >= 2, "a report after the reconnection")
        return seen
    finally:
        await client.close()
        await loop.run_in_executor(None, direct.stop)
        direct.close()


def test_a_child_replaced_while_disconnected_is_reported(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper:
        proxy = CuttableProxy((zookeeper.host, zookeeper.port or 0))
        try:
            seen = asyncio.run(replaced_while_disconnected(zookeeper, proxy))
        finally:
            proxy.stop()
    assert seen[-1] == ["1"]
