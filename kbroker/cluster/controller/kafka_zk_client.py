"""KafkaZkClient: exactly the ZooKeeper operations the controller uses (Kafka's
KafkaZkClient, as the controller sees it). kbroker.cluster.zk_client.ZooKeeperClient is
the real one; tests/cluster/fake_zookeeper.py keeps znodes in memory.

Owns nothing: a Protocol. Its contract is ZooKeeper's: a znode's data with a stat
(.version, .czxid, .ephemeralOwner), versions checked on set/delete/multi (-1: any),
kazoo's exceptions (NoNodeError, NodeExistsError, BadVersionError) for the failures,
multi ops as tuples ("check", path, version), ("create", path, data[, ephemeral]),
("set", path, data, version), ("delete", path, version); watch callbacks run on the
event loop, once at registration and after every change.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat


class KafkaZkClient(Protocol):
    connection_timeout_ms: int

    @property
    def session_id(self) -> int: ...

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None: ...

    async def get_children(self, path: str) -> list[str]: ...

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> tuple[str, ZnodeStat]: ...

    async def ensure_path(self, path: str) -> None: ...

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat: ...

    async def delete(self, path: str, version: int = -1) -> None: ...

    async def delete_recursive(self, path: str) -> None: ...

    async def multi(self, ops: Sequence[tuple[Any, ...]]) -> list[Any]: ...

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None: ...

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None: ...


async def delete_quietly(zk: KafkaZkClient, path: str) -> None:
    """Delete the znode if it is there."""
    try:
        await zk.delete(path)
    except NoNodeError:
        pass
