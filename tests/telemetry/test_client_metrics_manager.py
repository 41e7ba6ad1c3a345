"""ClientMetricsManager with a fake clock: subscriptions as Kafka's ClientMetricsConfigs
parses them, which a client instance gets, and the errors of its pushes (Kafka's
ClientMetricsManagerTest cases, in kbroker's words)."""

from __future__ import annotations

import logging
import uuid

import pytest

from kbroker.common.error_code import ErrorCode
from kbroker.records.compression import Codec, compress
from kbroker.telemetry.client_metrics_configs import ClientMetricsConfigError, validate
from kbroker.telemetry.client_metrics_manager import (
    ClientInformation,
    ClientMetricsManager,
    PushRefused,
    subscription_id,
)
from kbroker.telemetry.otlp import MAX_POINTS, decode
from kbroker.utils.time import MockTime

from .otlp_payloads import counter, gauge, histogram, metrics_data

PRODUCER = ClientInformation("producer-1", "librdkafka", "2.16.1", "127.0.0.1", "50000")
CONSUMER = ClientInformation("consumer-1", "apache-kafka-java", "3.9.0", "127.0.0.1", "50001")


def manager(max_bytes: int = 1 << 20) -> tuple[ClientMetricsManager, MockTime]:
    time = MockTime()
    return ClientMetricsManager(max_bytes, time), time


def test_validate_refuses_what_kafka_refuses() -> None:
    assert validate("s", {"metrics": "a.,b.", "interval.ms": "1000",
                          "match": "client_id=producer-.*"}).interval_ms == 1000
    cases = [("", {"metrics": "a"}, ErrorCode.INVALID_REQUEST),
             ("s", {"metric": "a"}, ErrorCode.INVALID_CONFIG),
             ("s", {"interval.ms": "99"}, ErrorCode.INVALID_CONFIG),
             ("s", {"interval.ms": "3600001"}, ErrorCode.INVALID_CONFIG),
             ("s", {"interval.ms": "soon"}, ErrorCode.INVALID_CONFIG),
             ("s", {"match": "client_colour=red"}, ErrorCode.INVALID_CONFIG),
             ("s", {"match": "client_id"}, ErrorCode.INVALID_CONFIG),
             ("s", {"match": "client_id=a=b"}, ErrorCode.INVALID_CONFIG),
             ("s", {"match": "client_id=[unclosed"}, ErrorCode.INVALID_CONFIG)]
    for name, props, code in cases:
        with pytest.raises(ClientMetricsConfigError) as e:
            validate(name, props)
        assert e.value.error_code == code, (name, props)


def test_no_subscription_means_no_metrics_and_the_default_interval() -> None:
    m, _ = manager()
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    assert inst.client_instance_id != uuid.UUID(int=0)
    assert inst.metrics == () and inst.push_interval_ms == 300_000
    assert inst.subscription_id == subscription_id((), 300_000, inst.client_instance_id)


def test_matching_subscriptions_are_merged_and_all_wins() -> None:
    m, _ = manager()
    m.update_subscription("producers", {"metrics": "org.apache.kafka.producer.",
                                        "interval.ms": "2000",
                                        "match": "client_software_name=librdkafka,client_id=producer-.*"})
    m.update_subscription("everyone", {"metrics": "org.apache.kafka.client.", "interval.ms": "5000"})
    producer = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    consumer = m.get_telemetry_subscriptions(uuid.UUID(int=0), CONSUMER)
    assert producer.metrics == ("org.apache.kafka.client.", "org.apache.kafka.producer.")
    assert producer.push_interval_ms == 2000
    assert consumer.metrics == ("org.apache.kafka.client.",) and consumer.push_interval_ms == 5000
    m.update_subscription("all", {"metrics": "*", "interval.ms": "1000"})
    # a changed subscription is evaluated again at the instance's next request, at once
    again = m.get_telemetry_subscriptions(producer.client_instance_id, PRODUCER)
    assert again.metrics == ("*",) and again.push_interval_ms == 1000
    assert again.subscription_id != producer.subscription_id


