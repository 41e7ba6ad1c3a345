"""The metrics clients push (KIP-714) as /metrics exposes them (kbroker.ops.client_metrics),
in process with a fake clock: whatever names a client pushes, the scrape stays valid
Prometheus text and the broker's own families stay the broker's."""

from __future__ import annotations

import uuid

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from kbroker.ops.client_metrics import OWN_PREFIXES, family_steps
from kbroker.ops.metrics import METRICS
from kbroker.telemetry.client_metrics_manager import ClientInformation, ClientMetricsManager
from kbroker.utils.time import MockTime
from tests.telemetry.otlp_payloads import counter, gauge, metrics_data

CLIENT = ClientInformation("pusher", "librdkafka", "2.16.0", "127.0.0.1", "50000")


class _Families:
    def __init__(self, by_name: dict[str, Metric]) -> None:
        self.by_name = by_name

    def collect(self) -> list[Metric]:
        return list(self.by_name.values())


def _scrape(*payloads: bytes, own: dict[str, Metric] | None = None) -> dict[str, list[tuple]]:
    """The families a scrape exposes after one client instance pushed each payload (each
    push replaces the last: one instance per payload), parsed back from the text format."""
    manager = ClientMetricsManager(1 << 20, MockTime())
    manager.update_subscription("all", {"metrics": "*", "interval.ms": "1000"})
    for i, payload in enumerate(payloads):
        client = ClientInformation(CLIENT.client_id, "librdkafka", "2.16.0", "127.0.0.1", str(i))
        inst = manager.get_telemetry_subscriptions(uuid.UUID(int=0), client)
        manager.push_telemetry(inst.client_instance_id, client, inst.subscription_id, False, 0,
                               payload)
    by_name = dict(own or {})
    for _ in family_steps(manager, by_name, step=2):  # yields between steps
        pass
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(by_name))
    text = generate_latest(registry).decode()
    parsed: dict[str, list[tuple]] = {}
    series = []
    for family in text_string_to_metric_families(text):
        assert family.name not in parsed, text  # one TYPE line per family
        parsed[family.name] = [(s.name, s.labels.get("client_id"), s.value) for s in family.samples]
        series += [(s.name, tuple(sorted(s.labels.items()))) for s in family.samples]
    assert len(series) == len(set(series)), text  # no series twice
    return parsed


def test_the_broker_s_own_families_are_in_its_own_namespaces() -> None:
    assert [m.name for m in METRICS if not m.name.startswith(OWN_PREFIXES)] == []


def test_names_prometheus_cannot_take_are_left_out_and_the_scrape_stays_valid() -> None:
    parsed = _scrape(metrics_data(
        gauge("", 1.0), counter("", 2), counter("_total", 3), counter("total", 4),
        gauge("9.lives", 5.0), gauge("org.apache.kafka.producer.ok", 6.0)))
    assert parsed == {
        "total": [("total_total", "pusher", 4.0)],
        "_9_lives": [("_9_lives", "pusher", 5.0)],
        "org_apache_kafka_producer_ok": [("org_apache_kafka_producer_ok", "pusher", 6.0)]}


def test_a_name_in_the_broker_s_namespaces_is_left_to_the_broker() -> None:
    state = Metric("kafka_server_kafkaserver_brokerstate", "the broker's", "gauge")
    state.add_sample("kafka_server_kafkaserver_brokerstate", {}, 3.0)
    parsed = _scrape(metrics_data(gauge("kafka.server.kafkaserver.brokerstate", 0.0),
                                  counter("process.cpu.seconds", 9), gauge("kbroker.x", 1.0)),
                     own={"kafka_server_kafkaserver_brokerstate": state})
    assert parsed == {"kafka_server_kafkaserver_brokerstate": [
        ("kafka_server_kafkaserver_brokerstate", None, 3.0)]}


def test_one_name_pushed_as_a_gauge_and_a_counter_keeps_the_first_kind() -> None:
    # a gauge `y_total` and a counter `y` (exposed y_total too) in one push; a gauge `x`
    # from one instance, a counter `x` (family x, exposed x_total) from another
    parsed = _scrape(metrics_data(gauge("y_total", 3.0), counter("y", 4), gauge("x", 1.0)),
                     metrics_data(counter("x", 5)))
    assert parsed == {"x": [("x", "pusher", 1.0)], "y_total": [("y_total", "pusher", 3.0)]}
    parsed = _scrape(metrics_data(counter("x", 5)), metrics_data(gauge("x", 1.0),
                                                                 gauge("x_total", 2.0)))
    assert parsed == {"x": [("x_total", "pusher", 5.0)]}


def test_names_that_become_one_keep_the_first_series() -> None:
    parsed = _scrape(metrics_data(gauge("a.b", 1.0, node_id=0), gauge("a_b", 2.0, node_id=0),
                                  gauge("a_b", 3.0, node_id=1)))
    assert sorted(parsed["a_b"]) == [("a_b", "pusher", 1.0), ("a_b", "pusher", 3.0)]


def test_a_scrape_reads_the_pushed_series_in_steps() -> None:
    """The loop serves the Kafka listeners between steps: every STEP series, a yield."""
    manager = ClientMetricsManager(1 << 20, MockTime())
    manager.update_subscription("all", {"metrics": "*", "interval.ms": "1000"})
    inst = manager.get_telemetry_subscriptions(uuid.UUID(int=0), CLIENT)
    payload = metrics_data(*[gauge(f"m{i}", float(i)) for i in range(1200)])
    manager.push_telemetry(inst.client_instance_id, CLIENT, inst.subscription_id, False, 0, payload)
    by_name: dict[str, Metric] = {}
    steps = sum(1 for _ in family_steps(manager, by_name, step=500))
    assert steps == 2 and len(by_name) == 1200
