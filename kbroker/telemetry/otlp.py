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
(its metrics are gauges and sums), are counted as skipped. At most MAX_POINTS points of
a push are kept (a librdkafka producer pushes 10, a Java consumer a few per partition);
the rest of the message is not read (`truncated`), so that a payload of a few hundred KB
compressed, and megabytes of points, neither holds the broker's loop for seconds nor
fills its memory.
"""

from __future__ import annotations

from collections.abc import Sequence
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
MAX_POINTS = 10_000  # data points kept of one push


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
    truncated: bool = False  # MAX_POINTS reached: the rest of the message was not read


def decode(compression_type: int, payload: bytes | memoryview, max_bytes: int,
           max_points: int = MAX_POINTS) -> DecodedMetrics:
    """The points of a push's metrics, the first `max_points` of them (InvalidTelemetry
    when they are not OTLP)."""
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
    for metric in (m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics):
        kind = metric.WhichOneof("data")
        if kind not in ("gauge", "sum"):
            skipped += 1
            continue
        data_points = metric.gauge.data_points if kind == "gauge" else metric.sum.data_points
        room = max_points - len(points)
        if len(data_points) > room:
            data_points = data_points[:room]
        if kind == "gauge":
            points += _points(metric.name, metric.description, data_points,
                              counter=False, delta=False)
        else:
            s = metric.sum
            points += _points(metric.name, metric.description, data_points,
                              counter=s.is_monotonic,
                              delta=s.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA)
        if len(points) >= max_points:
            return DecodedMetrics(points, skipped, truncated=True)
    return DecodedMetrics(points, skipped)


def _points(name: str, description: str, data_points: Sequence[NumberDataPoint], *, counter: bool,
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