def test_push_errors_in_kafkas_order() -> None:
    m, time = manager(max_bytes=200)
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    iid, sid = inst.client_instance_id, inst.subscription_id
    payload = metrics_data(gauge("org.apache.kafka.producer.record.queue.time.avg", 1.5))

    def push(sub: int = sid, *, terminating: bool = False, codec: int = 0,
             data: bytes = payload, instance: uuid.UUID = iid) -> int:
        try:
            m.push_telemetry(instance, PRODUCER, sub, terminating, codec, data)
        except PushRefused as e:
            return e.error_code
        return ErrorCode.NONE

    assert push(instance=uuid.UUID(int=0)) == ErrorCode.INVALID_REQUEST
    assert push() == ErrorCode.NONE  # the first push after the subscription: let in
    assert push() == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # too soon
    time.sleep(1000)
    assert push(sid + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    time.sleep(1000)
    assert push(codec=7) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    time.sleep(1000)
    assert push(data=b"x" * 201) == ErrorCode.TELEMETRY_TOO_LARGE
    time.sleep(1000)
    assert push(data=b"\xff\xff\xff") == ErrorCode.INVALID_RECORD
    time.sleep(1000)
    assert push(codec=Codec.ZSTD, data=compress(Codec.ZSTD, payload)) == ErrorCode.NONE
    assert push(terminating=True) == ErrorCode.NONE  # a terminating push comes when it must
    time.sleep(1000)
    assert push() == ErrorCode.INVALID_REQUEST  # nothing after the terminating push
    assert m.throttled == 1 and m.unknown_subscription == 1 and m.plugin_errors == 1


def test_asking_again_too_soon_is_throttled_unless_the_push_failed_for_the_subscription() -> None:
    m, time = manager()
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    with pytest.raises(PushRefused) as e:
        m.get_telemetry_subscriptions(inst.client_instance_id, PRODUCER)
    assert e.value.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    with pytest.raises(PushRefused):
        m.push_telemetry(inst.client_instance_id, PRODUCER, inst.subscription_id + 1, False, 0, b"")
    # UNKNOWN_SUBSCRIPTION_ID: the client asks again at once, and gets its subscription
    again = m.get_telemetry_subscriptions(inst.client_instance_id, PRODUCER)
    assert again.subscription_id == inst.subscription_id
    time.sleep(1000)
    assert m.get_telemetry_subscriptions(inst.client_instance_id, PRODUCER) is again


def test_pushed_series_keep_their_latest_value_and_expire_with_the_instance() -> None:
    m, time = manager()
    m.update_subscription("s", {"metrics": "*", "interval.ms": "30000"})
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    name = "org.apache.kafka.producer.node.request.latency.avg"
    sent = "org.apache.kafka.client.connection.creations"
    m.push_telemetry(inst.client_instance_id, PRODUCER, inst.subscription_id, False, 0,
                     metrics_data(gauge(name, 3.0, **{"node.id": "1"}), counter(sent, 2, delta=True),
                                  histogram("org.apache.kafka.h")))
    time.sleep(30_000)
    m.push_telemetry(inst.client_instance_id, PRODUCER, inst.subscription_id, False, 0,
                     metrics_data(gauge(name, 5.0, **{"node.id": "1"}), counter(sent, 3, delta=True)))
    series = {(k[0], k[1]): s.value for k, s in inst.series.items()}
    assert series == {(name, (("node.id", "1"),)): 5.0, (sent, ()): 5.0}  # deltas add up
    assert [i.client_instance_id for i in m.instances()] == [inst.client_instance_id]
    time.sleep(90_000 - 1)  # 3 x the interval after its last request
    assert m.instances()
    time.sleep(1)
    assert m.instances() == []


def test_subscription_id_is_kafkas_crc32c_xor_the_instance_hash() -> None:
    iid = uuid.UUID("00000000-0000-0001-0000-000000000002")
    # Uuid.hashCode: (msb ^ lsb) folded to 32 bits = 1 ^ 2 = 3
    from kbroker._core.crc32c import crc32c

    crc = crc32c(b"[a., b.]1000")
    expected = (crc ^ 3) - (1 << 32) if (crc ^ 3) >= 1 << 31 else crc ^ 3
    assert subscription_id(("b.", "a."), 1000, iid) == expected


def test_an_instance_goes_with_the_connection_it_last_spoke_on() -> None:
    m, _ = manager()
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    producer = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    m.get_telemetry_subscriptions(uuid.UUID(int=0), CONSUMER)
    m.connection_closed("127.0.0.1:59999")  # another connection: nothing goes
    assert len(m.instances()) == 2
    m.connection_closed("127.0.0.1:50000")
    assert [i.client_id for i in (x.client for x in m.instances())] == ["consumer-1"]
    # the client pushes on a new connection: a new instance of the same id, let in
    moved = ClientInformation("producer-1", "librdkafka", "2.16.1", "127.0.0.1", "50002")
    m.push_telemetry(producer.client_instance_id, moved, producer.subscription_id, False, 0,
                     metrics_data(gauge("org.apache.kafka.producer.x", 1.0)))
    assert {i.client_instance_id for i in m.instances()} >= {producer.client_instance_id}


def test_each_push_replaces_the_series_of_the_last() -> None:
    m, time = manager()
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    for i, name in enumerate(("org.apache.kafka.a", "org.apache.kafka.b")):
        time.sleep(1000)
        m.push_telemetry(inst.client_instance_id, PRODUCER, inst.subscription_id, False, 0,
                         metrics_data(gauge(name, float(i), topic=f"t{i}")))
    assert [k[0] for k in inst.series] == ["org.apache.kafka.b"]


def test_a_push_keeps_at_most_max_points(caplog: pytest.LogCaptureFixture) -> None:
    """Megabytes of points in a few hundred KB of zstd: the first MAX_POINTS are kept, the
    rest of the message is not read, the push is taken (as Kafka takes it) and logged."""
    m, _ = manager()
    m.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    inst = m.get_telemetry_subscriptions(uuid.UUID(int=0), PRODUCER)
    many = metrics_data(*[gauge("org.apache.kafka.producer.x", float(i), node_id=i)
                          for i in range(MAX_POINTS + 5)], gauge("org.apache.kafka.producer.y", 1.0))
    payload = compress(Codec.ZSTD, many)
    assert len(payload) < 1 << 20  # within telemetry.max.bytes
    with caplog.at_level(logging.WARNING, "kbroker.telemetry.client_metrics_manager"):
        m.push_telemetry(inst.client_instance_id, PRODUCER, inst.subscription_id, False,
                         Codec.ZSTD, payload)
    assert len(inst.series) == MAX_POINTS
    assert ("org.apache.kafka.producer.y", ()) not in inst.series
    assert f"the first {MAX_POINTS} kept" in caplog.text


def test_decode_stops_at_max_points() -> None:
    data = metrics_data(gauge("a", 1.0), counter("b", 2), gauge("c", 3.0))
    assert [p.name for p in decode(0, data, 1 << 20, max_points=2).points] == ["a", "b"]
    assert decode(0, data, 1 << 20, max_points=2).truncated
    assert not decode(0, data, 1 << 20, max_points=4).truncated
