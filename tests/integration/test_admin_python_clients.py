"""kafka-python 3.x KafkaAdminClient and aiokafka 0.14 AIOKafkaAdminClient against a
`kbroker serve` subprocess: create/delete topics, describe and alter configs,
create partitions, delete records, describe cluster and topics.

And the Kafka 4.x versions kbroker advertises (api_table.py's docstring): kafka-python
3.0 carries Kafka 4.3's schemas, so it sends each at its newest version: Metadata 13
(a top-level error code), DescribeGroups 6 (GROUP_ID_NOT_FOUND for an unknown group,
with its message) and DescribeCluster 2 (include_fenced_brokers, is_fenced)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaProducer, TopicPartition
from kafka.admin import (
    ACLOperation,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.admin import DescribeClusterRequest, DescribeGroupsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.structs import OffsetAndMetadata

from kbroker.common.configs import TOPIC_CONFIGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kp_admin(broker_process: Any) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap_servers,
                             request_timeout_ms=15000)
    try:
        yield admin
    finally:
        admin.close()


def test_kafka_python_create_describe_alter_delete(kp_admin: KafkaAdminClient) -> None:
    topic = _name("kp")
    result = kp_admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "5000"})])
    created = result["topics"][0]
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 2, 1)
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([NewTopic(topic, 2, 1)])
    with pytest.raises(InvalidConfigurationError):
        kp_admin.create_topics([NewTopic(_name("kp"), 1, 1, topic_configs={"nope": "1"})])

    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    everything = kp_admin.describe_configs([resource], config_filter="all")
    configs = everything["topic"][topic]
    assert set(configs) == set(TOPIC_CONFIGS.names())
    assert configs["retention.ms"]["value"] == "5000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    modified = kp_admin.describe_configs([resource])["topic"][topic]
    assert set(modified) == {"retention.ms"}

    # kafka-python's alter_configs keeps the other overrides (it reads them first)
    kp_admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                           configs={"max.message.bytes": "2000"})])
    modified = kp_admin.describe_configs([resource])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "5000", "max.message.bytes": "2000"}

    broker = ConfigResource(ConfigResourceType.BROKER, "0")
    broker_configs = kp_admin.describe_configs([broker], config_filter="all")["broker"]["0"]
    assert broker_configs["num.partitions"]["value"] == "3"
    loggers = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0")
    levels = kp_admin.describe_configs([loggers], config_filter="all")["broker_logger"]["0"]
    assert levels["root"]["value"] == "INFO"

    deleted = kp_admin.delete_topics([topic])
    assert deleted["topics"][0]["error_code"] == 0
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics([topic])


def test_kafka_python_partitions_records_cluster(kp_admin: KafkaAdminClient, broker_process: Any) -> None:
    topic = _name("kpp")
    kp_admin.create_topics([NewTopic(topic, 1, 1)])
    kp_admin.create_partitions({topic: NewPartitions(3)})
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic: NewPartitions(2)})
    described = kp_admin.describe_topics([topic])
    assert [p["partition_index"] for p in described[0]["partitions"]] == [0, 1, 2]

    producer = KafkaProducer(bootstrap_servers=broker_process.bootstrap_servers,
                             enable_idempotence=False, acks=1)
    try:
        for i in range(5):
            producer.send(topic, b"v%d" % i, partition=1)
        producer.flush(15)
    finally:
        producer.close(5)
    low = kp_admin.delete_records({TopicPartition(topic, 1): 3})
    assert low[TopicPartition(topic, 1)]["low_watermark"] == 3

    cluster = kp_admin.describe_cluster()
    assert cluster["controller_id"] == 0 and [b["broker_id"] for b in cluster["brokers"]] == [0]


def test_aiokafka_admin(broker_process: Any) -> None:
    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker_process.bootstrap_servers,
                                    request_timeout_ms=15000)
        await admin.start()
        try:
            topic = _name("aio")
            response = await admin.create_topics([AioNewTopic(topic, 2, 1,
                                                              topic_configs={"retention.bytes": "4096"})])
            assert [e[1] for e in response.topic_errors] == [0]
            [described] = await admin.describe_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic)])
            _err, _msg, _type, _name_, entries = described.resources[0][:5]
            values = {e[0]: e[1] for e in entries}
            assert set(values) == set(TOPIC_CONFIGS.names()) and values["retention.bytes"] == "4096"
            await admin.create_partitions({topic: AioNewPartitions(4)})
            assert topic in await admin.list_topics()
            low = await admin.delete_records({AioTopicPartition(topic, 0): RecordsToDelete(0)})
            assert low == {AioTopicPartition(topic, 0): 0}
            response = await admin.delete_topics([topic])
            assert [e[1] for e in response.topic_error_codes] == [0]
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_kafka_python_describe_topic_partitions_paginates(kp_admin: KafkaAdminClient) -> None:
    first, second = sorted([_name("dtp"), _name("dtp")])
    kp_admin.create_topics([NewTopic(first, 3, 1), NewTopic(second, 2, 1)])
    seen, cursor, pages = [], None, 0
    while True:
        page = kp_admin.describe_topic_partitions([second, first], response_partition_limit=2,
                                                  cursor=cursor)
        pages += 1
        seen += [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [(first, 0), (first, 1), (first, 2), (second, 0), (second, 1)]
    # kafka-python's list_partition_offsets (ListOffsets)
    offsets = kp_admin.list_partition_offsets({TopicPartition(first, 0): OffsetSpec.LATEST})
    assert offsets[TopicPartition(first, 0)].offset == 0


def test_kafka_python_reassignment_on_a_single_broker(kp_admin: KafkaAdminClient) -> None:
    """A single broker answers AlterPartitionReassignments as Kafka's controller with one
    live broker: its own replica is a valid target (nothing moves; kafka-python's own
    test_alter_partition_reassignments expects no error), other brokers are not alive,
    and there is never a reassignment to cancel."""
    topic = _name("kpr")
    kp_admin.create_topics([NewTopic(topic, 1, 1)])
    tp = TopicPartition(topic, 0)
    assert kp_admin.alter_partition_reassignments({tp: [0]}) == {tp: None}
    assert kp_admin.list_partition_reassignments([tp]) == {}
    assert kp_admin.describe_topics([topic])[0]["partitions"][0]["replica_nodes"] == [0]
    missing = TopicPartition(topic, 5)
    assert kp_admin.alter_partition_reassignments(
        {tp: [0, 1], TopicPartition(topic, 5): [0]}) == {
        tp: InvalidReplicationAssignmentError, missing: UnknownTopicOrPartitionError}
    assert kp_admin.alter_partition_reassignments({tp: [0, 0]}) == {
        tp: InvalidReplicationAssignmentError}
    assert kp_admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}


def test_kafka_python_authorized_operations_without_an_authorizer(kp_admin: KafkaAdminClient) -> None:
    """With no authorizer a resource's authorized operations are all its type supports
    (Kafka's AuthHelper.authorizedOperations: AclEntry.supportedOperations), the same
    sets an authorizer that allows everything reports."""
    topic = _name("kpo")
    kp_admin.create_topics([NewTopic(topic, 1, 1)])
    assert set(kp_admin.describe_cluster()["authorized_operations"]) == {
        "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
        "ALTER", "DESCRIBE"}
    topic_ops = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
                 "ALTER_CONFIGS"}
    assert set(kp_admin.describe_topics([topic])[0]["authorized_operations"]) == topic_ops
    bits = kp_admin.describe_topic_partitions([topic])["topics"][0]["topic_authorized_operations"]
    assert {op.name for op in ACLOperation if bits & (1 << op.value)} == topic_ops
    group = _name("kpo-group")  # a group that exists: DescribeGroups v6 answers an unknown one NOT_FOUND
    committed = kp_admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
    assert all(error.errno == 0 for error in committed.values()), committed
    described = kp_admin.describe_groups([group], include_authorized_operations=True)[group]
    assert set(described["authorized_operations"]) == {"READ", "DESCRIBE", "DELETE"}


def _negotiated(admin: KafkaAdminClient, request: type) -> int:
    return admin._manager.broker_version_data.api_version(request)


def test_metadata_v13_top_level_error_code(kp_admin: KafkaAdminClient) -> None:
    assert _negotiated(kp_admin, MetadataRequest) == 13
    topic = _name("k4")
    kp_admin.create_topics([NewTopic(topic, 2, 1)])
    response = kp_admin._manager.run(kp_admin._manager.send, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    assert response.API_VERSION == 13
    assert response.error_code == 0
    assert [(t.name, len(t.partitions), t.error_code) for t in response.topics] == [(topic, 2, 0)]
    assert [p["partition_index"] for p in kp_admin.describe_topics([topic])[0]["partitions"]] == [0, 1]


def test_describe_groups_v6_unknown_group_is_not_found(kp_admin: KafkaAdminClient) -> None:
    assert _negotiated(kp_admin, DescribeGroupsRequest) == 6
    ghost = _name("k4-ghost")
    described = kp_admin.describe_groups([ghost])[ghost]
    assert described["error"] is not None and "GroupIdNotFound" in described["error"]
    assert f"Group {ghost} not found." in described["error"]
    assert described["group_state"] == "Dead" and described["members"] == []

    topic, group = _name("k4"), _name("k4-group")
    kp_admin.create_topics([NewTopic(topic, 1, 1)])
    committed = kp_admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
    assert all(error.errno == 0 for error in committed.values()), committed
    known = kp_admin.describe_groups([group], include_authorized_operations=True)[group]
    assert known["error"] is None and known["group_state"] == "Empty"
    assert set(known["authorized_operations"]) == {"READ", "DESCRIBE", "DELETE"}


def test_describe_cluster_v2_with_fenced_brokers(kp_admin: KafkaAdminClient, broker_process: Any) -> None:
    assert _negotiated(kp_admin, DescribeClusterRequest) == 2
    cluster = kp_admin.describe_cluster()  # kafka-python sets include_fenced_brokers
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["is_fenced"]) for b in cluster["brokers"]] == [(0, False)]
    assert cluster["brokers"][0]["port"] == int(broker_process.bootstrap_servers.rsplit(":", 1)[1])
