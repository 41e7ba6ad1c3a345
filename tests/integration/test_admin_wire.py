"""The admin APIs at every advertised version, over a raw socket, against an embedded
broker: the cases real clients do not reach easily (DeleteTopics by topic id,
DescribeTopicPartitions pagination, IncrementalAlterConfigs edge cases,
DescribeConfigs v0 and documentation) and persistence across a restart."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.common.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.alter_configs import AlterConfigsRequest
from kbroker.protocol.messages.create_partitions import CreatePartitionsRequest
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.delete_records import DeleteRecordsRequest
from kbroker.protocol.messages.delete_topics import DeleteTopicsRequest
from kbroker.protocol.messages.describe_cluster import DescribeClusterRequest
from kbroker.protocol.messages.describe_configs import DescribeConfigsRequest
from kbroker.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kbroker.server.api_table import API_TABLE

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

Creatable = CreateTopicsRequest.CreatableTopic
TopicConfig = CreateTopicsRequest.CreatableTopicConfig
DTPTopic = DescribeTopicPartitionsRequest.TopicRequest
IncOp = IncrementalAlterConfigsRequest.AlterableConfig
IncResource = IncrementalAlterConfigsRequest.AlterConfigsResource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _props(tmp_path: Path) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
            "num.partitions": "2"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(_props(tmp_path)) as b:
        yield b


@pytest.fixture
def wire(broker: Broker) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap_servers) as w:
        yield w


def _versions(key: int) -> range:
    spec = API_TABLE[key]
    return range(spec.min_version, spec.max_version + 1)


def _create(wire: WireClient, name: str, partitions: int = 1, version: int = 7,
            configs: dict[str, str] | None = None) -> Any:
    topic = Creatable(name=name, num_partitions=partitions, replication_factor=1,
                      configs=[TopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    response = wire.call(CreateTopicsRequest(topics=[topic], timeout_ms=5000), version)
    return response.topics[0]


def _describe_topic(wire: WireClient, name: str, version: int = 4, **kw: Any) -> Any:
    res = DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=name,
                                                         configuration_keys=None)
    return wire.call(DescribeConfigsRequest(resources=[res], **kw), version).results[0]


@pytest.mark.parametrize("version", _versions(19))
def test_create_topics_every_version(wire: WireClient, version: int) -> None:
    name = f"ct-v{version}"
    result = _create(wire, name, 3, version, {"retention.ms": "5000"})
    assert result.error_code == ErrorCode.NONE
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs}
        assert set(configs) == set(TOPIC_CONFIGS.names())
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("5000", 1)
    if version >= 7:
        assert result.topic_id != ZERO_UUID
    assert _create(wire, name, 3, version).error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_checks(wire: WireClient) -> None:
    both = Creatable(name="both", num_partitions=2, replication_factor=1,
                     assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                         partition_index=0, broker_ids=[0])])
    assigned = Creatable(name="assigned", num_partitions=-1, replication_factor=-1,
                         assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                             partition_index=i, broker_ids=[0]) for i in range(2)])
    elsewhere = Creatable(name="elsewhere", num_partitions=-1, replication_factor=-1,
                          assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                              partition_index=0, broker_ids=[7])])
    dup = Creatable(name="dup", num_partitions=1, replication_factor=1)
    default = Creatable(name="default", num_partitions=-1, replication_factor=-1)
    null_cfg = Creatable(name="nullcfg", num_partitions=1, replication_factor=1,
                         configs=[TopicConfig(name="retention.ms", value=None)])
    request = CreateTopicsRequest(topics=[both, assigned, elsewhere, dup, dup, default, null_cfg],
                                  timeout_ms=5000)
    got = [(t.name, t.error_code, t.num_partitions) for t in wire.call(request, 7).topics]
    assert got == [
        ("both", ErrorCode.INVALID_REQUEST, -1),
        ("assigned", ErrorCode.NONE, 2),
        ("elsewhere", ErrorCode.INVALID_REPLICA_ASSIGNMENT, -1),
        ("dup", ErrorCode.INVALID_REQUEST, -1),
        ("dup", ErrorCode.INVALID_REQUEST, -1),
        ("default", ErrorCode.NONE, 2),
        ("nullcfg", ErrorCode.INVALID_CONFIG, -1),
    ]
    assert _create(wire, "huge", 2**31 - 1).error_code == ErrorCode.INVALID_PARTITIONS
    assert _create(wire, "a.b").error_code == ErrorCode.NONE
    assert _create(wire, "a_b").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION  # collides


@pytest.mark.parametrize("version", _versions(20))
def test_delete_topics_every_version(wire: WireClient, version: int) -> None:
    name = f"dt-v{version}"
    assert _create(wire, name).error_code == ErrorCode.NONE
    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name),
                                              DeleteTopicsRequest.DeleteTopicState(name="nope")])
    else:
        request = DeleteTopicsRequest(topic_names=[name, "nope"], timeout_ms=5000)
    got = [(r.name, r.error_code) for r in wire.call(request, version).responses]
    assert got == [(name, ErrorCode.NONE), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_delete_topics_by_id(wire: WireClient, broker: Broker) -> None:
    topic_id = _create(wire, "byid").topic_id
    state = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(topics=[state(topic_id=topic_id), state(topic_id=uuid.uuid4()),
                                          state(name="x", topic_id=topic_id)])
    got = [(r.name, r.error_code) for r in wire.call(request, 6).responses]
    assert got == [("byid", ErrorCode.NONE), (None, ErrorCode.UNKNOWN_TOPIC_ID),
                   ("x", ErrorCode.INVALID_REQUEST)]
    assert broker.state is not None and "byid" not in broker.state.topics


@pytest.mark.parametrize("version", _versions(37))
def test_create_partitions_every_version(wire: WireClient, version: int) -> None:
    name = f"cp-v{version}"
    _create(wire, name, 1)
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(topics=[
        topic(name=name, count=3, assignments=None),
        topic(name="nope", count=3, assignments=None),
        topic(name=name + "x", count=1, assignments=None),
    ], timeout_ms=5000, validate_only=False)
    got = [(r.name, r.error_code) for r in wire.call(request, version).results]
    assert got == [(name, ErrorCode.NONE), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                   (name + "x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    bad = CreatePartitionsRequest(topics=[topic(name=name, count=5, assignments=[
        CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[0])])], timeout_ms=5000)
    assert wire.call(bad, version).results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    same = CreatePartitionsRequest(topics=[topic(name=name, count=3, assignments=None)])
    assert wire.call(same, version).results[0].error_code == ErrorCode.INVALID_PARTITIONS


@pytest.mark.parametrize("version", _versions(21))
def test_delete_records_every_version(wire: WireClient, broker: Broker, version: int) -> None:
    name = f"dr-v{version}"
    _create(wire, name, 1)
    part = DeleteRecordsRequest.DeleteRecordsPartition
    request = DeleteRecordsRequest(topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
            part(partition_index=0, offset=-1), part(partition_index=0, offset=5),
            part(partition_index=3, offset=0)]),
    ], timeout_ms=5000)
    got = [(p.partition_index, p.error_code, p.low_watermark)
           for p in wire.call(request, version).topics[0].partitions]
    assert got == [(0, ErrorCode.NONE, 0), (0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),
                   (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_delete_records_on_a_compacted_topic_is_a_policy_violation(wire: WireClient) -> None:
    _create(wire, "compacted", 1, configs={"cleanup.policy": "compact"})
    request = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name="compacted", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(
            partition_index=0, offset=0)])])
    assert wire.call(request, 2).topics[0].partitions[0].error_code == ErrorCode.POLICY_VIOLATION


@pytest.mark.parametrize("version", _versions(32))
def test_describe_configs_every_version(wire: WireClient, version: int) -> None:
    _create(wire, "dc", 1, configs={"segment.bytes": "2000000"})
    result = _describe_topic(wire, "dc", version, include_synonyms=True, include_documentation=True)
    assert result.error_code == ErrorCode.NONE
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS.names())
    seg, ret = configs["segment.bytes"], configs["retention.ms"]
    assert seg.value == "2000000" and ret.value == "604800000"
    if version == 0:
        assert (seg.is_default, ret.is_default) == (False, True)
    else:
        assert (seg.config_source, ret.config_source) == (1, 5)
        assert [(s.name, s.source) for s in seg.synonyms] == [("segment.bytes", 1),
                                                             ("log.segment.bytes", 5)]
    if version >= 3:
        assert (seg.config_type, configs["cleanup.policy"].config_type) == (3, 7)  # INT, LIST
        assert seg.documentation
    unknown = _describe_topic(wire, "nope", version)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_filters_and_broker_resources(wire: WireClient, broker: Broker) -> None:
    _create(wire, "dcf", 1)
    res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[
        res(resource_type=2, resource_name="dcf", configuration_keys=["retention.ms", "nope"]),
        res(resource_type=4, resource_name="0", configuration_keys=None),
        res(resource_type=4, resource_name="5", configuration_keys=None),
        res(resource_type=4, resource_name="", configuration_keys=None),
        res(resource_type=16, resource_name="metrics", configuration_keys=None),
        res(resource_type=2, resource_name="dcf", configuration_keys=[]),
        res(resource_type=32, resource_name="a-group", configuration_keys=None),
    ], include_synonyms=False)
    topic, mine, other, default, metrics, empty, group = wire.call(request, 4).results
    assert [c.name for c in topic.configs] == ["retention.ms"]
    assert len(empty.configs) == len(TOPIC_CONFIGS)  # an empty key list means all, as in Kafka
    names = {c.name: c for c in mine.configs}
    assert names["num.partitions"].value == "2" and names["num.partitions"].config_source == 4
    assert names["log.segment.bytes"].config_source == 5 and not names["log.segment.bytes"].read_only
    assert names["log.cleaner.threads"].read_only  # read only at start
    assert other.error_code == ErrorCode.INVALID_REQUEST
    assert (default.error_code, default.configs) == (ErrorCode.NONE, [])
    # CLIENT_METRICS: a subscription that does not exist has no configs (Kafka's ConfigHelper)
    assert (metrics.error_code, metrics.configs) == (ErrorCode.NONE, [])
    # GROUP (KIP-848/932 group configs): a group with none set shows the defaults
    assert group.error_code == ErrorCode.NONE
    assert "share.auto.offset.reset" in {c.name for c in group.configs}


def test_describe_configs_documentation_and_types_are_the_tables(wire: WireClient) -> None:
    _create(wire, "dcd", 1)
    topic = _describe_topic(wire, "dcd", include_synonyms=True, include_documentation=True)
    assert {c.name: (c.documentation, c.config_type) for c in topic.configs} == {
        k.name: (k.doc, k.type) for k in TOPIC_CONFIGS}
    res = DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0",
                                                         configuration_keys=None)
    broker = wire.call(DescribeConfigsRequest(resources=[res], include_documentation=True), 4)
    assert {c.name: (c.documentation, c.config_type) for c in broker.results[0].configs} == {
        k.name: (k.doc, k.type) for k in BROKER_CONFIGS}


@pytest.mark.parametrize("version", _versions(33))
def test_alter_configs_every_version(wire: WireClient, broker: Broker, version: int) -> None:
    name = f"ac-v{version}"
    _create(wire, name, 1, configs={"retention.ms": "1000"})
    cfg = AlterConfigsRequest.AlterableConfig
    res = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(resources=[
        res(resource_type=2, resource_name=name, configs=[cfg(name="max.message.bytes", value="5000")]),
        res(resource_type=2, resource_name="nope", configs=[]),
        res(resource_type=4, resource_name="0", configs=[cfg(name="num.partitions", value="5")]),
    ], validate_only=False)
    got = [r.error_code for r in wire.call(request, version).responses]
    assert got == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_CONFIG]
    assert broker.state is not None
    plog = broker.state.get_log(name, 0)
    assert (plog.config.max_message_bytes, plog.config.retention_ms) == (5000, 604800000)
    null = AlterConfigsRequest(resources=[res(resource_type=2, resource_name=name,
                                              configs=[cfg(name="retention.ms", value=None)])])
    assert wire.call(null, version).responses[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", _versions(44))
def test_incremental_alter_configs_every_version(wire: WireClient, broker: Broker, version: int) -> None:
    name = f"iac-v{version}"
    _create(wire, name, 1, configs={"retention.ms": "1000", "segment.bytes": "100000"})

    def alter(*ops: IncOp, validate_only: bool = False) -> int:
        request = IncrementalAlterConfigsRequest(resources=[IncResource(
            resource_type=2, resource_name=name, configs=list(ops))], validate_only=validate_only)
        return int(wire.call(request, version).responses[0].error_code)

    assert alter(IncOp(name="retention.bytes", config_operation=SET, value="7777"),
                 IncOp(name="segment.bytes", config_operation=DELETE, value=None),
                 IncOp(name="leader.replication.throttled.replicas", config_operation=APPEND,
                       value="0:0,1:0")) == ErrorCode.NONE
    assert broker.state is not None
    info = broker.state.topics.get(name)
    assert info is not None and info.configs == {
        "retention.ms": "1000", "retention.bytes": "7777",
        "leader.replication.throttled.replicas": "0:0,1:0"}
    plog = broker.state.get_log(name, 0)
    assert (plog.config.retention_bytes, plog.config.segment_bytes) == (7777, 1073741824)
    assert alter(IncOp(name="leader.replication.throttled.replicas", config_operation=SUBTRACT,
                       value="0:0")) == ErrorCode.NONE
    assert info.configs["leader.replication.throttled.replicas"] == "1:0"
    assert alter(IncOp(name="retention.ms", config_operation=SET, value="1"),
                 validate_only=True) == ErrorCode.NONE
    assert info.configs["retention.ms"] == "1000"
    assert alter(IncOp(name="retention.ms", config_operation=SET, value="1"),
                 IncOp(name="retention.ms", config_operation=DELETE, value=None)) == ErrorCode.INVALID_REQUEST
    assert alter(IncOp(name="retention.ms", config_operation=9, value="1")) == ErrorCode.INVALID_REQUEST
    assert alter(IncOp(name="retention.ms", config_operation=SET, value=None)) == ErrorCode.INVALID_REQUEST
    assert alter(IncOp(name="bogus", config_operation=SET, value="1")) == ErrorCode.INVALID_CONFIG
    assert alter(IncOp(name="retention.ms", config_operation=APPEND, value="1")) == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize("version", _versions(60))
def test_describe_cluster_every_version(wire: WireClient, broker: Broker, version: int) -> None:
    response = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=True), version)
    assert response.error_code == ErrorCode.NONE and response.controller_id == 0
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.port)]
    assert response.cluster_authorized_operations > 0
    if version >= 1:
        controllers = wire.call(DescribeClusterRequest(endpoint_type=2), version)
        assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    if version >= 2:  # KIP-1073: no kbroker broker is fenced, so the flag adds none
        fenced = wire.call(DescribeClusterRequest(include_fenced_brokers=True), version)
        assert [(b.broker_id, b.is_fenced) for b in fenced.brokers] == [(0, False)]


def test_describe_topic_partitions_pages_with_a_cursor(wire: WireClient) -> None:
    for name, count in (("pa", 3), ("pb", 1), ("pc", 4)):
        _create(wire, name, count)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        response = wire.call(DescribeTopicPartitionsRequest(
            topics=[DTPTopic(name=n) for n in ("pc", "pa", "pb", "zz")],
            response_partition_limit=3, cursor=cursor), 0)
        pages += 1
        for t in response.topics:
            if t.error_code:
                seen.append((t.name, -t.error_code))
            seen += [(t.name, p.partition_index) for p in t.partitions]
        if response.next_cursor is None:
            break
        cursor = DescribeTopicPartitionsRequest.Cursor(
            topic_name=response.next_cursor.topic_name,
            partition_index=response.next_cursor.partition_index)
    assert pages == 3
    assert seen == [("pa", 0), ("pa", 1), ("pa", 2), ("pb", 0), ("pc", 0), ("pc", 1),
                    ("pc", 2), ("pc", 3), ("zz", -ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    everything = wire.call(DescribeTopicPartitionsRequest(topics=[]), 0)
    assert [t.name for t in everything.topics] == ["pa", "pb", "pc"]
    bad = wire.call(DescribeTopicPartitionsRequest(
        topics=[DTPTopic(name="pa")],
        cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="pb", partition_index=0)), 0)
    assert [t.error_code for t in bad.topics] == [ErrorCode.INVALID_REQUEST]


def test_admin_changes_survive_a_restart(tmp_path: Path) -> None:
    props = _props(tmp_path)
    with Broker(props) as b, WireClient(b.bootstrap_servers) as w:
        _create(w, "keep", 1, configs={"retention.ms": "1000"})
        _create(w, "gone", 1)
        inc = IncrementalAlterConfigsRequest(resources=[IncResource(
            resource_type=2, resource_name="keep",
            configs=[IncOp(name="max.message.bytes", config_operation=SET, value="4242")])])
        assert w.call(inc, 1).responses[0].error_code == ErrorCode.NONE
        grow = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="keep", count=3, assignments=None)])
        assert w.call(grow, 3).results[0].error_code == ErrorCode.NONE
        assert w.call(DeleteTopicsRequest(topic_names=["gone"]), 5).responses[0].error_code == 0
    with Broker(props) as b, WireClient(b.bootstrap_servers) as w:
        assert b.state is not None
        assert b.state.topics.names() == ["keep"]
        info = b.state.topics.get("keep")
        assert info is not None and info.partitions == 3
        assert b.state.get_log("keep", 2).config.max_message_bytes == 4242
        configs = {c.name: c.value for c in _describe_topic(w, "keep").configs}
        assert (configs["retention.ms"], configs["max.message.bytes"]) == ("1000", "4242")


def test_internal_topics_cannot_be_deleted_or_grown(wire: WireClient, broker: Broker) -> None:
    assert broker.state is not None
    wire.call(FindCoordinatorRequest(key="some-group", key_type=0), 3)  # creates __consumer_offsets
    deleted = wire.call(DeleteTopicsRequest(topic_names=["__consumer_offsets"]), 5)
    assert deleted.responses[0].error_code == ErrorCode.INVALID_REQUEST
    grow = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="__consumer_offsets", count=100, assignments=None)])
    assert wire.call(grow, 3).results[0].error_code == ErrorCode.INVALID_REQUEST
    assert "__consumer_offsets" in broker.state.topics


def test_broker_logger_levels_are_described_and_set_live(wire: WireClient) -> None:
    logger = logging.getLogger("kbroker.server.apis.create_topics")
    before = logger.level
    res = DescribeConfigsRequest.DescribeConfigsResource
    try:
        described = wire.call(DescribeConfigsRequest(resources=[res(
            resource_type=8, resource_name="0", configuration_keys=None)]), 4).results[0]
        levels = {c.name: (c.value, c.config_source) for c in described.configs}
        assert "root" in levels and levels["kbroker.server.apis.create_topics"][1] == 6

        def alter(*ops: IncOp, version: int = 1) -> int:
            request = IncrementalAlterConfigsRequest(resources=[IncResource(
                resource_type=8, resource_name="0", configs=list(ops))])
            return int(wire.call(request, version).responses[0].error_code)

        name = "kbroker.server.apis.create_topics"
        assert alter(IncOp(name=name, config_operation=SET, value="TRACE")) == ErrorCode.NONE
        assert logger.level == 5
        again = wire.call(DescribeConfigsRequest(resources=[res(
            resource_type=8, resource_name="0", configuration_keys=[name])]), 4).results[0]
        assert [(c.name, c.value) for c in again.configs] == [(name, "TRACE")]
        assert alter(IncOp(name=name, config_operation=DELETE, value=None)) == ErrorCode.NONE
        assert logger.level == logging.NOTSET
        assert alter(IncOp(name=name, config_operation=SET, value="LOUD")) == ErrorCode.INVALID_CONFIG
        assert alter(IncOp(name="no.such", config_operation=SET, value="INFO")) == ErrorCode.INVALID_CONFIG
        assert alter(IncOp(name="root", config_operation=DELETE, value=None)) == ErrorCode.INVALID_REQUEST
        assert alter(IncOp(name=name, config_operation=APPEND, value="INFO")) == ErrorCode.INVALID_REQUEST
        legacy = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=8, resource_name="0",
            configs=[AlterConfigsRequest.AlterableConfig(name=name, value="INFO")])])
        assert wire.call(legacy, 2).responses[0].error_code == ErrorCode.INVALID_REQUEST
    finally:
        logger.setLevel(before)
