"""The Produce and Fetch handlers in process, against a single broker's ReplicaManager on
a fake clock (no socket, no process; as tansu tests each handler against its in-memory
store): what each answers, a parked Fetch completed inside the Produce that feeds it, and
one answered at its deadline."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kbroker.cluster.replica_manager import ReplicaManager
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.config import BrokerConfig
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.records.batch_header import ATTRIBUTES_POS, TRANSACTIONAL_BIT
from kbroker.server.apis import fetch, produce
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse, RequestContext
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime
from kbroker.utils.timer import MockTimer
from tests.batches import values_batch

TOPIC = "t"
PRODUCE_VERSION, FETCH_VERSION = 9, 12


class Topics:
    def __init__(self) -> None:
        self.info = TopicInfo(TOPIC, uuid.uuid4(), 1)

    def get(self, name: str) -> TopicInfo | None:
        return self.info if name == TOPIC else None

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.info if topic_id == self.info.topic_id else None


class Env:
    """What the two handlers use of a broker, over a real log in tmp_path."""

    def __init__(self, path: str) -> None:
        self.timer = MockTimer()
        self.time = MockTime()
        self.log_manager = LogManager([path], LogConfig(), self.time)
        self.log_manager.startup()
        self.topics = Topics()
        self.log_manager.get_or_create_log(TopicPartition(TOPIC, 0), self.topics.info.topic_id)
        self.replica_manager = ReplicaManager(1, self.log_manager, self.topics,  # type: ignore[arg-type]
                                              self.time.milliseconds, timer=self.timer)
        self.services = SimpleNamespace(  # what the two handlers use of RequestServices
            replica_manager=self.replica_manager, topic_stats=self.replica_manager.topic_stats,
            authorizer=None, support=SimpleNamespace(serves_followers=False), topics=self.topics,
            shutting_down=lambda: False, config=BrokerConfig.from_props({"log.dirs": path}))

    def ctx(self, api_key: int, version: int) -> RequestContext:
        return RequestContext(self.services, api_key, version, 1, "test", "PLAINTEXT",  # type: ignore[arg-type]
                              "127.0.0.1:1")

    def produce(self, acks: int = 1, partition: int = 0, topic: str = TOPIC,
                records: bytes | None = None) -> Any:
        request = ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition,
                                                    records=values_batch(3) if records is None else records)])])
        return produce.handle(self.ctx(0, PRODUCE_VERSION), request)

    def fetch(self, offset: int = 0, max_wait_ms: int = 500, min_bytes: int = 1) -> Any:
        request = FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, topics=[
            FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
        return fetch.handle(self.ctx(1, FETCH_VERSION), request)


@pytest.fixture
def env(tmp_path: Any) -> Iterator[Env]:
    e = Env(str(tmp_path))
    yield e
    e.log_manager.shutdown()


def partition_of(response: ProduceResponse) -> ProduceResponse.PartitionProduceResponse:
    return response.responses[0].partition_responses[0]


def fetched(response: FetchResponse) -> FetchResponse.PartitionData:
    return response.responses[0].partitions[0]


def records_size(pd: FetchResponse.PartitionData) -> int:
    records = pd.records
    return len(records) if isinstance(records, bytes | bytearray | memoryview) else int(records.size)


def test_produce_answers_offsets_and_the_errors_kafka_answers(env: Env) -> None:
    first, second = env.produce(), env.produce()
    assert (partition_of(first).base_offset, partition_of(second).base_offset) == (0, 3)
    assert partition_of(env.produce(partition=5)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition_of(env.produce(acks=2)).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert partition_of(env.produce(records=b"")).error_code == ErrorCode.CORRUPT_MESSAGE
    transactional = bytearray(values_batch(1))
    transactional[ATTRIBUTES_POS + 1] |= TRANSACTIONAL_BIT
    assert (partition_of(env.produce(records=bytes(transactional))).error_code
            == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    stats = env.replica_manager.topic_stats.topic(TOPIC)
    assert (stats.messages_in, stats.failed_produce_requests) == (6, 1)


def test_acks_0_answers_nothing_or_closes_the_connection_on_an_error(env: Env) -> None:
    assert env.produce(acks=0) is None
    assert env.produce(acks=0, partition=5) is CLOSE_CONNECTION


def test_acks_all_on_a_single_broker_is_answered_at_once(env: Env) -> None:
    async def scenario() -> None:
        response = env.produce(acks=-1)
        assert isinstance(response, ProduceResponse) and partition_of(response).error_code == ErrorCode.NONE
    asyncio.run(scenario())


def test_a_fetch_with_data_is_answered_at_once(env: Env) -> None:
    env.produce()
    response = env.fetch()
    assert isinstance(response, FetchResponse)
    pd = fetched(response)
    assert (pd.error_code, pd.high_watermark) == (ErrorCode.NONE, 3) and records_size(pd) > 0


def test_a_parked_fetch_is_answered_inside_the_produce_that_feeds_it(env: Env) -> None:
    async def scenario() -> None:
        parked = env.fetch()
        assert isinstance(parked, PendingResponse) and not parked.done
        assert env.replica_manager.delayed_fetch_purgatory.watched == 1
        env.produce()
        assert parked.done  # no loop turn in between
        pd = fetched(await parked)
        assert pd.high_watermark == 3 and records_size(pd) > 0
        assert env.replica_manager.delayed_fetch_purgatory.watched == 0
    asyncio.run(scenario())


def test_a_parked_fetch_is_answered_empty_at_its_deadline(env: Env) -> None:
    async def scenario() -> None:
        parked = env.fetch(max_wait_ms=500)
        assert isinstance(parked, PendingResponse)
        env.timer.advance(0.499)
        assert not parked.done
        env.timer.advance(0.001)
        assert parked.done
        pd = fetched(await parked)
        assert (pd.error_code, records_size(pd)) == (ErrorCode.NONE, 0)
    asyncio.run(scenario())


def test_a_fetch_out_of_range_is_answered_at_once_with_the_error(env: Env) -> None:
    env.produce()
    response = env.fetch(offset=10)
    assert isinstance(response, FetchResponse)
    assert fetched(response).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
