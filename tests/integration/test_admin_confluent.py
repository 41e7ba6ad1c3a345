"""confluent-kafka AdminClient (librdkafka 2.x) against a `kbroker serve` subprocess:
CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs (applied live), DescribeCluster,
describe_topics, list_offsets / offsets_for_times through a consumer, and the SCRAM
credential APIs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kbroker.common.configs import TOPIC_CONFIGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(broker_process: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker_process.bootstrap_servers})


def _error(future: Any) -> int:
    with pytest.raises(KafkaException) as info:
        future.result()
    return int(info.value.args[0].code())


def _create(admin: AdminClient, *topics: NewTopic, **kw: Any) -> None:
    for f in admin.create_topics(list(topics), request_timeout=TIMEOUT, **kw).values():
        f.result()


def _configs(admin: AdminClient, topic: str) -> dict[str, Any]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return dict(admin.describe_configs([res], request_timeout=TIMEOUT)[res].result())


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0,
             timestamps: list[int] | None = None, **conf: Any) -> list[Any]:
    results: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps else 0
        p.produce(topic, v, partition=partition, timestamp=ts,
                  on_delivery=lambda err, msg: results.append(err or msg))
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    return results


def _wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_create_topics_with_configs_and_errors(admin: AdminClient) -> None:
    good, dflt = _name("create"), _name("dflt")
    fs = admin.create_topics(
        [
            NewTopic(good, 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
            NewTopic(dflt),  # -1/-1: the broker's num.partitions (3) and replication factor
            NewTopic("bad name!", 1, 1),
            NewTopic(_name("rf"), 1, 3),
            NewTopic(_name("parts"), 0, 1),
            NewTopic(_name("cfg"), 1, 1, config={"no.such.config": "1"}),
            NewTopic(_name("typed"), 1, 1, config={"retention.ms": "soon"}),
        ],
        request_timeout=TIMEOUT,
    )
    results = {t: (_error(f) if t not in (good, dflt) else f.result()) for t, f in fs.items()}
    assert results[good] is None and results[dflt] is None
    assert results["bad name!"] == KafkaError.TOPIC_EXCEPTION
    codes = sorted(v for k, v in results.items() if k not in (good, dflt, "bad name!"))
    assert codes == sorted([KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_PARTITIONS,
                            KafkaError.INVALID_CONFIG, KafkaError.INVALID_CONFIG])
    assert _error(admin.create_topics([NewTopic(good, 1, 1)])[good]) == KafkaError.TOPIC_ALREADY_EXISTS
    md = admin.list_topics(timeout=TIMEOUT)
    assert len(md.topics[good].partitions) == 2 and len(md.topics[dflt].partitions) == 3
    configs = _configs(admin, good)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"


def test_unimplemented_topic_configs_are_refused_not_ignored(admin: AdminClient) -> None:
    topic = _name("prealloc")
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={"preallocate": "true"})],
                             request_timeout=TIMEOUT)
    assert _error(fs[topic]) == KafkaError.INVALID_CONFIG
    _create(admin, NewTopic(topic, 1, 1, config={"preallocate": "false"}))  # Kafka's default


def test_create_topics_validate_only(admin: AdminClient) -> None:
    topic = _name("validate")
    _create(admin, NewTopic(topic, 4, 1, config={"segment.bytes": "1048576"}), validate_only=True)
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "x"})],
                             validate_only=True, request_timeout=TIMEOUT)
    assert _error(fs[topic]) == KafkaError.INVALID_CONFIG


def test_delete_topics(admin: AdminClient, broker_process: Any) -> None:
    topic = _name("delete")
    _create(admin, NewTopic(topic, 2, 1))
    _produce(broker_process.bootstrap_servers, topic, [b"a", b"b"])
    missing = _name("missing")
    # (never pop from the returned dict: confluent-kafka resolves the futures through it)
    fs = admin.delete_topics([topic, missing], request_timeout=TIMEOUT)
    fs[topic].result()
    assert _error(fs[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
    # the name is free again, and the new topic starts empty
    _create(admin, NewTopic(topic, 1, 1))
    c = Consumer({"bootstrap.servers": broker_process.bootstrap_servers, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 0)
    finally:
        c.close()


def test_describe_configs_lists_all_with_defaults_and_sources(admin: AdminClient) -> None:
    topic = _name("describe")
    _create(admin, NewTopic(topic, 1, 1, config={"retention.bytes": "123456"}))
    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result()  # with synonyms
    assert set(configs) == set(TOPIC_CONFIGS.names())
    override = configs["retention.bytes"]
    assert (override.value, override.source, override.is_default) == (
        "123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    assert "log.retention.bytes" in override.synonyms
    segment = configs["segment.bytes"]
    assert segment.value == "1073741824" and segment.is_default
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    # log.retention.check.interval.ms etc. come from the broker's command line: static
    # broker configs; retention.ms's default comes from log.retention.hours=168
    retention = configs["retention.ms"]
    assert retention.value == "604800000"
    assert retention.synonyms["log.retention.hours"].value == "168"
    assert all(not e.is_read_only and not e.is_sensitive for e in configs.values())


def test_describe_broker_configs(admin: AdminClient, broker_process: Any) -> None:
    res = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result()
    assert configs["num.partitions"].value == "3"
    assert configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["message.max.bytes"].value == "1048588"
    assert configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.dirs"].value == str(broker_process.log_dir)
    assert configs["num.partitions"].is_read_only


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_overrides(admin: AdminClient) -> None:
    topic = _name("alter")
    _create(admin, NewTopic(topic, 1, 1, config={"retention.ms": "100000", "segment.bytes": "1048576"}))
    res = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "999999"})
    admin.alter_configs([res], request_timeout=TIMEOUT)[res].result()
    configs = _configs(admin, topic)
    overrides = {k: e.value for k, e in configs.items() if not e.is_default}
    assert overrides == {"retention.bytes": "999999"}
    bad = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "lots"})
    assert _error(admin.alter_configs([bad], request_timeout=TIMEOUT)[bad]) == KafkaError.INVALID_CONFIG
    missing = ConfigResource(ResourceType.TOPIC, _name("missing"), set_config={"retention.ms": "1"})
    code = _error(admin.alter_configs([missing], request_timeout=TIMEOUT)[missing])
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_incremental_alter_max_message_bytes_applies_live(admin: AdminClient, broker_process: Any) -> None:
    topic = _name("maxmsg")
    bs = broker_process.bootstrap_servers
    _create(admin, NewTopic(topic, 1, 1))
    assert not isinstance(_produce(bs, topic, [b"x" * 5000])[0], KafkaError)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()
    configs = _configs(admin, topic)
    assert configs["max.message.bytes"].value == "1000"
    assert configs["cleanup.policy"].value == "delete,compact"
    results = _produce(bs, topic, [b"y" * 5000])
    assert isinstance(results[0], KafkaError)
    assert results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    # SUBTRACT and DELETE bring the defaults back; small records still go through
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()
    configs = _configs(admin, topic)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].is_default
    assert not isinstance(_produce(bs, topic, [b"z" * 5000])[0], KafkaError)
    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])
    code = _error(admin.incremental_alter_configs([bad], request_timeout=TIMEOUT)[bad])
    assert code == KafkaError.INVALID_CONFIG


def _retention_checked(bs: str, admin: AdminClient, consumer: Consumer) -> None:
    """Return once a retention check has gone over every log that held records before:
    a witness topic's hour-old records, produced now, are deleted by the first check."""
    witness = _name("witness")
    _create(admin, NewTopic(witness, 1, 1, config={"segment.bytes": "1024", "retention.ms": "60000"}))
    old = int(time.time() * 1000) - 3_600_000
    delivered = _produce(bs, witness, [b"w" * 400] * 6, timestamps=[old] * 6,
                         **{"batch.num.messages": 1})
    assert not [m for m in delivered if isinstance(m, KafkaError)], delivered
    tp = TopicPartition(witness, 0)
    _wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=TIMEOUT)[0] > 0)


def test_retention_ms_applied_live(broker_factory: Any) -> None:
    bp = broker_factory({"log.retention.check.interval.ms": "200"}).start()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers})
    topic = _name("retention")
    _create(admin, NewTopic(topic, 1, 1, config={"segment.bytes": "1024"}))
    old = int(time.time() * 1000) - 3_600_000
    # one record per batch, two batches per segment
    delivered = _produce(bp.bootstrap_servers, topic, [b"r" * 400] * 12, timestamps=[old] * 12,
                         **{"batch.num.messages": 1})
    assert not [m for m in delivered if isinstance(m, KafkaError)], delivered
    c = Consumer({"bootstrap.servers": bp.bootstrap_servers, "group.id": "unused"})
    try:
        tp = TopicPartition(topic, 0)
        _retention_checked(bp.bootstrap_servers, admin, c)
        assert c.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 12)  # 7 days' retention
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()
        _wait_for(lambda: c.get_watermark_offsets(tp, timeout=TIMEOUT)[0] > 0)
        low, high = c.get_watermark_offsets(tp, timeout=TIMEOUT)
        assert high == 12 and 0 < low <= 11  # the active segment stays
    finally:
        c.close()


def test_create_partitions(admin: AdminClient, broker_process: Any) -> None:
    topic, other = _name("grow"), _name("grow")
    _create(admin, NewTopic(topic, 1, 1), NewTopic(other, 2, 1))
    missing = _name("missing")
    fs = admin.create_partitions([NewPartitions(topic, 3), NewPartitions(other, 1),
                                  NewPartitions(missing, 2)], request_timeout=TIMEOUT)
    fs[topic].result()  # a result for every topic, or librdkafka fails them all
    assert _error(fs[other]) == KafkaError.INVALID_PARTITIONS
    assert _error(fs[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    fs = admin.create_partitions([NewPartitions(other, 5)], validate_only=True, request_timeout=TIMEOUT)
    fs[other].result()
    md = admin.list_topics(timeout=TIMEOUT)
    assert len(md.topics[topic].partitions) == 3 and len(md.topics[other].partitions) == 2
    delivered = _produce(broker_process.bootstrap_servers, topic, [b"new"], partition=2)
    assert delivered[0].partition() == 2 and delivered[0].offset() == 0


def test_delete_records_and_list_offsets(admin: AdminClient, broker_process: Any) -> None:
    topic = _name("delrec")
    bs = broker_process.bootstrap_servers
    _create(admin, NewTopic(topic, 2, 1))
    base = 1_700_000_000_000
    _produce(bs, topic, [b"%d" % i for i in range(10)], timestamps=[base + i * 1000 for i in range(10)])
    tp = TopicPartition(topic, 0, 4)
    deleted = admin.delete_records([tp], request_timeout=TIMEOUT)
    assert next(iter(deleted.values())).result().low_watermark == 4
    # OFFSET_END (-1) means the high watermark
    end = TopicPartition(topic, 1, -1)
    assert next(iter(admin.delete_records([end]).values())).result().low_watermark == 0
    beyond = TopicPartition(topic, 0, 11)
    assert _error(next(iter(admin.delete_records([beyond]).values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    offsets = admin.list_offsets({
        TopicPartition(topic, 0): OffsetSpec.earliest(),
    }, request_timeout=TIMEOUT)
    assert next(iter(offsets.values())).result().offset == 4
    latest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, request_timeout=TIMEOUT)
    assert next(iter(latest.values())).result().offset == 10
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (4, 10)
        found = c.offsets_for_times([TopicPartition(topic, 0, base + 6500)], timeout=TIMEOUT)
        assert found[0].offset == 7
        c2 = Consumer({"bootstrap.servers": bs, "group.id": "unused", "auto.offset.reset": "earliest"})
        try:
            c2.assign([TopicPartition(topic, 0, 2)])
            msg = None
            deadline = time.monotonic() + TIMEOUT
            while msg is None and time.monotonic() < deadline:
                msg = c2.poll(0.5)
            assert msg is not None and not msg.error() and msg.offset() == 4
        finally:
            c2.close()
    finally:
        c.close()


def test_describe_cluster_and_topics(admin: AdminClient, broker_process: Any) -> None:
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result()
    assert cluster.controller.id == 0 and [n.id for n in cluster.nodes] == [0]
    host, port = broker_process.bootstrap_servers.rsplit(":", 1)
    assert (cluster.nodes[0].host, cluster.nodes[0].port) == (host, int(port))
    assert cluster.cluster_id
    topic = _name("desc")
    _create(admin, NewTopic(topic, 3, 1))
    missing = _name("missing")
    described = admin.describe_topics(TopicCollection([topic, missing]), request_timeout=TIMEOUT)
    desc = described[topic].result()
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader.id == 0 and [r.id for r in p.isr] == [0] for p in desc.partitions)
    assert desc.topic_id is not None
    assert _error(described[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_segment_bytes_and_retention_bytes_applied_live(broker_factory: Any) -> None:
    bp = broker_factory({"log.retention.check.interval.ms": "200"}).start()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers})
    topic = _name("retbytes")
    _create(admin, NewTopic(topic, 1, 1))  # segment.bytes 1 GiB: one segment
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()
    delivered = _produce(bp.bootstrap_servers, topic, [b"b" * 400] * 10, **{"batch.num.messages": 1})
    assert not [m for m in delivered if isinstance(m, KafkaError)], delivered
    segments = list((bp.log_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 4  # rolled at the new segment.bytes
    c = Consumer({"bootstrap.servers": bp.bootstrap_servers, "group.id": "unused"})
    try:
        tp = TopicPartition(topic, 0)
        _retention_checked(bp.bootstrap_servers, admin, c)
        assert c.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 10)  # no retention.bytes
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.bytes", "1500", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()
        _wait_for(lambda: c.get_watermark_offsets(tp, timeout=TIMEOUT)[0] >= 6)
    finally:
        c.close()


def test_min_insync_replicas_above_the_isr_refuses_acks_all(admin: AdminClient, broker_process: Any) -> None:
    from confluent_kafka import Producer

    topic = _name("misr")
    _create(admin, NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"}))
    results: dict[str, Any] = {}
    for acks in ("all", "1"):
        producer = Producer({"bootstrap.servers": broker_process.bootstrap_servers, "acks": acks,
                             "message.timeout.ms": 3000, "enable.idempotence": False})
        producer.produce(topic, b"v", on_delivery=lambda err, _msg, a=acks: results.__setitem__(a, err))
        producer.flush(10)
    assert results["all"] is not None and results["all"].code() in (
        KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT)
    assert results["1"] is None  # acks=1 does not wait for the ISR, in Kafka either


def test_describe_user_scram_credentials_of_every_user(admin: AdminClient) -> None:
    """librdkafka asks for every user with an empty array, not null; Kafka answers both
    with every user that has a credential (confluent-kafka-python's
    test_user_scram_credentials)."""
    user = _name("scram-user")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000)
    upsert = UserScramCredentialUpsertion(user, info, b"password", b"salt")
    assert admin.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT)[user].result() is None
    try:
        for args in ([], [None]):
            described = admin.describe_user_scram_credentials(*args, request_timeout=TIMEOUT).result()
            assert user in described
            assert [(i.mechanism, i.iterations) for i in described[user].scram_credential_infos] == [
                (ScramMechanism.SCRAM_SHA_256, 10000)]
    finally:
        delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
        admin.alter_user_scram_credentials([delete], request_timeout=TIMEOUT)[user].result()
