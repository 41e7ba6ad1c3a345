"""The metrics clients push (KIP-714) on /metrics, and the console's view of them.

Each pushed series is one sample, named from its OTLP metric name with every character
Prometheus does not allow made `_` (`org.apache.kafka.producer.record.queue.time.avg` ->
`org_apache_kafka_producer_record_queue_time_avg`); a monotonic sum is a counter (its
cumulative value, `_total`), anything else a gauge. Labels: `client_id` and
`client_instance_id`, then the data point's own attributes (`node.id` -> `node_id`,
`topic`, `partition`), likewise made legal. A series goes when its instance expires
(kbroker.telemetry.client_metrics_manager). Read from the ClientMetricsManager when
scraped; nothing is counted here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import Metric

if TYPE_CHECKING:
    from kbroker.telemetry.client_metrics_manager import ClientMetricsInstance, ClientMetricsManager

_ILLEGAL_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_ILLEGAL_LABEL = re.compile(r"[^a-zA-Z0-9_]")
OWN_LABELS = ("client_id", "client_instance_id")


def metric_name(otlp_name: str) -> str:
    name = _ILLEGAL_NAME.sub("_", otlp_name)
    return "_" + name if name[:1].isdigit() else name


def label_name(attribute: str) -> str:
    name = _ILLEGAL_LABEL.sub("_", attribute)
    if not name or name[:1].isdigit():
        name = "_" + name
    return "attr" + name if name.startswith("__") else name  # __ is Prometheus' own


def instance_labels(instance: ClientMetricsInstance) -> dict[str, str]:
    return {"client_id": instance.client.client_id,
            "client_instance_id": str(instance.client_instance_id)}


def families(manager: ClientMetricsManager, by_name: dict[str, Metric]) -> None:
    """Add the pushed series of every live instance to a scrape's families (by exposed
    name; a name the broker's own figures have is left to them)."""
    for instance in manager.instances():
        own = instance_labels(instance)
        for series in instance.series.values():
            point = series.point
            base = metric_name(point.name)
            kind = "counter" if point.counter else "gauge"
            family = by_name.get(base + "_total" if point.counter else base)
            if family is None:
                family = Metric(base.removesuffix("_total") if point.counter else base,
                                point.description or f"pushed by clients: {point.name}", kind)
                by_name[base + "_total" if point.counter else base] = family
            if family.type != kind:
                continue  # the same name pushed as another kind: the first one seen stays
            labels = dict(own)
            for key, value in point.attributes:
                labels.setdefault(label_name(key), value)
            sample = family.name + "_total" if kind == "counter" else family.name
            family.add_sample(sample, labels, series.value)


def console_view(manager: ClientMetricsManager) -> dict[str, Any]:
    """The console's JSON: the subscriptions and each instance with its latest series."""
    subs = [{"name": s.name, "metrics": list(s.metrics), "interval_ms": s.interval_ms,
             "match": {k: p.pattern for k, p in s.match.items()}}
            for s in sorted(manager.subscriptions.values(), key=lambda s: s.name)]
    instances = []
    for inst in manager.instances():
        series = sorted(inst.series.values(), key=lambda s: (s.point.name, s.point.attributes))
        instances.append({
            **instance_labels(inst),
            "client_software": "/".join(x for x in (inst.client.software_name,
                                                     inst.client.software_version) if x),
            "source": f"{inst.client.source_address}:{inst.client.source_port}",
            "subscription_id": inst.subscription_id, "metrics": list(inst.metrics),
            "push_interval_ms": inst.push_interval_ms, "pushes": inst.pushes,
            "terminating": inst.terminating,
            "series": [{"name": s.point.name, "attributes": dict(s.point.attributes),
                        "value": s.value, "counter": s.point.counter} for s in series]})
    return {"subscriptions": subs, "instances": instances}
