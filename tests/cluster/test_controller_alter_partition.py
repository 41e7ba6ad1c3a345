"""The controller's AlterPartition rules, on a context filled by hand (no ZooKeeper is
reached: no write is needed in these cases).

A leader retries an AlterPartition whose answer it lost (the connection to the
controller broke after the write). The partition is then already in the proposed state,
at a newer partition epoch than the retry names: Kafka answers it with the current state
(the check comes before the partition epoch's, so that retries are idempotent) and the
leader learns the partition epoch it missed. Answered INVALID_UPDATE_VERSION instead,
the leader would keep its old partition epoch and every later ISR change of that
partition would fail the same way until the next LeaderAndIsr."""

from __future__ import annotations

import asyncio
import uuid

from kbroker.cluster.controller.controller import ControllerConfig, KafkaController
from kbroker.cluster.controller.events import AlterPartitionReceived
from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def controller_with(state: LeaderAndIsr) -> KafkaController:
    controller = KafkaController(ControllerConfig(broker_id=1, listener="PLAINTEXT"), None)  # type: ignore[arg-type]
    ctx = controller.ctx
    ctx.brokers = {b: BrokerRegistration(b, (("PLAINTEXT", "127.0.0.1", 9090 + b),), None, 100 + b)
                   for b in (1, 2, 3)}
    ctx.assignments = {TP.topic: TopicAssignment(TP.topic, uuid.uuid4(), {0: [1, 2, 3]})}
    ctx.states = {TP: state}
    return controller


def alter(controller: KafkaController, leader_epoch: int, partition_epoch: int,
          isr: tuple[int, ...]) -> tuple[int, LeaderAndIsr | None]:
    answers = asyncio.run(controller.process(AlterPartitionReceived(
        1, 101, ((TP, leader_epoch, partition_epoch, isr),))))
    return answers[TP]


def test_a_retried_change_already_applied_gets_the_current_state() -> None:
    controller = controller_with(LeaderAndIsr(1, 4, (1, 2), 1, zk_version=8))
    code, state = alter(controller, 4, 7, (1, 2))  # proposed at partition epoch 7, written as 8
    assert code == ErrorCode.NONE
    assert state is not None and (state.isr, state.zk_version) == ((1, 2), 8)


def test_a_change_from_an_old_partition_epoch_is_refused() -> None:
    controller = controller_with(LeaderAndIsr(1, 4, (1, 2), 1, zk_version=8))
    assert alter(controller, 4, 7, (1, 2, 3))[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert alter(controller, 3, 8, (1, 2))[0] == ErrorCode.FENCED_LEADER_EPOCH
