"""AlterPartitionManager against a scripted controller: a proposal goes out with the
epochs of the state it was computed from, and one whose partition moved on before the
controller took it is dropped, never sent again with the new epochs.

The case the randomized fault test met: leader 1 proposed the ISR [1, 3] (dropping a
lagging 2) while the controller was out of reach; a new controller then moved the
partition to leader epoch 1 with the ISR [1, 2] (broker 3 had died, 2 was back and
caught up), and broker 3 restarted with an older log. Re-sent with epoch 1, the stale
[1, 3] was accepted: 2, which held every acknowledged record, left the ISR, 3, which
did not, joined it, and the next election chose 3; acknowledged records were lost."""

from __future__ import annotations

import asyncio
from typing import Any

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.alter_partition_manager import AlterPartitionManager
from kbroker.cluster.partition import Partition, PartitionState
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

TP = TopicPartition("t", 0)


class StubEpochCache:
    def assign(self, _epoch: int, _offset: int) -> None:
        pass


class StubLog:
    """What a leading Partition touches of its log."""

    log_end_offset = 10
    high_watermark = 10
    auto_high_watermark = False
    leader_epoch_cache = StubEpochCache()

    def maybe_increment_high_watermark(self, _offset: int) -> bool:
        return False


class ScriptedController:
    """Fails the first `unreachable` requests (as a controller out of reach), then
    accepts every proposal as it comes."""

    def __init__(self, unreachable: int) -> None:
        self.unreachable = unreachable
        self.sent: list[tuple[int, int, list[int]]] = []  # (leader epoch, partition epoch, ISR)
        self.resets = 0
        self.refused = asyncio.Event()  # set at the first request it failed

    async def request(self, req: AlterPartitionRequest, _version: int, timeout_s: float) -> Any:
        if self.unreachable > 0:
            self.unreachable -= 1
            self.refused.set()
            raise KafkaClientError("the controller does not answer")
        p = req.topics[0].partitions[0]
        self.sent.append((p.leader_epoch, p.partition_epoch, list(p.new_isr)))
        return AlterPartitionResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=[
            AlterPartitionResponse.TopicData(topic_name=TP.topic, partitions=[
                AlterPartitionResponse.PartitionData(
                    partition_index=TP.partition, error_code=ErrorCode.NONE, leader_id=1,
                    leader_epoch=p.leader_epoch, isr=list(p.new_isr),
                    partition_epoch=p.partition_epoch + 1)])])

    def reset(self) -> None:
        self.resets += 1


def leader(epoch: int, isr: tuple[int, ...], partition_epoch: int) -> PartitionState:
    return PartitionState(1, epoch, isr, (1, 2, 3), partition_epoch)


async def stale_proposal(controller: ScriptedController) -> tuple[Partition, Any]:
    manager = AlterPartitionManager(1, lambda: controller, lambda: 7, 1.0)  # type: ignore[arg-type,return-value]
    partition = Partition(TP, 1, StubLog(), lambda: 0)  # type: ignore[arg-type]
    partition.make_leader(leader(0, (1, 2, 3), 0))
    shrink = manager.submit(partition, (1, 3))  # computed from epoch 0's ISR
    await asyncio.wait_for(controller.refused.wait(), 10)  # the controller is out of reach
    partition.make_leader(leader(1, (1, 2), 1))  # LeaderAndIsr from a new controller
    await asyncio.wait([shrink], timeout=10)  # the retry, after RETRY_BACKOFF_S
    manager.shutdown()
    return partition, shrink


def test_a_proposal_about_a_state_that_moved_on_is_dropped() -> None:
    controller = ScriptedController(unreachable=1)
    partition, shrink = asyncio.run(stale_proposal(controller))
    assert controller.sent == [], "the stale proposal reached the controller"
    assert isinstance(shrink.exception(), KafkaError)
    assert partition.state.isr == (1, 2)


async def fresh_proposal(controller: ScriptedController) -> tuple[PartitionState, Any]:
    manager = AlterPartitionManager(1, lambda: controller, lambda: 7, 1.0)  # type: ignore[arg-type,return-value]
    partition = Partition(TP, 1, StubLog(), lambda: 0)  # type: ignore[arg-type]
    partition.make_leader(leader(4, (1, 2, 3), 9))
    result = await manager.submit(partition, (1, 2))
    manager.shutdown()
    return result, controller


def test_a_proposal_carries_the_epochs_it_was_computed_from_and_survives_retries() -> None:
    controller = ScriptedController(unreachable=2)
    result, _ = asyncio.run(fresh_proposal(controller))
    assert controller.sent == [(4, 9, [1, 2])]
    assert controller.resets == 2
    assert (result.leader_epoch, result.isr, result.partition_epoch) == (4, (1, 2), 10)


class BrokenController(ScriptedController):
    """Its first answer cannot be read (an error no handler expects), then it accepts."""

    def __init__(self) -> None:
        super().__init__(unreachable=0)
        self.broken = 1

    async def request(self, req: AlterPartitionRequest, version: int, timeout_s: float) -> Any:
        if self.broken > 0:
            self.broken -= 1
            raise ValueError("an answer nobody expected")
        return await super().request(req, version, timeout_s)


async def after_a_broken_answer(controller: BrokenController) -> tuple[Any, PartitionState]:
    manager = AlterPartitionManager(1, lambda: controller, lambda: 7, 1.0)  # type: ignore[arg-type,return-value]
    partition = Partition(TP, 1, StubLog(), lambda: 0)  # type: ignore[arg-type]
    partition.make_leader(leader(0, (1, 2, 3), 0))
    first = manager.submit(partition, (1, 2))
    await asyncio.wait([first], timeout=10)
    second = await asyncio.wait_for(manager.submit(partition, (1, 2)), 10)
    manager.shutdown()
    return first, second


def test_a_proposal_whose_answer_cannot_be_read_fails_and_the_next_goes_out() -> None:
    """Whatever goes wrong, a proposal resolves: one left unresolved keeps its Partition's
    pending ISR set, and the leader proposes no ISR change again."""
    controller = BrokenController()
    first, second = asyncio.run(after_a_broken_answer(controller))
    assert first.done() and isinstance(first.exception(), KafkaError)
    assert controller.sent == [(0, 0, [1, 2])]
    assert (second.isr, second.partition_epoch) == ((1, 2), 1)
