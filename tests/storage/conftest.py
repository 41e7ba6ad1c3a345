"""Fixtures for storage tests: a mock clock, small segments, a LogManager in tmp_path."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime

TP = TopicPartition("topic", 0)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture
def time() -> MockTime:
    return MockTime()


@pytest.fixture
def config() -> LogConfig:
    return LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=1024,
                     file_delete_delay_ms=0)


class Env:
    """A LogManager over one log dir that tests can restart or crash."""

    def __init__(self, path: str, config: LogConfig, time: MockTime) -> None:
        self.path = path
        self.config = config
        self.time = time
        self.manager = self._start()

    def _start(self) -> LogManager:
        m = LogManager([self.path], self.config, self.time, recovery_threads=2)
        m.startup()
        return m

    @property
    def log(self) -> Log:
        return self.manager.get_or_create_log(TP, TOPIC_ID)

    def restart(self) -> Log:
        self.manager.shutdown()
        self.manager = self._start()
        return self.log

    def crash(self) -> None:
        self.manager.abandon()

    def start(self) -> Log:
        self.manager = self._start()
        return self.log


@pytest.fixture
def env(tmp_path: object, config: LogConfig, time: MockTime) -> Iterator[Env]:
    e = Env(str(tmp_path), config, time)
    yield e
    if e.manager._started:
        e.manager.shutdown()
