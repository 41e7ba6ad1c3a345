"""The share coordinator in cluster mode (coordinator/share_coordinator.py: the partitions
it leads, NOT_COORDINATOR elsewhere, the leader epoch fence, loading and dropping a
partition's states) and the ShareStatePersister in front of it
(server/share_state_persister.py: retried while the coordinator moves, one share
partition's writes in order), with a fake `__share_group_state` topic."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from types import SimpleNamespace
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.coordinator.internal_topic import StoredRecord
from kbroker.coordinator.share_coordinator import (
    PersistedState,
    ShareCoordinator,
    coordinator_key,
    encode_key,
    encode_value,
    legacy_coordinator_key,
)
from kbroker.coordinator.share_partition import StateBatch
from kbroker.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kbroker.server.apis import delete_share_group_state, read_share_group_state
from kbroker.server.share_state_persister import ShareStatePersister

E = ErrorCode
TOPIC = uuid.uuid4()
KEY = ("workers", TOPIC, 0)


class FakeStateTopic:
    """`__share_group_state` as the coordinator sees it: appends kept per partition, a
    partition of its own for every key (the key's partition: 0)."""

    name = "__share_group_state"

    def __init__(self) -> None:
        self.broker = SimpleNamespace(clustered=True, config=SimpleNamespace(request_timeout_ms=1000))
        self.records: dict[int, list[StoredRecord]] = {0: [], 1: []}
        self.replicated: asyncio.Future[int] | None = None

    def partition_for(self, key: str) -> int:
        return 0 if key == coordinator_key(KEY) else 1

    def ensure_created(self) -> bool:
        return True

    def append_records(self, partition: int, records: list[tuple[bytes, bytes | None]], **_: Any) -> Any:
        log = self.records[partition]
        for key, value in records:
            log.append(StoredRecord(key, value, len(log)))
        return SimpleNamespace(last_offset=len(log) - 1)

    def wait_replicated(self, partition: int, timeout_s: float, end_offset: int) -> Awaitable[int] | None:
        return self.replicated

    def read_partition(self, partition: int) -> list[StoredRecord]:
        return self.records[partition]


def state(start: int, leader_epoch: int = 0) -> PersistedState:
    return PersistedState(1, start, [StateBatch(start, start + 4, 0, 1)], leader_epoch)


def test_a_cluster_coordinator_answers_only_for_the_partitions_it_leads() -> None:
    topic = FakeStateTopic()
    coordinator = ShareCoordinator(topic)  # type: ignore[arg-type]
    assert coordinator.check_coordinator(KEY) == E.NOT_COORDINATOR
    assert coordinator.write_state(KEY, state(10)) == E.NOT_COORDINATOR
    topic.records[0].append(StoredRecord(encode_key(KEY), encode_value(state(7, 3)), 0))
    coordinator.on_elected(0)  # loads the partition's states
    assert coordinator.read_state(KEY) == state(7)
    assert coordinator.write_state(KEY, state(12, 2)) == E.FENCED_LEADER_EPOCH  # an old leader
    assert coordinator.write_state(KEY, state(12, 3)) == E.NONE
    assert coordinator.read_state(KEY) == state(12)
    coordinator.on_resigned(0)
    assert coordinator.read_state(KEY) is None
    assert coordinator.check_coordinator(KEY) == E.NOT_COORDINATOR
    coordinator.on_elected(0)  # the last record written wins
    assert coordinator.read_state(KEY) == state(12)


def test_a_write_is_answered_once_replicated() -> None:
    async def run() -> None:
        topic = FakeStateTopic()
        coordinator = ShareCoordinator(topic)  # type: ignore[arg-type]
        coordinator.on_elected(0)
        topic.replicated = asyncio.get_running_loop().create_future()
        written = coordinator.write_state(KEY, state(5))
        assert not isinstance(written, int)
        topic.replicated.set_result(E.NONE)
        assert await written == E.NONE
    asyncio.run(run())


class MovingCoordinator:
    """A share coordinator that answers NOT_COORDINATOR `moving` times, then writes each
    state once `release` is set, recording the order."""

    def __init__(self, moving: int) -> None:
        self.topic = FakeStateTopic()
        self.moving = moving
        self.release = asyncio.Event()
        self.written: list[int] = []
        self.states: dict[Any, PersistedState] = {}

    def partition_of(self, key: Any) -> int:
        return 0

    def legacy_partition_of(self, key: Any) -> int:
        return 0

    def check_coordinator(self, key: Any) -> int:
        return E.NONE

    def read_state(self, key: Any) -> PersistedState | None:
        return self.states.get(key)

    def read_with_legacy(self, key: Any) -> tuple[int, PersistedState | None]:
        return E.NONE, self.states.get(key)

    def write_state(self, key: Any, s: PersistedState) -> int | Awaitable[int]:
        if self.moving > 0:
            self.moving -= 1
            return E.NOT_COORDINATOR

        async def later() -> int:
            await self.release.wait()
            self.written.append(s.start_offset)
            self.states[key] = s
            return E.NONE
        return later()


def test_the_persister_retries_a_moving_coordinator_and_keeps_a_partitions_writes_and_reads_in_order() -> None:
    async def run() -> None:
        coordinator = MovingCoordinator(moving=2)
        persister = ShareStatePersister(coordinator, 1, 5000,  # type: ignore[arg-type]
                                        leader_of=lambda tp: 1, endpoint_of=lambda b: None)
        first = persister.write_state(KEY, state(10))
        second = persister.write_state(KEY, state(20))
        assert not isinstance(first, int) and not isinstance(second, int)
        await asyncio.sleep(0.3)  # the first retried past NOT_COORDINATOR; the second waits for it
        coordinator.release.set()
        assert await asyncio.gather(first, second) == [E.NONE, E.NONE]
        assert coordinator.written == [10, 20]
        read = persister.read_state(KEY)
        assert not isinstance(read, tuple)
        assert await read == (E.NONE, state(20))
        coordinator.release.clear()
        third = persister.write_state(KEY, state(30))
        read = persister.read_state(KEY)  # waits for the write before it
        await asyncio.sleep(0.05)
        coordinator.release.set()
        assert await read == (E.NONE, state(30)) and await third == E.NONE  # type: ignore[misc]
        persister.close()
    asyncio.run(run())


def test_the_persister_gives_up_after_the_request_timeout() -> None:
    async def run() -> None:
        persister = ShareStatePersister(MovingCoordinator(moving=10**6), 1, 300,  # type: ignore[arg-type]
                                        leader_of=lambda tp: 1, endpoint_of=lambda b: None)
        written = persister.write_state(KEY, state(1))
        assert not isinstance(written, int)
        assert await written == E.REQUEST_TIMED_OUT
        leaderless = ShareStatePersister(MovingCoordinator(moving=0), 1, 300,  # type: ignore[arg-type]
                                         leader_of=lambda tp: -1, endpoint_of=lambda b: None)
        read = leaderless.read_state(KEY)  # the key's __share_group_state partition has no leader
        assert not isinstance(read, tuple)
        assert await read == (E.REQUEST_TIMED_OUT, None)
    asyncio.run(run())


def test_a_single_broker_persister_answers_at_once() -> None:
    coordinator = MovingCoordinator(moving=0)
    coordinator.states[KEY] = state(3)
    persister = ShareStatePersister(coordinator, 1, 1000)  # type: ignore[arg-type]
    assert persister.read_state(KEY) == (E.NONE, state(3))


class SingleBrokerStateTopic(FakeStateTopic):
    exists = True
    num_partitions = 2

    def __init__(self) -> None:
        super().__init__()
        self.broker = SimpleNamespace(clustered=False, config=SimpleNamespace(request_timeout_ms=1000))


def test_the_key_is_kafkas_and_a_state_under_the_old_key_form_moves_to_its_own_partition() -> None:
    """Kafka's SharePartitionKey.asCoordinatorKey writes the topic id as Uuid.toString
    (base64); kbroker hashed it dashed before. A single broker moves a state it finds where
    the old form placed it (partition 1 here) to its own partition (0) at startup, unless
    that has a newer one, and tombstones the old record."""
    assert coordinator_key(KEY) == f"workers:{uuid_to_base64(TOPIC)}:0"
    assert legacy_coordinator_key(KEY) == f"workers:{TOPIC}:0"
    topic = SingleBrokerStateTopic()
    topic.records[1].append(StoredRecord(encode_key(KEY), encode_value(state(7)), 0))
    coordinator = ShareCoordinator(topic)  # type: ignore[arg-type]
    coordinator.load()
    assert coordinator.read_state(KEY) == state(7) and not coordinator.legacy
    assert [r.value is None for r in topic.records[1]] == [False, True]  # the old record tombstoned
    again = ShareCoordinator(topic)  # type: ignore[arg-type]
    again.load()
    assert again.read_state(KEY) == state(7) and len(topic.records[0]) == 1  # moved once

    newer = SingleBrokerStateTopic()
    newer.records[0].append(StoredRecord(encode_key(KEY), encode_value(state(9)), 0))
    newer.records[1].append(StoredRecord(encode_key(KEY), encode_value(state(7)), 0))
    coordinator = ShareCoordinator(newer)  # type: ignore[arg-type]
    coordinator.load()
    assert coordinator.read_state(KEY) == state(9) and newer.records[1][-1].value is None


def test_a_cluster_coordinator_serves_a_state_under_the_old_key_form_until_deleted() -> None:
    """The leader of the partition the old form placed a state in answers it to a read
    (the persister asks there when the key's own coordinator has none) and deletes it."""
    topic = FakeStateTopic()
    topic.records[1].append(StoredRecord(encode_key(KEY), encode_value(state(7)), 0))
    coordinator = ShareCoordinator(topic)  # type: ignore[arg-type]
    coordinator.on_elected(1)
    assert coordinator.check_coordinator(KEY) == E.NOT_COORDINATOR
    assert coordinator.read_with_legacy(KEY) == (E.NONE, state(7))
    assert coordinator.delete_state(KEY) == E.NONE and topic.records[1][-1].value is None
    assert coordinator.read_with_legacy(KEY) == (E.NOT_COORDINATOR, None)
    coordinator.on_resigned(1)
    coordinator.on_elected(1)  # the tombstone holds
    assert coordinator.read_with_legacy(KEY) == (E.NOT_COORDINATOR, None)


class HandlerChannel:
    """A BrokerChannel to another broker whose share coordinator answers through the real
    handlers (ReadShareGroupState, DeleteShareGroupState)."""

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.ctx = SimpleNamespace(services=SimpleNamespace(share_groups=SimpleNamespace(state=coordinator)))

    async def request(self, request: Any, version: int, timeout_s: float) -> Any:
        handler = read_share_group_state if isinstance(request, ReadShareGroupStateRequest) else delete_share_group_state
        answer = handler.handle(self.ctx, request)  # type: ignore[arg-type]
        return await answer if asyncio.iscoroutine(answer) else answer

    def close(self) -> None:
        pass


def test_the_persister_reads_and_deletes_a_state_under_the_old_key_form_at_another_broker() -> None:
    async def run() -> None:
        topic = FakeStateTopic()
        topic.records[1].append(StoredRecord(encode_key(KEY), encode_value(state(7)), 0))
        here, there = ShareCoordinator(topic), ShareCoordinator(topic)  # type: ignore[arg-type]
        here.on_elected(0)  # the key's own partition: no state
        there.on_elected(1)  # where the old key form placed it
        persister = ShareStatePersister(here, 1, 1000, leader_of=lambda tp: 1 if tp.partition == 0 else 2,
                                        endpoint_of=lambda b: None)
        persister._channels[2] = HandlerChannel(there)  # type: ignore[assignment]
        read = persister.read_state(KEY)
        assert not isinstance(read, tuple) and await read == (E.NONE, state(7))
        summary = persister.read_summary(KEY)
        assert not isinstance(summary, tuple) and await summary == (E.NONE, state(7))
        deleted = persister.delete_state(KEY)
        assert not isinstance(deleted, int) and await deleted == E.NONE
        assert topic.records[1][-1].value is None and not there.legacy
        read = persister.read_state(KEY)
        assert not isinstance(read, tuple) and await read == (E.NONE, None)  # deleted for good
    asyncio.run(run())
