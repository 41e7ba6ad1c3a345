"""A PushTelemetry payload: OTLP metrics, as KIP-714 has clients send them.

    metrics      the bytes of an OpenTelemetry `MetricsData` protobuf message
                 (opentelemetry/proto/metrics/v1/metrics.proto), compressed with the
                 request's compression_type (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd:
                 Kafka's CompressionType ids, the record batch codecs)

    MetricsData { repeated ResourceMetrics resource_metrics }
    ResourceMetrics { Resource resource; repeated ScopeMetrics scope_metrics }
    ScopeMetrics { InstrumentationScope scope; repeated Metric metrics }
    Metric { name; description; unit; oneof data { Gauge gauge; Sum sum; Histogram
             histogram; ExponentialHistogram; Summary } }
    Gauge { repeated NumberDataPoint data_points }
    Sum { repeated NumberDataPoint data_points; AggregationTemporality
          aggregation_temporality (1 delta, 2 cumulative); bool is_monotonic }
    NumberDataPoint { repeated KeyValue attributes; fixed64 time_unix_nano;
                      oneof value { double as_double; sfixed64 as_int } }

Decoded by the opentelemetry-proto package (protobuf), never by hand. Gauges and sums
become points; histograms and summaries, which the clients of KIP-714 do not send
(its metrics are gauges and sums), are counted as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    MetricsData,
    NumberDataPoint,
)

from kbroker.records.compression import Codec, decompress

# The codecs a client may compress with, in Kafka's order of preference
# (ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES).
ACCEPTED_COMPRESSION_TYPES = (Codec.ZSTD, Codec.LZ4, Codec.GZIP, Codec.SNAPPY)
SUPPORTED_COMPRESSION_TYPES = frozenset((Codec.NONE, *ACCEPTED_COMPRESSION_TYPES))


class InvalidTelemetry(ValueError):
    """The payload does not decompress or is not a MetricsData message."""


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point: the metric's name, whether it counts (a monotonic sum) or is a
    gauge, its attributes, its value, and whether that value is a delta."""

    name: str
    counter: bool
    attributes: tuple[tuple[str, str], ...]
    value: float
    delta: bool
    description: str


@dataclass(frozen=True, slots=True)
class DecodedMetrics:
    points: list[MetricPoint]
    skipped: int  # metrics of kinds not kept (histograms, summaries)


def decode(compression_type: int, payload: bytes | memoryview, max_bytes: int) -> DecodedMetrics:
    """The points of a push's metrics (InvalidTelemetry when they are not OTLP)."""
    try:
        raw = decompress(compression_type, payload, max_bytes * 64)
    except Exception as e:
        raise InvalidTelemetry(f"the metrics do not decompress: {e}") from None
    data = MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as e:
        raise InvalidTelemetry(f"the metrics are not an OTLP MetricsData message: {e}") from None
    points: list[MetricPoint] = []
    skipped = 0
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    points += _points(metric.name, metric.description, metric.gauge.data_points,
                                      counter=False, delta=False)
                elif kind == "sum":
                    s = metric.sum
                    points += _points(metric.name, metric.description, s.data_points,
                                      counter=s.is_monotonic,
                                      delta=s.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA)
                else:
                    skipped += 1
    return DecodedMetrics(points, skipped)


def _points(name: str, description: str, data_points: list[NumberDataPoint], *, counter: bool,
            delta: bool) -> list[MetricPoint]:
    out = []
    for dp in data_points:
        value = float(dp.as_int) if dp.WhichOneof("value") == "as_int" else dp.as_double
        attributes = tuple(sorted((kv.key, _text(kv.value)) for kv in dp.attributes))
        out.append(MetricPoint(name, counter, attributes, value, delta, description))
    return out


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("string_value", "int_value", "double_value"):
        return str(getattr(value, kind))
    return str(getattr(value, kind)).strip()
