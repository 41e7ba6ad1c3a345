"""In-memory ZooKeeper for the controller's unit tests (what Kafka's controller tests get
from a mocked KafkaZkClient): FakeZooKeeper holds the znodes (data, version, czxid,
ephemeral owner) and the sessions; FakeZkClient is one session's KafkaZkClient.

As ZooKeeper: versions are checked on set/delete/multi (-1: any); a parent must exist
(unless makepath); a znode with children cannot be deleted; a multi commits all its ops
or none and raises the first failure; ephemeral znodes go with their session
(expire()). As kbroker's ZooKeeperClient: watch_data / watch_children call back once at
registration and after every change. Watches fire synchronously, so whatever the
controller enqueues from them is queued before the change returns (a test then awaits
controller.idle()).

FakeChannels records what the controller sends to brokers (its ControllerChannels):
LeaderAndIsr, UpdateMetadata and StopReplica requests per broker.

Owns its znodes; single-threaded (the test's event loop).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import ZnodeStat

from kbroker.cluster.zk_data import BrokerRegistration
from kbroker.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kbroker.protocol.messages.stop_replica import StopReplicaRequest
from kbroker.protocol.messages.update_metadata import UpdateMetadataRequest

DataCallback = Callable[[bytes | None, ZnodeStat | None], None]
ChildrenCallback = Callable[[list[str]], None]


@dataclass
class Znode:
    data: bytes
    czxid: int
    ephemeral_owner: int = 0
    version: int = 0

    def stat(self, children: int) -> ZnodeStat:
        return ZnodeStat(czxid=self.czxid, mzxid=self.czxid, ctime=0, mtime=0, version=self.version,
                         cversion=0, aversion=0, ephemeralOwner=self.ephemeral_owner,
                         dataLength=len(self.data), numChildren=children, pzxid=0)


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class FakeZooKeeper:
    """The ensemble: znodes, sessions and watches."""

    def __init__(self) -> None:
        self.nodes: dict[str, Znode] = {"/": Znode(b"", 0)}
        self._zxid = itertools.count(1)
        self._sessions = itertools.count(0x1000)
        self._data_watches: dict[str, list[DataCallback]] = {}
        self._child_watches: dict[str, list[ChildrenCallback]] = {}

    def client(self) -> FakeZkClient:
        return FakeZkClient(self, next(self._sessions))

    # -- reading
    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):] and p != "/")

    def read(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        node = self.nodes.get(path)
        return None if node is None else (node.data, node.stat(len(self.children(path))))

    # -- writing (through apply: every change is one list of ops, all or nothing)
    def apply(self, ops: Sequence[tuple[Any, ...]], session: int = 0) -> list[Any]:
        staged = {p: Znode(n.data, n.czxid, n.ephemeral_owner, n.version) for p, n in self.nodes.items()}
        results: list[Any] = []
        changed: set[str] = set()
        for op in ops:
            results.append(self._apply_one(staged, op, session, changed))
        self.nodes = staged
        self._fire(changed)
        return results

    def _apply_one(self, nodes: dict[str, Znode], op: tuple[Any, ...], session: int,
                   changed: set[str]) -> Any:
        kind, path = op[0], op[1]
        node = nodes.get(path)
        if kind == "create":
            ephemeral = len(op) > 3 and bool(op[3])
            if node is not None:
                raise NodeExistsError(path)
            if parent_of(path) not in nodes:
                raise NoNodeError(parent_of(path))
            nodes[path] = Znode(op[2], next(self._zxid), session if ephemeral else 0)
            changed.update((path, parent_of(path)))
            return path
        if node is None:
            raise NoNodeError(path)
        version = op[3] if kind == "set" else op[2]
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        if kind == "check":
            return True
        if kind == "set":
            node.data, node.version = op[2], node.version + 1
            changed.add(path)
            return node.stat(0)
        if kind == "delete":
            if any(p.startswith(path + "/") for p in nodes):
                raise NotEmptyError(path)
            del nodes[path]
            changed.update((path, parent_of(path)))
            return True
        raise ValueError(f"unknown op {kind}")

    def ensure(self, path: str) -> None:
        """Create the znode and its missing parents (persistent, empty)."""
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if prefix not in self.nodes:
                self.apply([("create", prefix, b"")])

    def expire(self, session: int) -> None:
        """The session ends: its ephemeral znodes go."""
        gone = [p for p, n in self.nodes.items() if n.ephemeral_owner == session]
        for path in gone:
            self.apply([("delete", path, -1)])

    # -- watches
    def watch_data(self, path: str, callback: DataCallback) -> None:
        self._data_watches.setdefault(path, []).append(callback)
        self._call_data(path, callback)

    def watch_children(self, path: str, callback: ChildrenCallback) -> None:
        self._child_watches.setdefault(path, []).append(callback)
        callback(self.children(path))

    def _call_data(self, path: str, callback: DataCallback) -> None:
        found = self.read(path)
        callback(*(found if found is not None else (None, None)))

    def _fire(self, changed: set[str]) -> None:
        for path in sorted(changed):
            for data_callback in list(self._data_watches.get(path, [])):
                self._call_data(path, data_callback)
            for children_callback in list(self._child_watches.get(path, [])):
                children_callback(self.children(path))


@dataclass
class FakeZkClient:
    """One session: the controller's KafkaZkClient."""

    zk: FakeZooKeeper
    session: int
    connection_timeout_ms: int = 1000
    # the next this many multis are applied, then answer ConnectionLoss (the connection
    # dropped after the server committed them)
    lost_answers: int = 0

    @property
    def session_id(self) -> int:
        return self.session

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        return self.zk.read(path)

    async def get_children(self, path: str) -> list[str]:
        return self.zk.children(path)

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> tuple[str, ZnodeStat]:
        assert not sequence
        if makepath:
            await self.ensure_path(parent_of(path))
        self.zk.apply([("create", path, data, ephemeral)], self.session)
        found = self.zk.read(path)
        assert found is not None
        return path, found[1]

    async def ensure_path(self, path: str) -> None:
        self.zk.ensure(path)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        result: ZnodeStat = self.zk.apply([("set", path, data, version)])[0]
        return result

    async def delete(self, path: str, version: int = -1) -> None:
        self.zk.apply([("delete", path, version)])

    async def delete_recursive(self, path: str) -> None:
        for child in self.zk.children(path):
            await self.delete_recursive(f"{path}/{child}")
        if path in self.zk.nodes:
            await self.delete(path)

    async def multi(self, ops: Sequence[tuple[Any, ...]]) -> list[Any]:
        results = self.zk.apply(ops, self.session)
        if self.lost_answers > 0:
            self.lost_answers -= 1
            raise ConnectionLoss()
        return results

    def watch_children(self, path: str, callback: ChildrenCallback) -> None:
        self.zk.watch_children(path, callback)

    def watch_data(self, path: str, callback: DataCallback) -> None:
        self.zk.watch_data(path, callback)


@dataclass
class Sent:
    broker_id: int
    request: Any


@dataclass
class FakeChannels:
    """The controller's channels to brokers, recording every request (none is sent)."""

    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)

    def add_broker(self, registration: BrokerRegistration) -> None:
        self.brokers[registration.broker_id] = registration

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def send(self, broker_id: int, request: Any, version: int,
             callback: Callable[[Any], None] | None = None) -> None:
        if broker_id in self.brokers:
            self.sent.append(Sent(broker_id, request))

    def shutdown(self) -> None:
        self.brokers.clear()

    def take(self) -> list[Sent]:
        """What was sent since the last take()."""
        out, self.sent = self.sent, []
        return out

    @staticmethod
    def leader_and_isr(sent: list[Sent]) -> list[Sent]:
        return [s for s in sent if isinstance(s.request, LeaderAndIsrRequest)]

    @staticmethod
    def update_metadata(sent: list[Sent]) -> list[Sent]:
        return [s for s in sent if isinstance(s.request, UpdateMetadataRequest)]

    @staticmethod
    def stop_replica(sent: list[Sent]) -> list[Sent]:
        return [s for s in sent if isinstance(s.request, StopReplicaRequest)]
