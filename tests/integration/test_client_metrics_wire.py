"""KIP-714's requests on the wire, with kbroker's protocol client against a real broker:
the errors Kafka's ClientMetricsManager answers a push with (too soon, an unknown
subscription id, too large, an unknown compression type, after the terminating push, a
zero instance id), the compressed payloads it accepts, and ListConfigResources' v0 and v1."""

from __future__ import annotations

import json
import math
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from kbroker import Broker
from kbroker.client.connection import BrokerConnection
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from kbroker.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kbroker.protocol.messages.push_telemetry import PushTelemetryRequest
from kbroker.records.compression import Codec, compress
from tests.ops.support import get, scrape, value, wait_until
from tests.telemetry.otlp_payloads import counter, gauge, metrics_data

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MAX_BYTES = 512


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                 "operations.listener": "127.0.0.1:0",
                 "telemetry.max.bytes": str(MAX_BYTES)}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=15000)
        try:
            # a long interval: a second push at once is too soon, whatever the machine's speed
            admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "wire", configs={
                "metrics": (AlterConfigOp.SET, "org.apache.kafka.producer."),
                "interval.ms": (AlterConfigOp.SET, "600000"),
                "match": (AlterConfigOp.SET, "client_id=wire-.*")})],
                raise_on_unknown=False, incremental=True)
        finally:
            admin.close()
        yield b


def _connect(broker: Broker, client_id: str) -> BrokerConnection:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return BrokerConnection(host, int(port), client_id=client_id, timeout_s=15)


def _push(conn: BrokerConnection, iid: uuid.UUID, sid: int, payload: bytes, codec: int = 0,
          terminating: bool = False) -> int:
    return conn.request(PushTelemetryRequest(client_instance_id=iid, subscription_id=sid,
                                             terminating=terminating, compression_type=codec,
                                             metrics=payload), 0).error_code


def test_push_errors_as_kafka_answers_them(broker: Broker) -> None:
    name = "org.apache.kafka.producer.record.queue.time.max"
    payload = metrics_data(gauge(name, 7.0), counter("org.apache.kafka.producer.sent", 3))
    with _connect(broker, "wire-1") as conn:
        sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
        assert sub.error_code == ErrorCode.NONE
        assert sub.requested_metrics == ["org.apache.kafka.producer."]
        # at most the default 5 minutes, as Kafka's createClientInstance takes the smallest
        # of the default and the matching subscriptions' intervals
        assert sub.push_interval_ms == 300000 and sub.telemetry_max_bytes == MAX_BYTES
        assert sub.accepted_compression_types == [Codec.ZSTD, Codec.LZ4, Codec.GZIP, Codec.SNAPPY]
        assert sub.delta_temporality is False
        iid, sid = sub.client_instance_id, sub.subscription_id
        # asking again before the interval is up
        again = conn.request(GetTelemetrySubscriptionsRequest(client_instance_id=iid), 0)
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert _push(conn, uuid.UUID(int=0), sid, payload) == ErrorCode.INVALID_REQUEST
        assert _push(conn, iid, sid, compress(Codec.LZ4, payload), Codec.LZ4) == ErrorCode.NONE
        assert _push(conn, iid, sid, payload) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert _push(conn, iid, sid, payload, terminating=True) == ErrorCode.NONE
        assert _push(conn, iid, sid, payload, terminating=True) == ErrorCode.INVALID_REQUEST
        url = broker.operations_url
        assert url is not None
        samples = scrape(url)
        labels = {"client_id": "wire-1", "client_instance_id": str(iid)}
        assert value(samples, "org_apache_kafka_producer_record_queue_time_max", **labels) == 7.0
        assert value(samples, "org_apache_kafka_producer_sent_total", **labels) == 3.0
        assert value(samples, "kafka_server_client_metrics_throttle_count_total") == 2.0
        assert value(samples, "kafka_server_client_metrics_instance_count") == 1.0
    # the instance, and its series, go with the connection (Kafka's disconnect listener),
    # once the broker has seen it close
    def dropped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        found = scrape(url)
        return found if value(found, "kafka_server_client_metrics_instance_count") == 0.0 else None

    samples = wait_until(dropped, "the broker to drop the instance of the closed connection")
    assert value(samples, "org_apache_kafka_producer_sent_total", **labels) is None


@pytest.mark.parametrize("codec", [Codec.ZSTD, Codec.GZIP, Codec.SNAPPY])
def test_each_accepted_codec_decodes(broker: Broker, codec: Codec) -> None:
    payload = metrics_data(gauge("org.apache.kafka.producer.codec", float(codec)))
    with _connect(broker, f"wire-{codec.name}") as conn:
        sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
        assert _push(conn, sub.client_instance_id, sub.subscription_id,
                     compress(codec, payload), codec) == ErrorCode.NONE
        url = broker.operations_url
        assert url is not None
        assert value(scrape(url), "org_apache_kafka_producer_codec", client_id=f"wire-{codec.name}",
                     client_instance_id=str(sub.client_instance_id)) == float(codec)


