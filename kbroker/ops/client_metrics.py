"""The metrics clients push (KIP-714) on /metrics, and the console's view of them.

Each pushed series is one sample, named from its OTLP metric name with every character
Prometheus does not allow made `_` (`org.apache.kafka.producer.record.queue.time.avg` ->
`org_apache_kafka_producer_record_queue_time_avg`); a monotonic sum is a counter (its
cumulative value, `_total`), anything else a gauge. Labels: `client_id` and
`client_instance_id`, then the data point's own attributes (`node.id` -> `node_id`,
`topic`, `partition`), likewise made legal. A series goes when its instance expires
(kbroker.telemetry.client_metrics_manager). Read from the ClientMetricsManager when
scraped; nothing is counted here.

What a client pushes never breaks a scrape nor mixes with the broker's own figures; a
series is left out when its name is empty (or `_total` alone, for a counter), when it
falls in the broker's own namespaces (OWN_PREFIXES: kbroker.ops.metrics' families and
prometheus-client's process collectors), when its exposed name is another family's of
the other kind (a gauge and a counter of one name: the first one seen stays), or when
another series already has its exposed name and labels (`a.b` and `a_b`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import Metric

if TYPE_CHECKING:
    from kbroker.telemetry.client_metrics_manager import ClientMetricsInstance, ClientMetricsManager
    from kbroker.telemetry.otlp import MetricPoint

_ILLEGAL_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_ILLEGAL_LABEL = re.compile(r"[^a-zA-Z0-9_]")
OWN_LABELS = ("client_id", "client_instance_id")
OWN_PREFIXES = ("kafka_", "kbroker_", "process_", "python_")
STEP = 500  # pushed series read between two yields of family_steps


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


def family_steps(manager: ClientMetricsManager, by_name: dict[str, Metric], step: int = STEP
                 ) -> Iterator[None]:
    """Add the pushed series of every live instance to a scrape's families (by exposed
    sample name, as kbroker.ops.metrics keys its own), yielding every `step` series so
    that the loop serves the Kafka listeners between steps (16384 instances may push a
    few hundred series each); see the module docstring for the series left out. Iterate
    it to the end."""
    pushed: dict[str, Metric] = {}  # family and sample names -> the pushed family
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    done = 0
    for instance in manager.instances():
        own = instance_labels(instance)
        for series in list(instance.series.values()):
            done += 1
            if done % step == 0:
                yield
            found = _family(series.point, by_name, pushed)
            if found is None:
                continue
            family, sample = found
            labels = dict(own)
            for key, value in series.point.attributes:
                labels.setdefault(label_name(key), value)
            exposed = (sample, tuple(sorted(labels.items())))
            if exposed not in seen:
                seen.add(exposed)
                family.add_sample(sample, labels, series.value)


def _family(point: MetricPoint, by_name: dict[str, Metric], pushed: dict[str, Metric]
            ) -> tuple[Metric, str] | None:
    """The family a pushed point goes in (made on first use) and its sample name; None
    when the point is left out."""
    kind = "counter" if point.counter else "gauge"
    name = metric_name(point.name)
    if point.counter:
        name = name.removesuffix("_total")
    sample = name + "_total" if point.counter else name
    if not name or name.startswith(OWN_PREFIXES):
        return None
    family = pushed.get(sample) or pushed.get(name)
    if family is None:
        if sample in by_name or name in by_name:  # not the broker's, yet there: leave it
            return None
        family = Metric(name, point.description or f"pushed by clients: {point.name}", kind)
        pushed[name] = pushed[sample] = by_name[sample] = family
    return (family, sample) if family.type == kind else None


def json_number(value: float) -> float | str:
    """A pushed value as JSON can carry it: NaN and the infinities, which a client may push
    (an average of no samples) and JSON has not, as the strings JavaScript's Number()
    reads back."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


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
                        "value": json_number(s.value), "counter": s.point.counter}
                       for s in series]})
    return {"subscriptions": subs, "instances": instances}
