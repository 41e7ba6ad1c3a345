"""Whatever a client pushes (any bytes under any compression type, or any OTLP MetricsData
its names, attributes and values can make), the broker answers a Kafka error code or
takes the push, and /metrics and the console's JSON stay valid: properties, with a fake
clock and no broker."""

from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from kbroker.common.error_code import ErrorCode
from kbroker.ops.client_metrics import console_view, family_steps
from kbroker.records.compression import Codec, compress
from kbroker.telemetry.client_metrics_manager import (
    ClientInformation,
    ClientMetricsManager,
    PushRefused,
)
from kbroker.utils.time import MockTime
from tests.telemetry.otlp_payloads import counter, gauge, metrics_data

CLIENT = ClientInformation("prop", "librdkafka", "2.16.0", "127.0.0.1", "50000")
PUSH_ERRORS = {ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
               ErrorCode.TELEMETRY_TOO_LARGE}
SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


class _Collected:
    def __init__(self, by_name: dict[str, Metric]) -> None:
        self.by_name = by_name

    def collect(self) -> list[Metric]:
        return list(self.by_name.values())


def _push(codec: int, payload: bytes) -> tuple[ClientMetricsManager, int]:
    manager = ClientMetricsManager(1 << 16, MockTime())
    manager.update_subscription("all", {"metrics": "*", "interval.ms": "1000"})
    inst = manager.get_telemetry_subscriptions(uuid.UUID(int=0), CLIENT)
    try:
        manager.push_telemetry(inst.client_instance_id, CLIENT, inst.subscription_id, False, codec,
                               payload)
    except PushRefused as e:
        return manager, e.error_code
    return manager, ErrorCode.NONE


def _views_stay_valid(manager: ClientMetricsManager) -> None:
    by_name: dict[str, Metric] = {}
    for _ in family_steps(manager, by_name, step=2):  # yields between steps
        pass
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected(by_name))
    text = generate_latest(registry).decode()
    names = [f.name for f in text_string_to_metric_families(text)]
    assert len(names) == len(set(names)), text
    json.dumps(console_view(manager), allow_nan=False)  # what JSON.parse takes


@SETTINGS
@given(codec=st.sampled_from([*Codec, 5, 9, -1, 127]), raw=st.binary(max_size=512),
       compressed=st.booleans())
def test_any_bytes_under_any_codec_get_a_kafka_answer(codec: int, raw: bytes, compressed: bool
                                                      ) -> None:
    payload = compress(Codec(codec), raw) if compressed and codec in set(Codec) else raw
    manager, code = _push(codec, payload)
    assert code == ErrorCode.NONE or code in PUSH_ERRORS
    _views_stay_valid(manager)


_names = st.text(st.characters(codec="utf-8"), max_size=20) | st.sampled_from(
    ["", "_total", "total", "kafka.server.x", "org.apache.kafka.producer.a", "a.b", "a_b"])
_values = st.floats(allow_nan=True, allow_infinity=True)
_attributes = st.dictionaries(_names, st.text(max_size=10) | st.integers(-5, 5), max_size=3)
_metric = (st.builds(lambda name, value, attrs: gauge(name, value, **attrs),
                     _names, _values, _attributes)
           | st.builds(lambda name, value, attrs: counter(name, value, **attrs),
                       _names, st.integers(-(1 << 63), (1 << 63) - 1), _attributes))


@SETTINGS
@given(metrics=st.lists(_metric, max_size=8))
def test_any_metrics_data_keeps_metrics_and_the_console_valid(metrics: list) -> None:
    manager, code = _push(Codec.NONE, metrics_data(*metrics))
    assert code in (ErrorCode.NONE, ErrorCode.TELEMETRY_TOO_LARGE)
    _views_stay_valid(manager)
