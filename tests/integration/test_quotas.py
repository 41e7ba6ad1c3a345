"""Client quotas with real clients: AlterClientQuotas / DescribeClientQuotas as Kafka's
admin tools send them, a producer held to its producer_byte_rate (within 10% over a
few seconds) with throttle_time_ms in its responses, a consumer held to its
consumer_byte_rate, Kafka's precedence of user / client-id entities and defaults, and
the quotas kept across a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as A
from kbroker.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as D
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.security.quotas import ClientQuotas

from .wire import WireClient

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
                       (("user", "alice"), ("client-id", "x")): {"request_percentage": 50.0}}
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


def test_a_producer_is_held_to_its_byte_rate(tmp_path: Path) -> None:
    quota = 512 * 1024
    # two windows of one second: the rate settles within a second or two (with Kafka's
    # default of 11 the first 10 s may burst to 10 s worth of quota)
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "quota.window.num": "2"}
    with Broker(props) as broker:
        with WireClient(broker.bootstrap_servers) as c:
            assert _alter(c, [("client-id", "limited")],
                          producer_byte_rate=float(quota)).entries[0].error_code == 0
        stats: list[str] = []
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "client.id": "limited",
            "linger.ms": 5, "statistics.interval.ms": 500, "stats_cb": stats.append,
            "queue.buffering.max.kbytes": 64})
        value = b"x" * 1000
        start = time.monotonic()
        deadline = start + 7
        delivered: list[float] = []  # when each record was acknowledged
        while time.monotonic() < deadline:
            try:
                producer.produce("quota-topic", value,
                                 on_delivery=lambda e, m: delivered.append(time.monotonic()))
            except BufferError:
                producer.poll(0.01)
        producer.flush(60)
        # the first window runs ahead (its rate is spread over quota.window.num - 1 windows
        # at least, as Kafka's); from then on the broker holds the producer to the quota
        steady = [t for t in delivered if start + 1 <= t < start + 7]
        measured = len(steady) * len(value) / 6
        assert quota * 0.9 <= measured <= quota * 1.1, (measured, quota)
        import json

        throttle = [json.loads(s)["brokers"] for s in stats]
        assert any(b.get("throttle", {}).get("max", 0) > 0 for brokers in throttle
                   for b in brokers.values()), "librdkafka saw no throttle_time_ms"


def test_throttle_time_is_reported_in_produce_responses(tmp_path: Path) -> None:
    from batches import make_batch

    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs")}
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:
        assert _alter(c, [("client-id", "wire")], producer_byte_rate=4000.0).entries[0].error_code == 0
        batch = make_batch([b"v" * 50_000])
        request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="throttled", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=batch)])])
        first = c.call(request, 9)
        # 50 kB over at least 10 windows: 5 kB/s against 4 kB/s, (5 - 4) / 4 x 10 s
        assert 2_000 <= first.throttle_time_ms <= 3_000


def test_a_consumer_is_throttled_by_its_byte_rate(tmp_path: Path) -> None:
    import json

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
