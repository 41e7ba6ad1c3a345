"""log.flush.offset.checkpoint.interval.ms: how often the recovery points are checkpointed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.storage.checkpoints import RECOVERY_POINT_CHECKPOINT

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {"log.flush.offset.checkpoint.interval.ms": "50"}


def test_recovery_points_are_checkpointed_every_interval(kbroker_broker: Broker) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name="cp", num_partitions=1, replication_factor=1,
                                               configs=[])
    with WireClient(kbroker_broker.bootstrap_servers) as wire:
        created = wire.call(CreateTopicsRequest(topics=[topic], timeout_ms=5000), 7)
    assert created.topics[0].error_code == ErrorCode.NONE
    checkpoint = Path(kbroker_broker.config.log_dirs[0]) / RECOVERY_POINT_CHECKPOINT
    # Creating a topic writes no checkpoint: the periodic one (default: a minute) names it.
    while not (checkpoint.exists() and "cp 0 " in checkpoint.read_text()):
        time.sleep(0.02)
