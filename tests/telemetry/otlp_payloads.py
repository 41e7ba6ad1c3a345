"""OTLP MetricsData payloads as KIP-714 clients push them, built with opentelemetry-proto."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)


def _attrs(attributes: dict[str, str | int]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int)
                     else AnyValue(string_value=v)) for k, v in attributes.items()]


def gauge(name: str, value: float, **attributes: str | int) -> Metric:
    m = Metric(name=name, description=f"{name} (test)")
    m.gauge.data_points.append(NumberDataPoint(as_double=value, attributes=_attrs(attributes)))
    return m


def counter(name: str, value: int, delta: bool = False, **attributes: str | int) -> Metric:
    temporality = AGGREGATION_TEMPORALITY_DELTA if delta else AGGREGATION_TEMPORALITY_CUMULATIVE
    m = Metric(name=name, sum=Sum(is_monotonic=True, aggregation_temporality=temporality))
    m.sum.data_points.append(NumberDataPoint(as_int=value, attributes=_attrs(attributes)))
    return m


def histogram(name: str) -> Metric:
    return Metric(name=name, histogram=Histogram(data_points=[HistogramDataPoint(count=1)]))


def metrics_data(*metrics: Metric) -> bytes:
    return MetricsData(resource_metrics=[ResourceMetrics(
        scope_metrics=[ScopeMetrics(metrics=list(metrics))])]).SerializeToString()
