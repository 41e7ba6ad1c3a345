"""Client quotas with real clients: AlterClientQuotas / DescribeClientQuotas as Kafka's
admin tools send them, the throttle_time_ms of each Produce response as Kafka's
ClientQuotaManager computes it from the bytes received (on a clock the test moves, so
the machine's speed is no part of it; bench/bench_quotas.py measures the rate a producer
is held to), librdkafka answered a throttle, a consumer held to its consumer_byte_rate, Kafka's precedence of user / client-id entities and defaults, and
the quotas kept across a restart."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as A
from kbroker.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as D
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.security.quotas import ClientQuotas
from kbroker.utils.time import MockTime
from tests.cluster.support import wait_until

from .wire import WireClient, encode_request

pytestmark = pytest.mark.integration


def _alter(client: WireClient, entity: list[tuple[str, str | None]], **values: float | None) -> Any:
    return client.call(A(validate_only=False, entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[A.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in values.items()])]), 1)


def test_alter_and_describe_client_quotas(tmp_path: Path) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")}
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:
        assert _alter(c, [("client-id", "loader")], producer_byte_rate=1024.0).entries[0].error_code == 0
        assert _alter(c, [("user", None)], consumer_byte_rate=2048.0).entries[0].error_code == 0
        assert _alter(c, [("user", "alice"), ("client-id", "x")],
                      request_percentage=50.0).entries[0].error_code == 0
        bad = [_alter(c, [("ip", "1.2.3.4")], connection_creation_rate=1.0),
               _alter(c, [("client-id", "a")], not_a_quota=1.0),
               _alter(c, [("client-id", "a")], producer_byte_rate=-5.0),
               _alter(c, [("user", "a"), ("user", "b")], producer_byte_rate=5.0)]
        assert [r.entries[0].error_code for r in bad] == [ErrorCode.INVALID_REQUEST] * 4
        every = c.call(D(components=[], strict=False), 1)
        got = {tuple((e.entity_type, e.entity_name) for e in x.entity):
               {v.key: v.value for v in x.values} for x in every.entries}
        assert got == {(("client-id", "loader"),): {"producer_byte_rate": 1024.0},
                       (("user", None),): {"consumer_byte_rate": 2048.0},
                       (("client-id", "x"), ("user", "alice")): {"request_percentage": 50.0}}
        users = c.call(D(components=[D.ComponentData(entity_type="user", match_type=2)],
                         strict=True), 1)
        assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in users.entries] == [
            [("user", None)]]
        alice = c.call(D(components=[D.ComponentData(entity_type="user", match_type=0,
                                                     match="alice")], strict=False), 1)
        assert len(alice.entries) == 1
        assert _alter(c, [("user", None)], consumer_byte_rate=None).entries[0].error_code == 0
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:  # kept
        assert len(c.call(D(components=[], strict=False), 1).entries) == 2


def test_entities_and_values_are_answered_in_kafkas_order(kbroker_broker: Any) -> None:
    """Kafka answers an entity client-id before user and its values consumer_byte_rate,
    request_percentage, producer_byte_rate (its HashMaps' order), whatever the request's;
    clients compare the lists as they come (@platformatic/kafka's admin tests do)."""
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        altered = _alter(c, [("user", "u1"), ("client-id", "c1")], producer_byte_rate=1000.0,
                         request_percentage=0.5, consumer_byte_rate=2000.0)
        assert [(e.entity_type, e.entity_name) for e in altered.entries[0].entity] == [
            ("client-id", "c1"), ("user", "u1")]
        _alter(c, [("user", None), ("client-id", None)], producer_byte_rate=5.0)
        every = c.call(D(components=[], strict=False), 1)
        got = {tuple((e.entity_type, e.entity_name or "<default>") for e in x.entity):
               [v.key for v in x.values] for x in every.entries}
        assert got == {
            (("client-id", "<default>"), ("user", "<default>")): ["producer_byte_rate"],
            (("client-id", "c1"), ("user", "u1")):
                ["consumer_byte_rate", "request_percentage", "producer_byte_rate"]}
        invalid = _alter(c, [("user", "u1"), ("ip", "1.2.3.4"), ("client-id", "c1")],
                         producer_byte_rate=1.0).entries[0]
        assert invalid.error_code == ErrorCode.INVALID_REQUEST
        assert [e.entity_type for e in invalid.entity] == ["ip", "client-id", "user"]


def test_precedence_of_entities() -> None:
    q = ClientQuotas(None)
    q.alter([((None, "<default>"), {"producer_byte_rate": 1.0}),
             (("<default>", None), {"producer_byte_rate": 2.0}),
             (("alice", None), {"producer_byte_rate": 3.0}),
             (("alice", "app"), {"producer_byte_rate": 4.0})])
    assert q.quota("alice", "app", "producer_byte_rate") == (4.0, ("alice", "app"))
    assert q.quota("alice", "other", "producer_byte_rate") == (3.0, ("alice", None))
    assert q.quota("bob", "app", "producer_byte_rate") == (2.0, ("<default>", None))
    q.alter([(("<default>", None), {"producer_byte_rate": None})])
    assert q.quota("bob", "app", "producer_byte_rate") == (1.0, (None, "<default>"))
    assert q.quota("bob", "app", "consumer_byte_rate") is None


def test_a_producer_is_throttled_with_throttle_time_ms(tmp_path: Path) -> None:
    """librdkafka over its quota is answered throttle_time_ms, never more than the
    quota.window.num windows; the rate it is held to is measured by bench/bench_quotas.py."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "quota.window.num": "2"}
    with Broker(props) as broker:
        with WireClient(broker.bootstrap_servers) as c:
            assert _alter(c, [("client-id", "limited")],
                          producer_byte_rate=64 * 1024.0).entries[0].error_code == 0
        stats: list[str] = []
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "client.id": "limited",
            "linger.ms": 5, "statistics.interval.ms": 100, "stats_cb": stats.append})
        delivered: list[confluent_kafka.KafkaError | None] = []
        for _ in range(400):  # 400 kB: three times what 2 windows of 64 kB/s allow
            producer.produce("quota-topic", b"x" * 1000, on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(60) == 0
        assert delivered == [None] * 400

        def throttles() -> list[dict[str, int]]:
            return [b["throttle"] for s in stats for b in json.loads(s)["brokers"].values()
                    if b.get("throttle", {}).get("cnt")]

        def throttled() -> bool:
            producer.poll(0.1)  # statistics come every 100 ms, through poll
            return any(t["max"] > 0 for t in throttles())

        wait_until(throttled, "librdkafka's statistics of a throttle_time_ms")
        assert max(t["max"] for t in throttles()) <= 2 * 1000, throttles()  # the whole window at most


def kafka_window_ms(elapsed_ms: int, windows: int, window_ms: int = 1000) -> int:
    """Kafka's Rate.windowSize: the time the samples span, at least windows - 1 whole windows."""
    full = elapsed_ms // window_ms
    if full < windows - 1:
        elapsed_ms += (windows - 1 - full) * window_ms
    return elapsed_ms


def kafka_throttle_ms(recorded: float, elapsed_ms: int, quota: float, windows: int = 11) -> int:
    """ClientQuotaManager's throttle time for `recorded` bytes in the samples spanning
    `elapsed_ms`: (rate - quota) / quota x the window, at most all the windows."""
    window = kafka_window_ms(elapsed_ms, windows)
    rate = recorded * 1000.0 / window
    if rate <= quota:
        return 0
    return int(min((rate - quota) / quota * window, windows * 1000))


def test_the_throttle_time_of_each_produce_is_the_quota_math(tmp_path: Path) -> None:
    """The throttle_time_ms of each Produce response, as Kafka's ClientQuotaManager computes
    it from the request bytes the broker received, on a clock that moves only when told
    to (so the machine's speed is no part of it). Each request goes on a connection of its
    own: the throttle mutes the connection it answers, not the client id's others."""
    from batches import make_batch

    clock = MockTime(int(time.time() * 1000))
    quota = 4000.0
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")}

    def produce(size: int) -> tuple[int, int]:
        """One Produce of a `size` byte value from client id `wire`: its frame size (without
        the length prefix, as Kafka's request.sizeInBytes) and its throttle_time_ms."""
        request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="throttled", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=make_batch([b"v" * size]))])])
        with WireClient(broker.bootstrap_servers) as c:
            response = c.call(request, 9)
        assert [p.error_code for r in response.responses for p in r.partition_responses] == [0]
        return len(encode_request(request, 9, 0)) - 4, response.throttle_time_ms

    with Broker(props, time=clock) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("throttled", 1, 1)])["throttled"].result(timeout=30)
        with WireClient(broker.bootstrap_servers) as c:
            assert _alter(c, [("client-id", "wire")], producer_byte_rate=quota).entries[0].error_code == 0
        first, throttle = produce(50_000)
        # 50 kB over the 10 windows a first sample spans: 5 kB/s against 4 kB/s, 2.5 s
        assert throttle == kafka_throttle_ms(first, 0, quota) > 2000
        clock.sleep(3000)  # a window of its own, 3 s on
        second, throttle = produce(20_000)
        assert throttle == kafka_throttle_ms(first + second, 3000, quota) > 0
        clock.sleep(7500)  # the samples span 10.5 s: more than the windows - 1 whole ones
        third, throttle = produce(2_000)
        assert throttle == kafka_throttle_ms(first + second + third, 10_500, quota) > 0
        clock.sleep(3500)  # the first two samples are 11 windows old: dropped
        fourth, throttle = produce(50_000)
        assert throttle == kafka_throttle_ms(third + fourth, 3500, quota) > 0
        clock.sleep(11_000)  # every sample is gone: 1 kB is well under 4 kB/s
        assert produce(1_000)[1] == 0


