"""Handlers against in-memory fakes of the services they use, in process (as tansu tests
each handler against an in-memory store): no broker, no sockets, no logs on disk.

Where the single broker and a ZooKeeper cluster must differ, one test body runs with
each support object."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kbroker.cluster.metadata_cache import BrokerNode, PartitionMetadata
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.config import BrokerConfig
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kbroker.server.api_table import API_TABLE, CLUSTER_API_TABLE
from kbroker.server.apis import create_topics, list_offsets, metadata
from kbroker.server.metadata_support import MetadataSupport, SingleBrokerSupport, ZkSupport
from kbroker.server.request_context import RequestContext
from kbroker.server.request_services import CurrentBrokerConfig, RequestServices
from kbroker.server.topic_admin import TopicAdmin

LISTENER = "PLAINTEXT"


class FakeTopics:
    """A TopicCatalog in a dict."""

    def __init__(self, *infos: TopicInfo) -> None:
        self.by_name = {i.name: i for i in infos}

    def get(self, name: str) -> TopicInfo | None:
        return self.by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((i for i in self.by_name.values() if i.topic_id == topic_id), None)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self.by_name.values()))

    def __len__(self) -> int:
        return len(self.by_name)

    def names(self) -> list[str]:
        return list(self.by_name)


class FakeCluster:
    """A ClusterView of brokers 1..n; broker 1 leads every partition."""

    def __init__(self, topics: FakeTopics, brokers: int = 1) -> None:
        self.node_id = 1
        self.topics = topics
        self.nodes = [BrokerNode(b, {LISTENER: (f"host{b}", 9090 + b)}) for b in range(1, brokers + 1)]

    @property
    def controller_id(self) -> int:
        return 1

    @property
    def version(self) -> int:
        return 0

    def alive_brokers(self) -> list[BrokerNode]:
        return self.nodes

    def listed_brokers(self) -> list[BrokerNode]:
        return self.nodes

    def broker(self, broker_id: int) -> BrokerNode | None:
        return next((n for n in self.nodes if n.broker_id == broker_id), None)

    def partitions(self, info: TopicInfo) -> list[PartitionMetadata]:
        replicas = tuple(n.broker_id for n in self.nodes)
        return [PartitionMetadata(p, 1, 0, replicas, replicas) for p in range(info.partitions)]

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        info = self.topics.get(tp.topic)
        return None if info is None or tp.partition >= info.partitions else self.partitions(info)[tp.partition]


class RecordingTopicAdmin(TopicAdmin):
    """The shared checks are TopicAdmin's own; the changes land in the fake catalog."""

    def __init__(self, config: CurrentBrokerConfig, topics: FakeTopics, cluster: FakeCluster) -> None:
        super().__init__(config, 1, topics, cluster)  # type: ignore[arg-type]
        self.fake_topics = topics
        self.created: list[tuple[str, dict[int, list[int]], dict[str, str]]] = []

    def check_controller(self) -> None:
        pass

    def plan_assignment(self, partitions: int, rf: int, first_partition: int = 0) -> dict[int, list[int]]:
        return {p: list(range(1, rf + 1)) for p in range(first_partition, first_partition + partitions)}

    def check_replica_assignment(self, assignment: Mapping[int, Any]) -> int:
        return len(next(iter(assignment.values())))

    def check_partition_budget(self, added: int) -> None:
        pass

    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           overrides: Mapping[str, str], timeout_ms: int) -> TopicInfo | None:
        self.created.append((name, dict(assignment), dict(overrides)))
        info = TopicInfo(name, uuid.uuid4(), len(assignment), dict(overrides))
        self.fake_topics.by_name[name] = info
        return info

    async def delete_topic(self, info: TopicInfo, timeout_ms: int) -> None:
        raise NotImplementedError

    async def create_partitions(self, topic: Any, validate_only: bool, timeout_ms: int) -> None:
        raise NotImplementedError

    async def set_topic_configs(self, info: TopicInfo, overrides: Mapping[str, str]) -> None:
        raise NotImplementedError

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        self.created.append((name, {0: [1]}, {}))
        info = TopicInfo(name, uuid.uuid4(), 1)
        self.fake_topics.by_name[name] = info
        return info

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool:
        raise NotImplementedError


class FakeLog:
    log_start_offset = 2
    high_watermark = 10
    last_stable_offset = 8
    log_end_offset = 12

    def fetch_offset_by_timestamp(self, ts: int) -> tuple[int, int, int | None] | None:
        return (5, ts + 1, 0) if ts < 1000 else None


class FakePartition:
    leader_epoch = 3

    def local_log(self) -> FakeLog:
        return FakeLog()


