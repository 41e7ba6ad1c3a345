"""What the single broker and the cluster must do alike, one test body for both
(tests/integration/any_broker.py): topics and their errors, partitions added, topic and
dynamic broker configs, produce with acks 0/1/all read back, min.insync.replicas refusing
a short ISR, a consumer group's life, transactions read committed, the last stable
offset an open transaction holds, DeleteRecords, ListOffsets by timestamp, an idempotent
producer, and the errors of a missing topic, a bad config and an offset beyond the end,
all through confluent-kafka and kafka-python as users send them. Where the modes differ
on purpose (replicas need brokers), the test reads it from the AnyBroker, and the
assertions hold in both."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.cluster.support import wait_until

from .any_broker import AnyBroker, any_broker_fixture, fresh  # noqa: F401 - a fixture

pytestmark = pytest.mark.timeout(300)

TOPIC_CONFIG = 1  # DYNAMIC_TOPIC_CONFIG, the ConfigSource of a topic's override
BROKER_CONFIG = 2  # DYNAMIC_BROKER_CONFIG


def _create_error(b: AnyBroker, topic: NewTopic) -> int:
    """The error code CreateTopics answers for `topic` (0: created)."""
    try:
        admin = b.admin()  # held until the result: a client destroyed fails its futures
        admin.create_topics([topic], request_timeout=30)[topic.topic].result(timeout=60)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def _read(b: AnyBroker, topic: str, count: int, partition: int = 0,
          **config: object) -> list[bytes]:
    """The values of the first `count` records of a partition, as a consumer reads them."""
    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": fresh("reader"),
                         "enable.auto.commit": False, **config})
    try:
        consumer.assign([CkTopicPartition(topic, partition, OFFSET_BEGINNING)])
        got: list[bytes] = []

        def more() -> bool:
            for m in consumer.consume(count - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            return len(got) >= count
        wait_until(more, f"{count} records of {topic}-{partition}")
        return got
    finally:
        consumer.close()


def _produce(b: AnyBroker, topic: str, values: list[bytes], **config: object) -> list[KafkaError | None]:
    """Produce `values` to partition 0 with `config`; the delivery error of each (None: ok)."""
    producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, **config})
    errors: list[KafkaError | None] = []
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(60) == 0
    return errors


def test_topics_are_created_described_and_deleted_with_kafkas_errors(any_broker: AnyBroker) -> None:
    b = any_broker
    rf = b.max_replication_factor
    name = b.create_topic(fresh("topic"), partitions=3, rf=rf)
    described = b.admin().list_topics(name, timeout=10).topics[name]
    assert sorted(described.partitions) == [0, 1, 2]
    for p in described.partitions.values():
        assert len(p.replicas) == rf and set(p.replicas) <= set(b.broker_ids)
        assert sorted(p.isrs) == sorted(p.replicas) and p.leader in p.replicas

    assert _create_error(b, NewTopic(name, 3, rf)) == KafkaError.TOPIC_ALREADY_EXISTS
    assert _create_error(b, NewTopic(fresh("too-many-replicas"), 1, rf + 1)) == \
        KafkaError.INVALID_REPLICATION_FACTOR
    # kafka-python sends what confluent-kafka refuses to (no partitions at all)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import InvalidPartitionsError

    kp_admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        with pytest.raises(InvalidPartitionsError):
            kp_admin.create_topics([KpNewTopic(fresh("no-partitions"), 0, 1)])
    finally:
        kp_admin.close()

    admin = b.admin()
    admin.delete_topics([name], request_timeout=30)[name].result(timeout=60)
    wait_until(lambda: name not in admin.list_topics(timeout=10).topics, f"{name} to go")
    with pytest.raises(KafkaException) as gone:
        admin.delete_topics([name], request_timeout=30)[name].result(timeout=60)
    assert gone.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_partitions_are_added_never_taken_away(any_broker: AnyBroker) -> None:
    b = any_broker
    name = b.create_topic(fresh("grown"), partitions=1)
    admin = b.admin()
    admin.create_partitions([NewPartitions(name, 3)], request_timeout=30)[name].result(timeout=60)
    b.wait_for_leaders(name, 3)
    for p in b.admin().list_topics(name, timeout=10).topics[name].partitions.values():
        assert len(p.replicas) == b.max_replication_factor
    with pytest.raises(KafkaException) as fewer:
        admin.create_partitions([NewPartitions(name, 2)], request_timeout=30)[name].result(60)
    assert fewer.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def _describe(b: AnyBroker, resource: ConfigResource) -> dict[str, ConfigEntry]:
    admin = b.admin()
    entries: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(60)
    return entries


def _alter(b: AnyBroker, resource: ConfigResource, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=op))
    admin = b.admin()
    admin.incremental_alter_configs([resource])[resource].result(timeout=60)


def test_topic_configs_are_described_and_altered(any_broker: AnyBroker) -> None:
    b = any_broker
    name = b.create_topic(fresh("configured"), config={"cleanup.policy": "compact"})
    topic = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = _describe(b, topic)
    assert entries["cleanup.policy"].value == "compact" and entries["cleanup.policy"].source == TOPIC_CONFIG
    assert entries["retention.ms"].value == "604800000" and entries["retention.ms"].source != TOPIC_CONFIG
    _alter(b, ConfigResource(ConfigResource.Type.TOPIC, name), "retention.ms", "123456")
    entry = _describe(b, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("123456", TOPIC_CONFIG)
    _alter(b, ConfigResource(ConfigResource.Type.TOPIC, name), "retention.ms", None)
    assert _describe(b, topic)["retention.ms"].value == "604800000"


def test_dynamic_broker_configs_are_described_and_altered(any_broker: AnyBroker) -> None:
    b = any_broker
    node = str(b.broker_ids[0])
    broker = ConfigResource(ConfigResource.Type.BROKER, node)
    described = _describe(b, broker)
    assert described["num.partitions"].is_read_only and not described["log.retention.ms"].is_read_only
    _alter(b, ConfigResource(ConfigResource.Type.BROKER, node), "log.retention.ms", "8888888")
    entry = _describe(b, broker)["log.retention.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == ("8888888", BROKER_CONFIG, False)
    _alter(b, ConfigResource(ConfigResource.Type.BROKER, node), "log.retention.ms", None)
    assert _describe(b, broker)["log.retention.ms"].source != BROKER_CONFIG
    with pytest.raises(KafkaException) as refused:
        _alter(b, ConfigResource(ConfigResource.Type.BROKER, node), "num.partitions", "7")
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_what_is_produced_with_any_acks_is_read_back(any_broker: AnyBroker, acks: str) -> None:
    b = any_broker
    name = b.create_topic(fresh(f"acks-{acks}"))
    values = [f"{acks}-{i}".encode() for i in range(20)]
    assert _produce(b, name, values, acks=acks) == [None] * len(values)
    assert _read(b, name, len(values)) == values


def test_a_short_isr_refuses_acks_all_with_not_enough_replicas(any_broker: AnyBroker) -> None:
    """One replica where two must be in sync: acks=all is refused, acks=1 is not."""
    b = any_broker
    name = b.create_topic(fresh("min-isr"), rf=1, config={"min.insync.replicas": "2"})
    refused = _produce(b, name, [b"refused"], acks="all", retries=0)
    assert [e.code() if e else None for e in refused] == [KafkaError.NOT_ENOUGH_REPLICAS]
    assert _produce(b, name, [b"taken"], acks="1") == [None]
    assert _read(b, name, 1) == [b"taken"]


def test_a_consumer_group_joins_commits_is_described_and_deleted(any_broker: AnyBroker) -> None:
    b = any_broker
    name = b.create_topic(fresh("grouped"), partitions=2)
    assert _produce(b, name, [b"a", b"b", b"c"]) == [None] * 3
    group = fresh("group")
    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([name])
        got: list[bytes] = []

        def read_all() -> bool:
            got.extend(m.value() for m in consumer.consume(3, timeout=0.5) if m.error() is None)
            return len(got) == 3
        wait_until(read_all, "the group's consumer to read 3 records")
        assert sorted(got) == [b"a", b"b", b"c"]
        consumer.commit(asynchronous=False)
        admin = b.admin()
        described = admin.describe_consumer_groups([group])[group].result(timeout=60)
        assert described.state == ConsumerGroupState.STABLE and len(described.members) == 1
        assigned = described.members[0].assignment.topic_partitions
        assert sorted((tp.topic, tp.partition) for tp in assigned) == [(name, 0), (name, 1)]
    finally:
        consumer.close()

    request = ConsumerGroupTopicPartitions(group, [CkTopicPartition(name, 0), CkTopicPartition(name, 1)])
    offsets = admin.list_consumer_group_offsets([request])[group].result(timeout=60)
    # what the consumer read of partition 0; nothing of partition 1, so nothing committed
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 3, 1: OFFSET_INVALID}
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
    with pytest.raises(KafkaException) as deleted:
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
    assert deleted.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_kafka_pythons_group_commits_and_fetches_offsets(any_broker: AnyBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    b = any_broker
    name = b.create_topic(fresh("kp-grouped"))
    group = fresh("kp-group")
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(name, 0)
        consumer.commit({tp: OffsetAndMetadata(7, "seven", -1)})
        assert consumer.committed(tp) == 7
    finally:
        consumer.close()


def test_only_the_committed_transaction_is_read_committed(any_broker: AnyBroker) -> None:
    b = any_broker
    name = b.create_topic(fresh("txn"))
    producer = Producer({"bootstrap.servers": b.bootstrap_servers,
                         "transactional.id": fresh("txn-id")})
    producer.init_transactions(60)
    producer.begin_transaction()
    for v in (b"kept-1", b"kept-2"):
        producer.produce(name, v, partition=0)
    producer.commit_transaction(60)
    producer.begin_transaction()
    producer.produce(name, b"aborted", partition=0)
    producer.flush(60)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(name, b"kept-3", partition=0)
    producer.commit_transaction(60)
    assert _read(b, name, 3, **{"isolation.level": "read_committed"}) == [b"kept-1", b"kept-2", b"kept-3"]
    assert _read(b, name, 4, **{"isolation.level": "read_uncommitted"}) == [
        b"kept-1", b"kept-2", b"aborted", b"kept-3"]


def test_delete_records_moves_the_log_start_offset(any_broker: AnyBroker) -> None:
    b = any_broker
    name = b.create_topic(fresh("deleted"))
    values = [str(i).encode() for i in range(10)]
    assert _produce(b, name, values, acks="all") == [None] * 10
    admin = b.admin()
    tp = CkTopicPartition(name, 0, 6)
    deleted = admin.delete_records([tp], request_timeout=30)[tp].result(timeout=60)
    assert deleted.low_watermark == 6
    earliest = CkTopicPartition(name, 0)
    starts = admin.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(timeout=60)
    assert starts.offset == 6
    assert _read(b, name, 4) == values[6:]


def test_list_offsets_by_timestamp(any_broker: AnyBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    b = any_broker
    name = b.create_topic(fresh("timed"))
    base = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(5):
        producer.produce(name, str(i).encode(), partition=0, timestamp=base + 1000 * i)
    assert producer.flush(60) == 0
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers)
    try:
        tp = TopicPartition(name, 0)
        found = consumer.offsets_for_times({tp: base + 2500})[tp]
        assert (found.offset, found.timestamp) == (3, base + 3000)
        assert consumer.offsets_for_times({tp: base + 9000})[tp] is None
        assert consumer.offsets_for_times({tp: base})[tp].offset == 0
    finally:
        consumer.close()
    admin = b.admin()
    latest = CkTopicPartition(name, 0)
    newest = admin.list_offsets({latest: OffsetSpec.max_timestamp()})[latest].result(timeout=60)
    assert (newest.offset, newest.timestamp) == (4, base + 4000)


def test_an_idempotent_producer_writes_each_record_once(any_broker: AnyBroker) -> None:
    from kafka import KafkaProducer

    b = any_broker
    name = b.create_topic(fresh("idempotent"))
    values = [f"rd-{i}".encode() for i in range(50)]
    assert _produce(b, name, values, **{"enable.idempotence": True}) == [None] * 50
    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers, enable_idempotence=True,
                             acks="all")
    try:
        more = [f"kp-{i}".encode() for i in range(50)]
        for v in more:
            producer.send(name, v, partition=0)
        producer.flush(60)
    finally:
        producer.close()
    assert _read(b, name, 100) == values + more
    end = CkTopicPartition(name, 0)
    admin = b.admin()
    latest = admin.list_offsets({end: OffsetSpec.latest()})[end].result(timeout=60)
    assert latest.offset == 100


def _code(future: Any) -> int:
    """The error code an admin future fails with (0: it succeeds)."""
    try:
        future.result(timeout=60)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def test_what_is_asked_of_a_missing_topic_or_offset_fails_as_kafkas(any_broker: AnyBroker) -> None:
    b = any_broker
    admin = b.admin()
    missing = fresh("missing")
    topic = ConfigResource(ConfigResource.Type.TOPIC, missing)
    topic.add_incremental_config(ConfigEntry("retention.ms", "1000",
                                             incremental_operation=AlterConfigOpType.SET))
    assert _code(admin.incremental_alter_configs([topic])[topic]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    described = ConfigResource(ConfigResource.Type.TOPIC, missing)
    assert _code(admin.describe_configs([described])[described]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _code(admin.create_partitions([NewPartitions(missing, 2)], request_timeout=30)[missing]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    bad = NewTopic(fresh("bad-config"), 1, 1, config={"retention.ms": "soon"})
    assert _code(admin.create_topics([bad], request_timeout=30)[bad.topic]) == KafkaError.INVALID_CONFIG
    checked = NewTopic(fresh("validated"), 2, b.max_replication_factor)
    assert _code(admin.create_topics([checked], validate_only=True,
                                     request_timeout=30)[checked.topic]) == 0
    assert checked.topic not in admin.list_topics(timeout=10).topics  # only validated

    name = b.create_topic(fresh("short"))
    assert _produce(b, name, [b"0", b"1"]) == [None, None]
    beyond = CkTopicPartition(name, 0, 5)
    assert _code(admin.delete_records([beyond], request_timeout=30)[beyond]) == \
        KafkaError.OFFSET_OUT_OF_RANGE


def test_an_open_transaction_holds_the_last_stable_offset(any_broker: AnyBroker) -> None:
    """ListOffsets read_committed answers the last stable offset: the first offset of the
    open transaction, until its commit marker is written (the marker takes an offset too)."""
    from confluent_kafka import IsolationLevel

    b = any_broker
    name = b.create_topic(fresh("lso"))
    admin = b.admin()
    end = CkTopicPartition(name, 0)

    def latest(isolation: IsolationLevel) -> int:
        found = admin.list_offsets({end: OffsetSpec.latest()}, isolation_level=isolation)
        return int(found[end].result(timeout=60).offset)

    assert _produce(b, name, [b"before"]) == [None]
    producer = Producer({"bootstrap.servers": b.bootstrap_servers,
                         "transactional.id": fresh("lso-txn")})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(name, b"open", partition=0)
    assert producer.flush(60) == 0
    assert _produce(b, name, [b"after"]) == [None]
    assert (latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)) == (1, 3)
    producer.commit_transaction(60)
    # EndTxn is answered once the commit is in the transaction log; the markers follow
    # (Kafka's TransactionMarkerChannelManager), so the stable offset moves soon after
    wait_until(lambda: latest(IsolationLevel.READ_COMMITTED) == 4, "the marker past the commit")
    assert latest(IsolationLevel.READ_UNCOMMITTED) == 4
    assert _read(b, name, 3, **{"isolation.level": "read_committed"}) == [b"before", b"open", b"after"]
