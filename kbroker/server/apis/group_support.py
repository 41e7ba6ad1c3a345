"""What the group API handlers share: the coordinator, the client host, parking a
request on a coordinator callback (JoinGroup and SyncGroup wait for the rebalance), and
holding an answer until the group's records are replicated (cluster mode)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.server.request_context import RequestContext

R = TypeVar("R")


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    coord: GroupCoordinator = ctx.services.group_coordinator
    return coord


def commit_timeout_s(services: Any) -> float:
    """How long a commit waits for its replicas: Kafka's offsets.commit.timeout.ms."""
    return float(services.config.offsets_commit_timeout_ms) / 1000


def when_group_replicated(ctx: RequestContext, group_id: str, response: R,
                          failed: Callable[[int], R]) -> R | Awaitable[R]:
    """`response` once the group's records are replicated to the ISR of its
    __consumer_offsets partition (offsets.commit.timeout.ms at most; at once on a single
    broker), as Kafka's coordinator runtime holds a response until the high watermark
    passes its records; `failed(code)` when the wait fails: NOT_COORDINATOR (leadership
    lost) or COORDINATOR_NOT_AVAILABLE."""
    services = ctx.services
    waited = services.offsets_topic.wait_group_replicated(group_id, commit_timeout_s(services))
    if waited is None:
        return response

    async def after_replication() -> R:
        code = await waited
        if code == ErrorCode.NONE:
            return response
        return failed(ErrorCode.NOT_COORDINATOR if code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                      else ErrorCode.COORDINATOR_NOT_AVAILABLE)

    return after_replication()


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