class FakeReplicaManager:
    """Leads partition 0 of topic "t"; nothing else."""

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> FakePartition:
        if tp != TopicPartition("t", 0):
            raise KafkaError("not here", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return FakePartition()

    def leader_partitions(self) -> list[FakePartition]:
        return []


class FakeLogManager:
    def all_logs(self) -> dict[TopicPartition, FakeLog]:
        return {}


class FakeMetadataCache:
    ready = True

    def get(self, name: str) -> TopicInfo | None:
        return None


def single_broker_support() -> MetadataSupport:
    return SingleBrokerSupport(None, None, API_TABLE, None)  # type: ignore[arg-type]


def zk_support() -> MetadataSupport:
    return ZkSupport(None, None, FakeMetadataCache(), FakeReplicaManager(),  # type: ignore[arg-type]
                     FakeLogManager(), CLUSTER_API_TABLE)


SUPPORTS = {"single": single_broker_support, "zk": zk_support}


def services(*infos: TopicInfo, support: MetadataSupport | None = None, brokers: int = 1,
             **props: str) -> RequestServices:
    config = CurrentBrokerConfig(BrokerConfig.from_props({"node.id": "1", **props}))
    topics = FakeTopics(*infos)
    cluster = FakeCluster(topics, brokers)
    unused: Any = None
    return RequestServices(
        dynamic_config=config, node_id=1, cluster_id="fake-cluster", time=unused,
        topics=topics, cluster=cluster,  # type: ignore[arg-type]
        support=support or single_broker_support(),
        topic_admin=RecordingTopicAdmin(config, topics, cluster),
        replica_manager=FakeReplicaManager(),  # type: ignore[arg-type]
        log_manager=unused, fetch_sessions=unused,
        group_coordinator=unused, share_groups=unused, offsets_topic=unused, txn_coordinator=unused,
        transaction_topic=unused, marker_writer=unused, producer_id_manager=unused,
        authorizer=None, client_quotas=unused, scram_credentials=unused, topic_stats=unused,
        client_metrics_configs=unused, client_metrics_manager=unused,
        metadata_topic_cache={}, shutting_down=lambda: False)


def context(s: RequestServices, api_key: int, version: int) -> RequestContext:
    return RequestContext(services=s, api_key=api_key, api_version=version, correlation_id=1,
                          client_id="test", listener_name=LISTENER, peer="127.0.0.1:5000")


def roundtrip(response: MetadataResponse, version: int) -> MetadataResponse:
    """As a client reads it (cached topic entries are written pre-encoded)."""
    w = Writer()
    response.encode(w, version)
    return MetadataResponse.decode(Reader(w.to_bytes()), version)


# -- Metadata


def test_metadata_lists_the_brokers_and_topics_of_the_services() -> None:
    s = services(TopicInfo("a", uuid.uuid4(), 2), TopicInfo("b", uuid.uuid4(), 1), brokers=3)
    response = metadata.handle(context(s, 3, 12), MetadataRequest(topics=None))
    assert isinstance(response, MetadataResponse)
    got = roundtrip(response, 12)
    assert [(b.node_id, b.host, b.port) for b in got.brokers] == [
        (1, "host1", 9091), (2, "host2", 9092), (3, "host3", 9093)]
    assert got.cluster_id == "fake-cluster" and got.controller_id == 1
    assert {t.name: [p.replica_nodes for p in t.partitions] for t in got.topics} == {
        "a": [[1, 2, 3], [1, 2, 3]], "b": [[1, 2, 3]]}


def test_metadata_auto_creates_through_the_topic_admin() -> None:
    s = services(**{"auto.create.topics.enable": "true"})
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="new")])
    got = roundtrip(metadata.handle(context(s, 3, 12), request), 12)  # type: ignore[arg-type]
    assert [(t.name, t.error_code) for t in got.topics] == [("new", ErrorCode.NONE)]
    assert isinstance(s.topic_admin, RecordingTopicAdmin)
    assert [c[0] for c in s.topic_admin.created] == ["new"]


def test_metadata_of_an_unknown_topic_without_auto_creation() -> None:
    s = services(**{"auto.create.topics.enable": "false"})
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="nope")],
                              allow_auto_topic_creation=False)
    got = roundtrip(metadata.handle(context(s, 3, 12), request), 12)  # type: ignore[arg-type]
    assert [(t.name, t.error_code) for t in got.topics] == [("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_metadata_waits_for_a_cluster_broker_to_hear_from_the_controller() -> None:
    support = zk_support()
    assert isinstance(support, ZkSupport)
    cache = support.metadata_cache
    cache.ready = False  # type: ignore[misc]

    def first_update_metadata() -> None:
        cache.ready = True  # type: ignore[misc]
        support.on_metadata_update()

    s = services(TopicInfo("a", uuid.uuid4(), 1), support=support)
    answer = metadata.handle(context(s, 3, 12), MetadataRequest(topics=None))
    assert not isinstance(answer, MetadataResponse)  # it waits

    async def run() -> MetadataResponse:
        waiting = asyncio.ensure_future(answer)  # type: ignore[arg-type]
        # runs after the handler's first step, which parks it on the next UpdateMetadata
        asyncio.get_running_loop().call_soon(first_update_metadata)
        return await waiting

    got = roundtrip(asyncio.run(run()), 12)
    assert [t.name for t in got.topics] == ["a"]


# -- CreateTopics


def creatable(name: str, partitions: int = -1, rf: int = -1, **configs: str) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])


