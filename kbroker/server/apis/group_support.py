"""What the group API handlers share: the coordinator, the client host, parking a
request on a coordinator callback (JoinGroup and SyncGroup wait for the rebalance), and
the parts the KIP-848 and the share group APIs answer alike (a heartbeat's answer, a
described group's assignment and failure), and holding an answer until the group's records
are replicated (cluster mode)."""

from __future__ import annotations

import asyncio
import uuid
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


UNSET_OPERATIONS = -(2**31)
Assignment = dict[uuid.UUID, frozenset[int]]


def heartbeat_response(response: Any, result: Any) -> Any:
    """A ConsumerGroupHeartbeat or ShareGroupHeartbeat answer (`response` its class) from
    the coordinator's result: the error, or the member's epoch, interval and assignment."""
    if result.error_code != ErrorCode.NONE:
        return response(error_code=result.error_code, error_message=result.error_message, member_id=None,
                        member_epoch=-1)
    assignment = None
    if result.assignment is not None:
        assignment = response.Assignment(topic_partitions=[
            response.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda x: str(x[0]))])
    return response(error_code=ErrorCode.NONE, member_id=result.member_id, member_epoch=result.member_epoch,
                    heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


def described_assignment(response: Any, a: Assignment, names: dict[uuid.UUID, str]) -> Any:
    """A ConsumerGroupDescribe or ShareGroupDescribe member's assignment, with topic names."""
    return response.Assignment(topic_partitions=[
        response.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
        for t, ps in sorted(a.items(), key=lambda x: names.get(x[0], ""))])


def described_failure(response: Any, group_id: str, code: int, message: str | None = None) -> Any:
    return response.DescribedGroup(error_code=code, error_message=message, group_id=group_id, group_state="",
                                   group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                                   authorized_operations=UNSET_OPERATIONS)
