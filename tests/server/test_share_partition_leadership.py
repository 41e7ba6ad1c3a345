"""SharePartitionManager in cluster mode, with fake partitions and a persister that answers
later (as the share coordinator on another broker does): a share partition is built in the
background (a fetch meanwhile waits; the purgatory is told when it is ready), an
acknowledgement is answered once persisted (undone when it could not be), and share
partitions are dropped when their partition's leadership or leader epoch moves."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.share_coordinator import PersistedState
from kbroker.coordinator.share_partition import AckBatch, SharePartitionConfig
from kbroker.coordinator.timers import Timers
from kbroker.server.share_partition_manager import SharePartitionManager
from kbroker.utils.time import MockTime

E = ErrorCode
TOPIC_ID = uuid.uuid4()
TP = TopicPartition("jobs", 0)
KEY = ("workers", TOPIC_ID, 0)


class FakeReplicaManager:
    def __init__(self) -> None:
        self.partition = SimpleNamespace(is_leader=True, leader_epoch=4,
                                         local_log=lambda: SimpleNamespace(log_start_offset=0, high_watermark=10))
        self.checked: list[TopicPartition] = []
        self.delayed_fetch_purgatory = SimpleNamespace(check_and_complete=self.checked.append)

    def leader_partition(self, tp: TopicPartition) -> Any:
        return self.partition

    def get_partition(self, tp: TopicPartition) -> Any:
        return self.partition


class LaterPersister:
    """Answers each read and write when the test says (a future per call)."""

    def __init__(self) -> None:
        self.reads: list[asyncio.Future[Any]] = []
        self.writes: list[tuple[PersistedState, asyncio.Future[int]]] = []

    def read_state(self, key: Any) -> asyncio.Future[Any]:
        self.reads.append(asyncio.get_running_loop().create_future())
        return self.reads[-1]

    def write_state(self, key: Any, state: PersistedState) -> asyncio.Future[int]:
        self.writes.append((state, asyncio.get_running_loop().create_future()))
        return self.writes[-1][1]


def manager() -> tuple[SharePartitionManager, FakeReplicaManager, LaterPersister]:
    replica_manager, persister = FakeReplicaManager(), LaterPersister()
    topics = SimpleNamespace(get_by_id=lambda topic_id: SimpleNamespace(name=TP.topic))
    return SharePartitionManager(replica_manager, topics, Timers(MockTime()),  # type: ignore[arg-type]
                                 lambda group_id: SharePartitionConfig(), persister), replica_manager, persister


def test_a_share_partition_is_built_in_the_background_and_acknowledgements_wait_for_the_write() -> None:
    async def run() -> None:
        m, replica_manager, persister = manager()
        assert m.share_partition(KEY) is None  # being read
        assert not m.has_available("workers", [(TOPIC_ID, 0)])  # a fetch waits
        persister.reads[0].set_result((E.NONE, None))  # never written: its start offset is written first
        await asyncio.sleep(0)
        initial, written = persister.writes[0]
        assert (initial.start_offset, initial.leader_epoch) == (10, 4)  # latest: the high watermark
        written.set_result(E.NONE)
        await asyncio.sleep(0)
        assert replica_manager.checked == [TP]  # the waiting fetch is told
        sp = m.share_partition(KEY)
        assert sp is not None and sp.start_offset == 10
        sp.acquire("m1", [(10, 14, False)], 100)
        answer = m.acknowledge("workers", "m1", TOPIC_ID, 0, [AckBatch(10, 14, [1])])
        assert not isinstance(answer, tuple)  # answered once persisted
        state, write = persister.writes[1]
        assert state.start_offset == 15 and state.leader_epoch == 4
        write.set_result(E.NONE)
        assert await answer == (E.NONE, None)
    asyncio.run(run())


def test_a_failed_read_is_the_next_fetchs_error() -> None:
    async def run() -> None:
        m, _replica_manager, persister = manager()
        assert m.share_partition(KEY) is None
        persister.reads[0].set_result((E.REQUEST_TIMED_OUT, None))  # no share coordinator answered
        await asyncio.sleep(0)
        fetched = m.fetch("workers", "m1", [(TOPIC_ID, 0)], 1 << 20, 100)
        assert fetched[0].error_code == E.REQUEST_TIMED_OUT
        assert m.share_partition(KEY) is None and len(persister.reads) == 2  # asked again
    asyncio.run(run())


def test_share_partitions_go_when_leadership_or_the_leader_epoch_moves() -> None:
    async def run() -> None:
        m, replica_manager, persister = manager()
        m.share_partition(KEY)
        persister.reads[0].set_result((E.NONE, PersistedState(1, 3)))
        await asyncio.sleep(0)
        assert m.share_partition(KEY) is not None
        m.leadership_changed([], [])  # the same leader, the same epoch
        assert KEY in m.partitions
        replica_manager.partition.leader_epoch = 5  # a new epoch: rebuilt from the persisted state
        m.leadership_changed([], [])
        assert KEY not in m.partitions
        m.share_partition(KEY)
        persister.reads[1].set_result((E.NONE, PersistedState(1, 3)))
        await asyncio.sleep(0)
        assert KEY in m.partitions
        replica_manager.partition.is_leader = False  # a follower now
        m.leadership_changed([], [])
        assert KEY not in m.partitions
    asyncio.run(run())


def test_an_acknowledgement_whose_write_fails_is_undone() -> None:
    async def run() -> None:
        m, _replica_manager, persister = manager()
        m.share_partition(KEY)
        persister.reads[0].set_result((E.NONE, PersistedState(1, 10)))
        await asyncio.sleep(0)
        sp = m.share_partition(KEY)
        assert sp is not None
        sp.acquire("m1", [(10, 14, False)], 100)
        answer = m.acknowledge("workers", "m1", TOPIC_ID, 0, [AckBatch(10, 14, [1])])
        assert not isinstance(answer, tuple) and sp.start_offset == 15
        persister.writes[0][1].set_result(E.REQUEST_TIMED_OUT)  # no share coordinator in time
        assert await answer == (E.REQUEST_TIMED_OUT, "The acknowledgement could not be persisted.")
        assert sp.start_offset == 10 and sp.next_fetch_offset() == 10  # delivered again
    asyncio.run(run())