def test_refused_pushes(broker: Broker) -> None:
    small = metrics_data(gauge("org.apache.kafka.producer.x", 1.0))
    cases = [  # (subscription id offset, codec, payload, error)
        (1, 0, small, ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
        (0, 9, small, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        (0, 0, b"\x00" * (MAX_BYTES + 1), ErrorCode.TELEMETRY_TOO_LARGE),
        (0, 0, b"\xff\xff\xff\xff", ErrorCode.INVALID_RECORD),  # not OTLP
        (0, Codec.ZSTD, b"not zstd", ErrorCode.INVALID_RECORD),
    ]
    for i, (offset, codec, payload, error) in enumerate(cases):
        with _connect(broker, f"wire-refused-{i}") as conn:
            sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
            got = _push(conn, sub.client_instance_id, sub.subscription_id + offset, payload, codec)
            assert got == error, (i, ErrorCode(got).name)
            # the broker is still there and answers
            assert conn.request(GetTelemetrySubscriptionsRequest(), 0).error_code == ErrorCode.NONE


def test_names_prometheus_cannot_take_leave_the_scrape_whole(broker: Broker) -> None:
    """A push of names that /metrics cannot expose as they are (empty, the broker's own,
    one name as a gauge and a counter) is accepted as Kafka accepts it, and every scrape
    after it is still valid Prometheus text with the broker's figures its own."""
    payload = metrics_data(gauge("", 1.0), counter("_total", 2),
                           gauge("kafka.server.kafkaserver.brokerstate", 0.0),
                           gauge("org.apache.kafka.producer.both", 3.0),
                           counter("org.apache.kafka.producer.both.total", 4),
                           gauge("org.apache.kafka.producer.kept", 5.0))
    with _connect(broker, "wire-names") as conn:
        sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
        assert _push(conn, sub.client_instance_id, sub.subscription_id, payload) == ErrorCode.NONE
        url = broker.operations_url
        assert url is not None
        samples = scrape(url)  # status 200, parsed by prometheus-client's parser
        labels = {"client_id": "wire-names", "client_instance_id": str(sub.client_instance_id)}
        assert value(samples, "org_apache_kafka_producer_kept", **labels) == 5.0
        assert value(samples, "org_apache_kafka_producer_both", **labels) == 3.0
        assert value(samples, "org_apache_kafka_producer_both_total", **labels) is None
        assert [k for k in samples if k[0] == "kafka_server_kafkaserver_brokerstate"] == [
            ("kafka_server_kafkaserver_brokerstate", ())]


def test_values_json_has_not_reach_the_console_as_strings(broker: Broker) -> None:
    """NaN and the infinities (an average of no samples): on /metrics as Prometheus writes
    them, in the console's JSON as strings JavaScript's Number() reads back, so the page
    still parses."""
    payload = metrics_data(gauge("org.apache.kafka.producer.nan", math.nan),
                           gauge("org.apache.kafka.producer.inf", math.inf),
                           gauge("org.apache.kafka.producer.ninf", -math.inf))
    with _connect(broker, "wire-nan") as conn:
        sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
        assert _push(conn, sub.client_instance_id, sub.subscription_id, payload) == ErrorCode.NONE
        url = broker.operations_url
        assert url is not None
        status, body = get(url + "/api/client-metrics")
        assert status == 200

        def refuse(constant: str) -> None:
            raise AssertionError(f"{constant} is not JSON (JSON.parse refuses it)")

        view = json.loads(body, parse_constant=refuse)
        (instance,) = [i for i in view["instances"] if i["client_id"] == "wire-nan"]
        assert {s["name"].rsplit(".", 1)[1]: s["value"] for s in instance["series"]} == {
            "nan": "NaN", "inf": "Infinity", "ninf": "-Infinity"}
        labels = {"client_id": "wire-nan", "client_instance_id": str(sub.client_instance_id)}
        samples = scrape(url)
        assert math.isnan(value(samples, "org_apache_kafka_producer_nan", **labels) or 0.0)
        assert value(samples, "org_apache_kafka_producer_ninf", **labels) == -math.inf


def test_an_unmatched_client_gets_the_empty_subscription(broker: Broker) -> None:
    with _connect(broker, "other-client") as conn:
        sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
    assert sub.error_code == ErrorCode.NONE and sub.requested_metrics == []
    assert sub.push_interval_ms == 300000


def test_a_truncated_push_closes_the_connection_and_the_broker_stays(broker: Broker) -> None:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # PushTelemetry v0, a flexible header, then a body cut short
        body = b"\x00\x48\x00\x00\x00\x00\x00\x01\x00\x01x\x00" + b"\x00" * 5
        sock.sendall(len(body).to_bytes(4, "big") + body)
        assert sock.recv(100) == b""  # closed
    with _connect(broker, "wire-after") as conn:
        assert conn.request(GetTelemetrySubscriptionsRequest(), 0).error_code == ErrorCode.NONE


def test_list_config_resources_v0_and_v1(broker: Broker) -> None:
    with _connect(broker, "lister") as conn:
        v0 = conn.request(ListConfigResourcesRequest(), 0)
        assert [r.resource_name for r in v0.config_resources] == ["wire"]
        v1 = conn.request(ListConfigResourcesRequest(resource_types=[16, 4]), 1)
        assert [(r.resource_type, r.resource_name) for r in v1.config_resources] == [
            (16, "wire"), (4, "0")]
        every = conn.request(ListConfigResourcesRequest(resource_types=[]), 1)
        assert {r.resource_type for r in every.config_resources} >= {4, 16}
        bad = conn.request(ListConfigResourcesRequest(resource_types=[8]), 1)
        assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION
