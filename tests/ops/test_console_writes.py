"""The console's write actions (operations.write.enable) against real clients: refused
unless the key is set; topics created and deleted and a group's offsets reset through
the Kafka APIs, as confluent-kafka then sees them; bad requests get 4xx and change
nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from kbroker import Broker

from .support import call, get_json

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PER_PARTITION = 10


def _broker(tmp_path: Path, **extra: str) -> Broker:
    return Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                   "operations.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
                   **extra})


@pytest.fixture
def writable(tmp_path: Path) -> Iterator[Broker]:
    with _broker(tmp_path, **{"operations.write.enable": "true"}) as b:
        yield b


def _topics(bs: str) -> dict[str, int]:
    listed = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=30).topics
    return {name: len(t.partitions) for name, t in listed.items() if not name.startswith("__")}


def _committed(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                   timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def test_writes_are_refused_unless_enabled(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker:
        url = broker.operations_url
        assert url is not None
        assert get_json(url + "/api/overview")["writes_enabled"] is False
        for method, path, body in [
            ("POST", "/api/topics", {"name": "nope", "partitions": 1}),
            ("DELETE", "/api/topics/nope", None),
            ("POST", "/api/groups/g/offsets", {"topic": "nope", "to": "earliest"}),
        ]:
            status, answer = call(url, method, path, body)
            assert status == 403 and "operations.write.enable" in answer["error"], (path, answer)
        assert "nope" not in _topics(broker.bootstrap_servers)


def test_create_and_delete_topics_through_the_kafka_apis(writable: Broker) -> None:
    url, bs = writable.operations_url, writable.bootstrap_servers
    assert url is not None
    assert get_json(url + "/api/overview")["writes_enabled"] is True
    status, answer = call(url, "POST", "/api/topics", {
        "name": "made", "partitions": 3, "configs": {"retention.ms": 3600000}})
    assert (status, answer) == (200, {"name": "made", "partitions": 3, "replication_factor": 1})
    assert _topics(bs)["made"] == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, "made")
    admin = AdminClient({"bootstrap.servers": bs})  # kept: its futures need it alive
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    # the Kafka APIs' own answers
    assert call(url, "POST", "/api/topics", {"name": "made"})[0] == 409  # TOPIC_ALREADY_EXISTS
    status, answer = call(url, "POST", "/api/topics", {"name": "bad", "configs": {"retention.ms": "x"}})
    assert status == 400 and answer["error"].startswith("INVALID_CONFIG")
    status, answer = call(url, "POST", "/api/topics", {"name": "zero", "partitions": 0})
    assert status == 400 and answer["error"].startswith("INVALID_PARTITIONS")
    # the default partition count is the broker's num.partitions
    assert call(url, "POST", "/api/topics", {"name": "defaulted"})[1]["partitions"] == 1
    # refused before anything is sent
    for body, raw, headers, expected in [
        ({"name": 5}, None, None, 400), ({"name": "x", "partitions": "3"}, None, None, 400),
        ({"name": "x", "partitions": True}, None, None, 400), (["x"], None, None, 400),
        ({"name": "x", "configs": ["a"]}, None, None, 400), (None, b"{not json", None, 400),
        ({"name": "x"}, None, {"Content-Type": "text/plain"}, 415),
        ({"name": "x"}, None, {"Origin": "http://elsewhere.example"}, 403),
        ({"name": "x"}, None, {"Sec-Fetch-Site": "cross-site"}, 403),
    ]:
        status, answer = call(url, "POST", "/api/topics", body, headers, raw)
        assert status == expected, (body, raw, headers, answer)
    topics = _topics(bs)
    assert "x" not in topics and "bad" not in topics and "zero" not in topics
    # the console's own origin may write (what a browser sends from the page)
    status, _ = call(url, "DELETE", "/api/topics/made", headers={"Origin": url})
    assert status == 200
    assert "made" not in _topics(bs)
    assert call(url, "DELETE", "/api/topics/made")[0] == 404
    assert all(t["name"] != "made" for t in get_json(url + "/api/topics"))  # no stale cache


def test_reset_offsets_of_an_inactive_group(writable: Broker) -> None:
    url, bs = writable.operations_url, writable.bootstrap_servers
    assert url is not None
    assert call(url, "POST", "/api/topics", {"name": "orders", "partitions": 2})[0] == 200
    producer = Producer({"bootstrap.servers": bs})
    for i in range(2 * PER_PARTITION):
        producer.produce("orders", value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["orders"])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 2 * PER_PARTITION and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 2 * PER_PARTITION
        consumer.commit(asynchronous=False)
        # a member is in the group: the coordinator refuses, as Kafka's does
        status, answer = call(url, "POST", "/api/groups/readers/offsets",
                              {"topic": "orders", "to": "earliest"})
        assert status == 409 and "active members" in answer["error"], answer
    finally:
        consumer.close()
    assert _committed(bs, "readers", "orders", 2) == {0: PER_PARTITION, 1: PER_PARTITION}
    status, answer = call(url, "POST", "/api/groups/readers/offsets",
                          {"topic": "orders", "to": "earliest"})
    assert (status, answer["offsets"]) == (200, [{"partition": 0, "offset": 0},
                                                 {"partition": 1, "offset": 0}])
    assert _committed(bs, "readers", "orders", 2) == {0: 0, 1: 0}
    # an offset past the high watermark is brought back to it (kafka-consumer-groups.sh)
    call(url, "POST", "/api/groups/readers/offsets", {"topic": "orders", "to": 4})
    assert _committed(bs, "readers", "orders", 2) == {0: 4, 1: 4}
    call(url, "POST", "/api/groups/readers/offsets", {"topic": "orders", "to": 10**9})
    assert _committed(bs, "readers", "orders", 2) == {0: PER_PARTITION, 1: PER_PARTITION}
    lag = {(o["topic"], o["partition"]): o["lag"] for g in get_json(url + "/api/groups")
           if g["group_id"] == "readers" for o in g["offsets"]}
    assert lag == {("orders", 0): 0, ("orders", 1): 0}
    for body, expected in [({"topic": "orders", "to": "middle"}, 400),
                           ({"topic": "orders", "to": -1}, 400), ({"to": "latest"}, 400),
                           ({"topic": "missing", "to": "latest"}, 404)]:
        assert call(url, "POST", "/api/groups/readers/offsets", body)[0] == expected, body
    assert _committed(bs, "readers", "orders", 2) == {0: PER_PARTITION, 1: PER_PARTITION}


def test_delete_topic_enable_false_refuses_as_kafka_does(tmp_path: Path) -> None:
    with _broker(tmp_path, **{"operations.write.enable": "true",
                              "delete.topic.enable": "false"}) as broker:
        url = broker.operations_url
        assert url is not None
        assert call(url, "POST", "/api/topics", {"name": "kept"})[0] == 200
        status, answer = call(url, "DELETE", "/api/topics/kept")
        assert status == 400 and answer["error"].startswith("TOPIC_DELETION_DISABLED"), answer
        assert "kept" in _topics(broker.bootstrap_servers)
