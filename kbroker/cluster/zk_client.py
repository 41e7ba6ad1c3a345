"""The broker's ZooKeeper session: kazoo underneath, asyncio on top.

kazoo runs its own threads: its connection thread talks to the server and its callback
thread runs completions, watches and state listeners. None of that may touch broker
state, so every result and event is handed to the broker's event loop with
`call_soon_threadsafe`, and the loop never waits on a kazoo call: the operations here
are coroutines over kazoo's `*_async` calls.

The controller sees it as a KafkaZkClient (kbroker.cluster.controller.kafka_zk_client,
the operations it uses); tests give the controller an in-memory one instead.

`zookeeper.connect` is `host:port[,host:port...][/chroot]`. The chroot is created on
first start (as Kafka does) and every path below is relative to it.

Liveness and fencing: the session is alive on the server until it has heard nothing
from us for `zookeeper.session.timeout.ms`; then the server deletes our ephemeral
znodes and the controller moves our leaderships to other brokers. A leader cut off from
ZooKeeper must stop acknowledging writes before that happens, yet kazoo only notices a
dead connection after 2/3 of the timeout. So a probe (an `exists` every tenth of the
timeout) records when ZooKeeper last answered, and `fenced` turns true once no answer
has come for FENCE_FRACTION of the timeout: before the server can expire the session,
measured from the last moment it certainly heard from us.

Requests wait for a connection before they reach kazoo (as Kafka's ZooKeeperClient waits
for one before it sends), never queued in kazoo while it is disconnected: kazoo wakes its
connection thread by writing a byte to a socketpair for each request, and that thread
drains it only while connected. A few hundred requests queued during a long outage (the
probe alone sends one every tenth of the session timeout) filled the socket's buffer, and
the next write blocked the calling thread, the broker's event loop, until ZooKeeper came
back: no client was served, and SIGTERM could not stop the broker.

Events reaching the loop, to every StateChangeHandler registered (Kafka's
`registerStateChangeHandler`), in the order registered:
    on_fenced(fenced: bool)      the probe's verdict changed
    on_session_expired()         the session is gone (ephemeral znodes deleted)
    on_new_session()             connected again with a new session after expiry
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

log = logging.getLogger(__name__)

FENCE_FRACTION = 0.6
PROBE_FRACTION = 0.1
PROBE_PATH = "/controller_epoch"


@dataclass(frozen=True)
class StateChangeHandler:
    """Kafka's StateChangeHandler: what one owner does on the session's events (see the
    module docstring); an event it leaves None passes it by."""

    name: str
    on_fenced: Callable[[bool], None] | None = None
    on_session_expired: Callable[[], None] | None = None
    on_new_session: Callable[[], None] | None = None


class ZooKeeperConnectError(ConnectionError):
    """ZooKeeper did not answer within zookeeper.connection.timeout.ms."""


def split_chroot(connect: str) -> tuple[str, str]:
    """`h1:2181,h2:2181/kbroker` -> ("h1:2181,h2:2181", "/kbroker")."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    chroot = connect[slash:].rstrip("/")
    return connect[:slash], chroot


