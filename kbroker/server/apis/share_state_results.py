"""What the share coordinator's handlers share (Read/Write/Initialize/DeleteShareGroupState,
ReadShareGroupStateSummary, coordinator/share_coordinator.py): each partition of a
request keyed as the share coordinator keys it, `(group id, topic id, partition)`; a
read's state, or a write's error code, answered now or once its record is replicated."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_coordinator import (
    PersistedState,
    ShareCoordinator,
    SharePartitionKey,
)

E = ErrorCode
ReadRows = list[tuple[Any, list[tuple[Any, int, PersistedState | None]]]]
WriteRows = list[tuple[Any, list[tuple[int, int]]]]


async def code_of(answer: int | Awaitable[int]) -> int:
    return answer if isinstance(answer, int) else await answer


def read_states(coordinator: ShareCoordinator, request: Any) -> ReadRows:
    """Each topic with its partitions' (request data, error code, state): NOT_COORDINATOR
    for a key not coordinated here (unless this broker holds its state under the old key
    form), a None state for a key never written."""
    out: ReadRows = []
    for topic in request.topics:
        rows = []
        for p in topic.partitions:
            code, state = coordinator.read_with_legacy((request.group_id, topic.topic_id, p.partition))
            rows.append((p, code, state))
        out.append((topic, rows))
    return out


async def write_states(request: Any, write: Callable[[SharePartitionKey, Any], int | Awaitable[int]]) -> WriteRows:
    """Each topic with its partitions' (partition, error code): `write(key, data)` for
    every partition first (INVALID_REQUEST for a negative one), then the answers awaited."""
    started = [(topic, [(p.partition, E.INVALID_REQUEST if p.partition < 0 else
                         write((request.group_id, topic.topic_id, p.partition), p)) for p in topic.partitions])
               for topic in request.topics]
    return [(topic, [(partition, await code_of(answer)) for partition, answer in rows]) for topic, rows in started]