def test_a_consumer_is_throttled_by_its_byte_rate(tmp_path: Path) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "quota.window.num": "2"}
    with Broker(props) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for _ in range(2000):
            producer.produce("fetched", b"y" * 1000)
        assert producer.flush(30) == 0
        with WireClient(broker.bootstrap_servers) as c:
            assert _alter(c, [("user", None), ("client-id", None)],
                          consumer_byte_rate=256 * 1024.0).entries[0].error_code == 0
        stats: list[str] = []
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": "q", "client.id": "reader",
            "auto.offset.reset": "earliest", "statistics.interval.ms": 500,
            "stats_cb": stats.append})
        consumer.subscribe(["fetched"])
        got, deadline = 0, time.monotonic() + 30
        while got < 2000 and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(500, timeout=0.5) if m.error() is None)
        consumer.close()
        assert got == 2000
        # 2 MB at 256 KB/s: held back for most of it (unthrottled it takes well under 1 s).
        # The throttle_time_ms the broker answered, as librdkafka's statistics sum them up
        # per interval: each Fetch of about 1 MB is 4 x the quota over a 1 s window, held
        # back the most there is (quota.window.num windows: 2 s); the statistics see those
        # of the first two at least (one every 0.5 s while the consumer waits).
        throttles = [b.get("throttle", {}) for s in stats for b in json.loads(s)["brokers"].values()]
        answered_ms = sum(t.get("sum", 0) for t in throttles)
        assert max((t.get("max", 0) for t in throttles), default=0) == 2000, throttles
        assert answered_ms >= 4000, f"the broker held the consumer back {answered_ms} ms"


def test_request_percentage_throttles_every_response(tmp_path: Path) -> None:
    from kbroker.protocol.messages.metadata import MetadataRequest

    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")}
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:
        # 0.0001 % of the loop: any handler time at all goes over it
        assert _alter(c, [("client-id", "wire")], request_percentage=0.0001).entries[0].error_code == 0
        response = c.call(MetadataRequest(topics=None), 12)
        assert 0 < response.throttle_time_ms <= 11_000  # bounded by the 11 windows of 1 s
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:  # c was muted
        assert _alter(c, [("client-id", "wire")], request_percentage=None).entries[0].error_code == 0
        assert c.call(MetadataRequest(topics=None), 12).throttle_time_ms == 0