class ZooKeeperClient:
    """See the module docstring. Create, then `await start()`; `close()` at the end."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_chroot(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.loop = loop
        self._kazoo: KazooClient | None = None
        self._probe_task: asyncio.Task[None] | None = None
        self._last_answer = time.monotonic()
        self._fenced = False
        self._session_lost = False
        self._closed = False
        self._connected = asyncio.Event()  # kazoo is connected (set and cleared on the loop)
        self._state_change_handlers: dict[str, StateChangeHandler] = {}

    def register_state_change_handler(self, handler: StateChangeHandler) -> None:
        """Kafka's registerStateChangeHandler: one handler per name (a second replaces it)."""
        self._state_change_handlers[handler.name] = handler

    # -- life cycle

    async def start(self) -> None:
        kazoo = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
            logger=logging.getLogger("kazoo.client"),
        )
        self._kazoo = kazoo
        try:
            await self.loop.run_in_executor(None, kazoo.start, self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            await self.loop.run_in_executor(None, _stop_quietly, kazoo)
            self._kazoo = None
            raise ZooKeeperConnectError(
                f"cannot connect to ZooKeeper at {self.hosts} within "
                f"zookeeper.connection.timeout.ms ({self.connection_timeout_ms} ms)") from None
        if self.chroot:
            await self.loop.run_in_executor(None, kazoo.ensure_path, self.chroot)
            kazoo.chroot = self.chroot
        kazoo.add_listener(self._state_changed)
        self._set_connected(kazoo.connected)
        self._last_answer = time.monotonic()
        self._probe_task = asyncio.ensure_future(self._probe())

    async def close(self) -> None:
        self._closed = True
        if self._probe_task is not None:
            self._probe_task.cancel()
        kazoo, self._kazoo = self._kazoo, None
        if kazoo is not None:
            await self.loop.run_in_executor(None, _stop_quietly, kazoo)

    @property
    def kazoo(self) -> KazooClient:
        if self._kazoo is None:
            raise RuntimeError("the ZooKeeper client is not started")
        return self._kazoo

    @property
    def session_id(self) -> int:
        return int(self.kazoo.client_id[0]) if self.kazoo.client_id else -1

    # -- liveness

    @property
    def fenced(self) -> bool:
        return self._fenced

    def seconds_since_answer(self) -> float:
        return time.monotonic() - self._last_answer

    async def _probe(self) -> None:
        interval = self.session_timeout_ms / 1000 * PROBE_FRACTION
        limit = self.session_timeout_ms / 1000 * FENCE_FRACTION
        while True:
            sent = time.monotonic()
            try:
                await asyncio.wait_for(self.exists(PROBE_PATH), limit)
                self._last_answer = max(self._last_answer, sent)
            except Exception:  # no answer: the connection is down or the server is away
                pass
            self._set_fenced(time.monotonic() - self._last_answer > limit)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - sent)))

    def _set_fenced(self, fenced: bool) -> None:
        if fenced == self._fenced or self._closed:
            return
        self._fenced = fenced
        if fenced:
            log.warning("no answer from ZooKeeper for %.1f s: fencing this broker (its "
                        "leaderships stop taking writes)", self.seconds_since_answer())
        else:
            log.info("ZooKeeper answers again: unfenced")
        for handler in list(self._state_change_handlers.values()):
            if handler.on_fenced is not None:
                handler.on_fenced(fenced)

    def _state_changed(self, state: str) -> None:
        """On kazoo's thread: hand the change to the loop."""
        if self._closed:
            return
        self.loop.call_soon_threadsafe(self._set_connected, state == KazooState.CONNECTED)
        if state == KazooState.LOST:
            self._session_lost = True
            self.loop.call_soon_threadsafe(self._session_expired)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.loop.call_soon_threadsafe(self._new_session)

    def _set_connected(self, connected: bool) -> None:
        if connected:
            self._connected.set()
        else:
            self._connected.clear()

    async def _until_connected(self) -> None:
        """Wait, on the loop, until kazoo is connected (see the module docstring)."""
        while not self._connected.is_set():
            await self._connected.wait()

    def _session_expired(self) -> None:
        log.warning("ZooKeeper session expired")
        self._set_fenced(True)
        for handler in list(self._state_change_handlers.values()):
            if handler.on_session_expired is not None:
                handler.on_session_expired()

    def _new_session(self) -> None:
        log.info("connected to ZooKeeper with a new session")
        self._last_answer = time.monotonic()
        for handler in list(self._state_change_handlers.values()):
            if handler.on_new_session is not None:
                handler.on_new_session()

    # -- operations (coroutines on the loop; kazoo's async calls underneath)

    def _bridge(self, async_result: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.loop.create_future()

        def done(result: Any) -> None:  # kazoo's callback thread
            try:
                value = result.get_nowait()
            except BaseException as e:  # noqa: BLE001 - handed over as it is
                self.loop.call_soon_threadsafe(_set_exception, fut, e)
            else:
                self.loop.call_soon_threadsafe(_set_result, fut, value)

        async_result.rawlink(done)
        return fut

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """The znode's data and stat, or None when it does not exist."""
        try:
            await self._until_connected()
            data, stat = await self._bridge(self.kazoo.get_async(path))
        except NoNodeError:
            return None
        return data, stat

    async def exists(self, path: str) -> ZnodeStat | None:
        await self._until_connected()
        result: ZnodeStat | None = await self._bridge(self.kazoo.exists_async(path))
        return result

    async def get_children(self, path: str) -> list[str]:
        try:
            await self._until_connected()
            children: list[str] = await self._bridge(self.kazoo.get_children_async(path))
        except NoNodeError:
            return []
        return children

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> tuple[str, ZnodeStat]:
        """Create the znode; (its path, its stat). NodeExistsError when it exists."""
        await self._until_connected()
        result = await self._bridge(self.kazoo.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath,
            include_data=True))
        return result[0], result[1]

    async def ensure_path(self, path: str) -> None:
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        await self._until_connected()
        stat: ZnodeStat = await self._bridge(self.kazoo.set_async(path, data, version))
        return stat

    async def delete(self, path: str, version: int = -1) -> None:
        await self._until_connected()
        await self._bridge(self.kazoo.delete_async(path, version))

    async def delete_recursive(self, path: str) -> None:
        for child in await self.get_children(path):
            await self.delete_recursive(f"{path}/{child}")
        try:
            await self.delete(path)
        except NoNodeError:
            pass

    async def multi(self, ops: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Commit ops atomically: ("check", path, version), ("create", path, data[, ephemeral]),
        ("set", path, data, version), ("delete", path, version). Returns the results;
        raises the first failed op's error (kazoo reports it per op)."""
        tx = self.kazoo.transaction()
        for op in ops:
            kind = op[0]
            if kind == "check":
                tx.check(op[1], op[2])
            elif kind == "create":
                tx.create(op[1], op[2], ephemeral=len(op) > 3 and bool(op[3]))
            elif kind == "set":
                tx.set_data(op[1], op[2], op[3])
            elif kind == "delete":
                tx.delete(op[1], op[2])
            else:
                raise ValueError(f"unknown op {kind}")
        await self._until_connected()
        results: list[Any] = await self._bridge(tx.commit_async())
        for r in results:
            if isinstance(r, Exception) and not _is_rolled_back(r):
                raise r
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    # -- watches (the callback runs on the loop)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """callback(children) now, after every change and after every reconnection, also
        across sessions. (kazoo's recipe stays silent after a reconnection when the
        children's names are those it saw before, yet a child may have been replaced
        meanwhile: a broker that restarted while the controller was disconnected
        registers again under the same id, with a new epoch.)"""
        def changed(children: list[str]) -> bool:
            if self._closed:
                return False
            self.loop.call_soon_threadsafe(callback, list(children))
            return True

        def read(result: Any) -> None:  # kazoo's callback thread
            try:
                children = result.get_nowait()
            except Exception:  # disconnected again: the next reconnection reads again
                return
            changed(children)

        def reconnected(state: str) -> None:  # kazoo's connection thread: must not block
            if state == KazooState.CONNECTED and not self._closed:
                self.kazoo.get_children_async(path).rawlink(read)

        ChildrenWatch(self.kazoo, path, changed)
        self.kazoo.add_listener(reconnected)

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None:
        """callback(data, stat) now and after every change (None, None: no znode)."""
        def changed(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if self._closed:
                return False
            self.loop.call_soon_threadsafe(callback, data, stat)
            return True

        DataWatch(self.kazoo, path, changed)


def _is_rolled_back(error: Exception) -> bool:
    return type(error).__name__ in ("RolledBackError", "RuntimeInconsistency")


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Any], error: BaseException) -> None:
    if not fut.done():
        fut.set_exception(error)


def _stop_quietly(kazoo: KazooClient) -> None:
    try:
        kazoo.stop()
        kazoo.close()
    except Exception:  # already stopped, or the connection is gone
        log.debug("stopping the ZooKeeper client failed", exc_info=True)
