"""/metrics while real clients produce and consume: the counters match what they did."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker import Broker
from kbroker.ops.metrics import METRICS

from .support import get, scrape, value, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
RECORDS, EXTRA, SIZE = 500, 50, 100


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                 "operations.listener": "127.0.0.1:0",
                 "group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


def _create(bs: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def _produce(bs: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=b"v" * SIZE, partition=i % 2)
    assert producer.flush(30) == 0


def _consume(bs: str, topic: str, group: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _describe_lag(bs: str, group: str) -> dict[tuple[str, int], int]:
    """LAG per partition as `kbroker groups describe` prints it."""
    out = subprocess.run([sys.executable, "-m", "kbroker", "groups", "describe", group,
                          "--bootstrap-server", bs], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    lags = {}
    for line in out.splitlines():
        cells = re.split(r"\s+", line.strip())
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            lags[(cells[1], int(cells[2]))] = int(cells[5])
    return lags


def test_counters_match_what_clients_did(broker: Broker) -> None:
    bs, url = broker.bootstrap_servers, broker.operations_url
    assert url is not None
    topic, group = f"m-{uuid.uuid4().hex[:6]}", "metrics-group"
    _create(bs, topic, 2)
    _produce(bs, topic, RECORDS)
    _consume(bs, topic, group, RECORDS)
    _produce(bs, topic, EXTRA, start=RECORDS)  # not consumed: lag EXTRA

    def settled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        samples = scrape(url)
        done = (value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
                == RECORDS + EXTRA
                and value(samples, "kafka_consumergroup_lag_sum", consumergroup=group,
                          topic=topic) == EXTRA)
        return samples if done else None

    samples = wait_until(settled, "the scrape to show every record and the group's lag")
    # records and bytes in: exact (an append counts its batches' records and bytes)
    on_disk = sum(value(samples, "kafka_log_log_size", topic=topic, partition=str(p)) or 0
                  for p in range(2))
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == on_disk
    assert on_disk > (RECORDS + EXTRA) * SIZE
    for p in range(2):
        end = value(samples, "kafka_log_log_logendoffset", topic=topic, partition=str(p))
        assert end == (RECORDS + EXTRA) // 2
    total_in = value(samples, "kafka_server_brokertopicmetrics_messagesin_total")
    assert total_in is not None and total_in >= RECORDS + EXTRA  # + __consumer_offsets
    # bytes out: the consumer read at least the first RECORDS' batches, at most twice all
    out = value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
    assert out is not None and RECORDS * SIZE < out <= 2 * on_disk
    # request metrics: per API and version, errors per code, time histograms per API
    produce_requests = sum(v for (name, labels), v in samples.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and ("request", "Produce") in labels)
    assert produce_requests >= 2
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="NONE") is not None
    for api in ("Produce", "Fetch", "Metadata", "JoinGroup", "OffsetCommit"):
        for hist in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems",
                     "responsequeuetimems", "responsesendtimems"):
            name = f"kafka_network_requestmetrics_{hist}"
            count = value(samples, f"{name}_count", request=api)
            assert count is not None and count >= 1, (api, hist)
            assert value(samples, f"{name}_bucket", request=api, le="+Inf") == count
    # groups and lag, as `kbroker groups describe` shows it
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    described = _describe_lag(bs, group)
    assert described, "kbroker groups describe printed no partition"
    for (t, p), lag in described.items():
        assert value(samples, "kafka_consumergroup_lag", consumergroup=group, topic=t,
                     partition=str(p)) == lag
    assert sum(described.values()) == EXTRA
    # connections, partitions, controller, the broker's state, the process
    labels = {"listener": "PLAINTEXT", "networkProcessor": "0"}
    created = value(samples, "kafka_server_socket_server_metrics_connection_creation_total",
                    **labels)
    assert created is not None and created >= 4
    assert value(samples, "kafka_server_replicamanager_leadercount") == value(
        samples, "kafka_server_replicamanager_partitioncount")
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_server_kafkaserver_brokerstate") == 3
    assert (value(samples, "process_resident_memory_bytes") or 0) > 0
    assert value(samples, "kafka_log_logflushstats_logflushrateandtimems_count") is not None


def test_failed_and_rejected_produce(broker: Broker) -> None:
    bs, url = broker.bootstrap_servers, broker.operations_url
    assert url is not None
    topic = f"small-{uuid.uuid4().hex[:6]}"
    _create(bs, topic, 1, {"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": bs, "acks": "1", "retries": 0,
                         "message.max.bytes": 100000})
    failures: list[object] = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, _m: failures.append(err))
    producer.flush(30)
    assert failures and failures[0] is not None
    samples = wait_until(lambda: (s := scrape(url)) and value(
        s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) and s,
        "the failed produce in the scrape")
    assert (value(samples, "kafka_server_brokertopicmetrics_bytesrejected_total",
                  topic=topic) or 0) > 5000
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="MESSAGE_TOO_LARGE") == 1


def test_every_documented_family_is_exposed_or_cluster_only(broker: Broker) -> None:
    url = broker.operations_url
    assert url is not None
    _produce(broker.bootstrap_servers, "doc", 10)
    status, body = get(url + "/metrics")
    assert status == 200
    text = body.decode()
    # per-topic and per-partition families need a topic; lag needs a group
    optional = {"kafka_consumergroup_current_offset", "kafka_consumergroup_lag",
                "kafka_consumergroup_lag_sum", "kafka_consumergroup_members",
                "python_gc_collections_total"}
    missing = [m.name for m in METRICS if m.name not in optional
               and f"\n{m.name.removesuffix('_total') if m.kind == 'counter' else m.name}" not in
               text.replace("# TYPE ", "\n").replace("# HELP ", "\n")]
    assert missing == []


def test_off_unless_configured(tmp_path: Path) -> None:
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}) as b:
        assert b.operations_url is None and b.request_metrics is None


def test_a_taken_port_stops_an_embedded_start(tmp_path: Path, broker: Broker) -> None:
    taken = broker.operations_url
    assert taken is not None
    with pytest.raises(OSError, match="operations.listener"):
        Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "b"),
                "operations.listener": taken.removeprefix("http://")}).start()


def test_bad_requests_get_4xx(broker: Broker) -> None:
    url = broker.operations_url
    assert url is not None
    _produce(broker.bootstrap_servers, "bad", 4)
    for path, status in [
        ("/api/messages", 400), ("/api/messages?topic=bad&partition=x", 400),
        ("/api/messages?topic=bad&limit=0", 400), ("/api/messages?topic=bad&limit=99999", 400),
        ("/api/messages?topic=bad&offset=-1", 400), ("/api/messages?topic=bad&partition=7", 404),
        ("/api/messages?topic=nope", 404), ("/api/topics/nope", 404), ("/nope", 404),
        ("/static/../../../etc/passwd", 404), ("/static/%2e%2e/listener.py", 404),
        ("/api/messages?topic=bad&offset=99999999999999999999999", 400),
    ]:
        assert get(url + path)[0] == status, path
    # not GET: 405; a malformed request line: 400; the broker still answers after all that
    import http.client
    import socket

    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/metrics", body=b"x")
    assert conn.getresponse().status == 405
    conn.close()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x00\xffGARBAGE \r\n\r\n")
        assert s.recv(100).split(b" ")[1] == b"400"
    assert get(url + "/healthz")[0] == 200
    assert get(url + "/api/messages?topic=bad&limit=4")[0] == 200
    listed = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=30)
    assert "bad" in listed.topics  # the Kafka listener answers as before
