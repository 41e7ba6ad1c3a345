"""What the group API handlers share: the coordinator, the client host, and parking a
request on a coordinator callback (JoinGroup and SyncGroup wait for the rebalance)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.server.request_context import RequestContext

R = TypeVar("R")


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    coord: GroupCoordinator = ctx.services.group_coordinator
    return coord


def client_host(ctx: RequestContext) -> str:
    """Kafka's form: "/" + the peer's address."""
    host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
    return "/" + host.strip("[]")


def complete_or_park(start: Callable[[Callable[[Any], None]], None],
                     respond: Callable[[Any], R]) -> R | Awaitable[R]:
    """Run `start(callback)`; answer now if the callback ran, else when it runs."""
    done: list[Any] = []
    waiting: list[asyncio.Future[Any]] = []

    def callback(result: Any) -> None:
        if not waiting:
            done.append(result)
        elif not waiting[0].done():
            waiting[0].set_result(result)

    start(callback)
    if done:
        return respond(done[0])
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    waiting.append(fut)

    async def wait() -> R:
        return respond(await fut)

    return wait()