def create(s: RequestServices, *topics: CreateTopicsRequest.CreatableTopic, validate_only: bool = False,
           version: int = 5) -> dict[str, Any]:
    request = CreateTopicsRequest(topics=list(topics), validate_only=validate_only)
    response = asyncio.run(create_topics.handle(context(s, 19, version), request))
    return {t.name: t for t in response.topics}


def test_create_topics_resolves_the_defaults_and_creates_through_the_admin() -> None:
    s = services(brokers=3, **{"num.partitions": "4", "default.replication.factor": "2"})
    got = create(s, creatable("t", retention_ms="1000"))["t"]
    assert (got.error_code, got.num_partitions, got.replication_factor) == (ErrorCode.NONE, 4, 2)
    assert got.topic_id == s.topics.get("t").topic_id  # type: ignore[union-attr]
    assert isinstance(s.topic_admin, RecordingTopicAdmin)
    assert s.topic_admin.created == [("t", {p: [1, 2] for p in range(4)}, {"retention.ms": "1000"})]
    assert {c.name: c.value for c in got.configs}["retention.ms"] == "1000"


def test_create_topics_validate_only_checks_and_creates_nothing() -> None:
    s = services()
    got = create(s, creatable("t", 2, 1), validate_only=True)["t"]
    assert got.error_code == ErrorCode.NONE and got.num_partitions == 2
    assert isinstance(s.topic_admin, RecordingTopicAdmin)
    assert s.topic_admin.created == [] and "t" not in s.topics


def test_create_topics_answers_each_check_with_kafkas_error() -> None:
    s = services(TopicInfo("taken", uuid.uuid4(), 1), brokers=1)
    got = create(s, creatable("dup"), creatable("dup"), creatable("taken"), creatable("bad name!"),
                 creatable("zero", 0), creatable("wide", 1, 3), creatable("conf", 1, 1, no_such_key="x"))
    assert {n: r.error_code for n, r in got.items()} == {
        "dup": ErrorCode.INVALID_REQUEST,
        "taken": ErrorCode.TOPIC_ALREADY_EXISTS,
        "bad name!": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "zero": ErrorCode.INVALID_PARTITIONS,
        "wide": ErrorCode.INVALID_REPLICATION_FACTOR,
        "conf": ErrorCode.INVALID_CONFIG,
    }
    assert got["wide"].error_message == "Replication factor: 3 larger than available brokers: 1."
    assert isinstance(s.topic_admin, RecordingTopicAdmin)
    assert s.topic_admin.created == []


def test_create_topics_refuses_an_assignment_together_with_a_count() -> None:
    s = services()
    topic = creatable("t", 1, -1)
    topic.assignments = [CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])]
    assert create(s, topic)["t"].error_code == ErrorCode.INVALID_REQUEST


# -- ListOffsets


def list_offsets_request(timestamp: int, replica_id: int = -1, partition: int = 0,
                         isolation_level: int = 0) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=replica_id, isolation_level=isolation_level, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])


def offset_of(s: RequestServices, request: ListOffsetsRequest, version: int = 7) -> tuple[int, int, int]:
    p = list_offsets.handle(context(s, 2, version), request).topics[0].partitions[0]
    return p.error_code, p.offset, p.leader_epoch


@pytest.mark.parametrize("mode", sorted(SUPPORTS))
def test_list_offsets_answers_from_the_leaders_log(mode: str) -> None:
    s = services(support=SUPPORTS[mode]())
    assert offset_of(s, list_offsets_request(list_offsets.LATEST)) == (ErrorCode.NONE, 10, 3)
    assert offset_of(s, list_offsets_request(list_offsets.LATEST, isolation_level=1)) == (
        ErrorCode.NONE, 8, 3)
    assert offset_of(s, list_offsets_request(list_offsets.EARLIEST)) == (ErrorCode.NONE, 2, 3)
    assert offset_of(s, list_offsets_request(500)) == (ErrorCode.NONE, 5, 0)
    assert offset_of(s, list_offsets_request(5000)) == (ErrorCode.NONE, -1, -1)
    assert offset_of(s, list_offsets_request(list_offsets.LATEST, partition=1))[0] == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)


@pytest.mark.parametrize(("mode", "latest"), [("single", 10), ("zk", 12)])
def test_list_offsets_gives_a_follower_the_log_end_in_a_cluster_only(mode: str, latest: int) -> None:
    """A single broker has no followers: a replica id there is treated as a consumer's."""
    s = services(support=SUPPORTS[mode]())
    assert offset_of(s, list_offsets_request(list_offsets.LATEST, replica_id=2)) == (
        ErrorCode.NONE, latest, 3)
