"""Which metrics each client pushes, and the checks on its pushes: Kafka's
ClientMetricsManager, ClientMetricsInstance and ClientMetricsInstanceMetadata (KIP-714).

A client asks GetTelemetrySubscriptions (its client_instance_id zero the first time: the
broker makes one up) and gets what the subscriptions matching it ask for: the union of
their metric prefixes ("*" alone if one asks for all), the smallest of their intervals
and the default 5 minutes (as Kafka's createClientInstance: a longer interval.ms gives 5
minutes; no match: no metrics, the client then pushes nothing), a
subscription id (CRC32C of the metrics and the interval, XOR the instance id's hash, as
Kafka's computeSubscriptionId), the accepted compression types, telemetry.max.bytes and
the temporality (cumulative, see below). It then pushes every interval with
PushTelemetry. The checks, in Kafka's order (validateGetRequest, validatePushRequest):

  GetTelemetrySubscriptions again before the interval is up -> THROTTLING_QUOTA_EXCEEDED
      (unless the last push failed with UNKNOWN_SUBSCRIPTION_ID or
      UNSUPPORTED_COMPRESSION_TYPE: the client is told to ask again at once)
  PushTelemetry with a zero or reserved instance id -> INVALID_REQUEST
  a push after a terminating push -> INVALID_REQUEST
  a push sooner than the interval after the last (the first push after a
      GetTelemetrySubscriptions is always let in: clients add jitter) -> THROTTLING_QUOTA_EXCEEDED
      (a terminating push is let in)
  a subscription id other than the instance's (the subscriptions changed) -> UNKNOWN_SUBSCRIPTION_ID
  a compression type not in 0-4 -> UNSUPPORTED_COMPRESSION_TYPE
  metrics longer than telemetry.max.bytes -> TELEMETRY_TOO_LARGE
  metrics that do not decode (Kafka: its plugin's export failing) -> INVALID_RECORD

A change of the subscriptions re-evaluates each instance at its next request (Kafka's
subscriptionUpdateVersion); the metrics it pushed stay. An instance expires
max(60 s, 3 x its push interval) after its last request (Kafka's ExpirationTimerTask),
or when the connection it last spoke on closes (Kafka's ClientConnectionDisconnectListener),
and with it the metrics it pushed; each push's metrics replace the previous push's. Kafka asks clients for delta temporality, for its
plugins; kbroker shows the metrics on Prometheus' /metrics, whose counters are
cumulative, so it asks for cumulative (the protocol lets the broker choose); a delta
sum pushed anyway is added up.

Owns: the subscriptions (as parsed: their store is client_metrics_store.py) and the
client instances with the metrics they pushed last.
Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kbroker._core.crc32c import crc32c
from kbroker.common.error_code import ErrorCode
from kbroker.telemetry import client_metrics_configs as cmc
from kbroker.telemetry.client_metrics_configs import Subscription
from kbroker.telemetry.otlp import (
    MAX_POINTS,
    SUPPORTED_COMPRESSION_TYPES,
    InvalidTelemetry,
    MetricPoint,
    decode,
)
from kbroker.utils.time import Time

log = logging.getLogger(__name__)

DEFAULT_CACHE_EXPIRY_MS = 60_000
CACHE_MAX_SIZE = 16384  # Kafka's: 16k active client instances per broker
# Kafka's Uuid.RESERVED: ZERO_UUID and METADATA_TOPIC_ID (0, 1)
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


@dataclass(frozen=True, slots=True)
class ClientInformation:
    """Who sent the request: its client id, its software (ApiVersions v3+), its address."""

    client_id: str
    software_name: str | None
    software_version: str | None
    source_address: str
    source_port: str

    @classmethod
    def of(cls, client_id: str | None, software: str | None, peer: str) -> ClientInformation:
        name, _, version = (software or "").partition("/")
        host, _, port = peer.rpartition(":")
        return cls(client_id or "", name or None, version or None, host, port)


@dataclass(slots=True)
class SeriesValue:
    """The latest value of one pushed series, and when it came (ms)."""

    point: MetricPoint
    value: float
    updated_ms: int


class ClientMetricsInstance:
    """One client instance as the broker knows it (Kafka's ClientMetricsInstance)."""

    def __init__(self, client_instance_id: uuid.UUID, client: ClientInformation,
                 subscription_id: int, subscription_version: int, metrics: tuple[str, ...],
                 push_interval_ms: int) -> None:
        self.client_instance_id = client_instance_id
        self.client = client
        self.subscription_id = subscription_id
        self.subscription_version = subscription_version
        self.metrics = metrics
        self.push_interval_ms = push_interval_ms
        self.last_get_ms = -1 << 62
        self.last_push_ms = -1 << 62
        self.terminating = False
        self.last_known_error: int = ErrorCode.NONE
        self.expires_ms = 0
        self.pushes = 0
        self.series: dict[tuple[str, tuple[tuple[str, str], ...]], SeriesValue] = {}

    def attributes(self) -> dict[str, str | None]:
        """What `match` selectors see (Kafka's ClientMetricsInstanceMetadata)."""
        c = self.client
        return {cmc.CLIENT_INSTANCE_ID: str(self.client_instance_id), cmc.CLIENT_ID: c.client_id,
                cmc.CLIENT_SOFTWARE_NAME: c.software_name,
                cmc.CLIENT_SOFTWARE_VERSION: c.software_version,
                cmc.CLIENT_SOURCE_ADDRESS: c.source_address, cmc.CLIENT_SOURCE_PORT: c.source_port}

    def maybe_update_get_request_timestamp(self, now_ms: int) -> bool:
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def maybe_update_push_request_timestamp(self, now_ms: int) -> bool:
        # the first push after a GetTelemetrySubscriptions is let in whenever it comes: the
        # client jitters its interval (0.5 to 1.5 x)
        accept = (self.last_get_ms > self.last_push_ms
                  or now_ms - self.last_push_ms >= self.push_interval_ms)
        if accept:
            self.last_push_ms = now_ms
        return accept

    def record(self, points: list[MetricPoint], now_ms: int) -> None:
        """The metrics of a push replace those of the last one (a client pushes every
        subscribed metric each time, so the series an instance holds are bounded by one
        push); a delta sum adds to the value it had."""
        series = {}
        for point in points:
            key = (point.name, point.attributes)
            found = self.series.get(key)
            value = point.value + found.value if point.delta and found is not None else point.value
            series[key] = SeriesValue(point, value, now_ms)
        self.series = series
        self.pushes += 1


class PushRefused(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def subscription_id(metrics: tuple[str, ...], push_interval_ms: int,
                    client_instance_id: uuid.UUID) -> int:
    """CRC32C of the metrics (as a Java Set prints, here sorted) and the interval, XOR the
    instance id's hash (Kafka's Uuid.hashCode); an int32."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(push_interval_ms)
    crc = crc32c(text.encode())
    bits = client_instance_id.int
    h = (bits >> 64) ^ (bits & ((1 << 64) - 1))
    hash_code = ((h >> 32) ^ h) & 0xFFFFFFFF
    value = (crc ^ hash_code) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientMetricsManager:
    """See the module docstring."""

    def __init__(self, telemetry_max_bytes: int, time: Time,
                 cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.time = time
        self.cache_expiry_ms = cache_expiry_ms
        self.subscriptions: dict[str, Subscription] = {}
        self.subscription_version = 0
        self._instances: dict[uuid.UUID, ClientMetricsInstance] = {}
        self._connections: dict[str, uuid.UUID] = {}  # "host:port" of a client -> its instance
        self._next_expiry_ms = 0
        self.throttled = self.unknown_subscription = self.plugin_errors = 0

    # -- subscriptions ---------------------------------------------------------------------
    def update_subscription(self, name: str, props: Mapping[str, str]) -> None:
        """A subscription's configs as stored now (none: it is gone); checked before."""
        if not props:
            if self.subscriptions.pop(name, None) is not None:
                self.subscription_version += 1
            return
        self.subscriptions[name] = cmc.validate(name, props)
        self.subscription_version += 1

    # -- client instances ----------------------------------------------------------------------
    def instances(self) -> list[ClientMetricsInstance]:
        """The live instances (expired ones dropped first)."""
        self._expire(self.time.milliseconds(), force=True)
        return list(self._instances.values())

    def connection_closed(self, peer: str) -> None:
        """A client's connection ("host:port") closed: the instance that spoke on it last
        goes (Kafka's ClientConnectionDisconnectListener)."""
        iid = self._connections.pop(peer, None)
        if iid is not None:
            self._instances.pop(iid, None)

    def _expire(self, now_ms: int, force: bool = False) -> None:
        """Drop the instances past their expiry (looked for at most once a second, or when
        `force`d)."""
        if now_ms < self._next_expiry_ms and not force:
            return
        self._next_expiry_ms = now_ms + 1000
        for iid in [i for i, inst in self._instances.items() if inst.expires_ms <= now_ms]:
            del self._instances[iid]
        if len(self._connections) > len(self._instances):
            self._connections = {c: i for c, i in self._connections.items() if i in self._instances}

    def _instance(self, iid: uuid.UUID, client: ClientInformation, now_ms: int
                  ) -> ClientMetricsInstance:
        self._expire(now_ms)
        inst = self._instances.get(iid)
        if inst is None or inst.subscription_version < self.subscription_version:
            new = self._evaluate(iid, client if inst is None else inst.client)
            if inst is not None:
                new.series, new.pushes = inst.series, inst.pushes
            elif len(self._instances) >= CACHE_MAX_SIZE:  # Kafka's LRU cache: the eldest goes
                del self._instances[min(self._instances, key=lambda i: self._instances[i].expires_ms)]
            inst = self._instances[iid] = new
        inst.expires_ms = now_ms + max(self.cache_expiry_ms, 3 * inst.push_interval_ms)
        self._connections[f"{client.source_address}:{client.source_port}"] = iid
        return inst

    def _evaluate(self, iid: uuid.UUID, client: ClientInformation) -> ClientMetricsInstance:
        """A client's subscription as the subscriptions stand (Kafka's createClientInstance)."""
        inst = ClientMetricsInstance(iid, client, 0, self.subscription_version, (),
                                     cmc.DEFAULT_INTERVAL_MS)
        attributes = inst.attributes()
        metrics: set[str] = set()
        interval = cmc.DEFAULT_INTERVAL_MS
        for sub in self.subscriptions.values():
            if sub.matches(attributes):
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        if cmc.ALL_SUBSCRIBED_METRICS in metrics:
            metrics = {cmc.ALL_SUBSCRIBED_METRICS}
        inst.metrics = tuple(sorted(metrics))
        inst.push_interval_ms = interval
        inst.subscription_id = subscription_id(inst.metrics, interval, iid)
        return inst

    def get_telemetry_subscriptions(self, client_instance_id: uuid.UUID, client: ClientInformation
                                    ) -> ClientMetricsInstance:
        """The instance whose subscription the client gets; PushRefused when it asks too
        soon."""
        now = self.time.milliseconds()
        iid = client_instance_id
        if iid == uuid.UUID(int=0):
            iid = uuid.uuid4()
            while iid in self._instances or iid in RESERVED_IDS:
                iid = uuid.uuid4()
        inst = self._instance(iid, client, now)
        if (not inst.maybe_update_get_request_timestamp(now) and inst.last_known_error not in
                (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)):
            self.throttled += 1
            raise PushRefused(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                              f"Request from the client [{iid}] arrived before the next push "
                              "interval time")
        inst.last_get_ms = now
        inst.last_known_error = ErrorCode.NONE
        return inst

    def push_telemetry(self, client_instance_id: uuid.UUID, client: ClientInformation,
                       subscription: int, terminating: bool, compression_type: int,
                       metrics: bytes | memoryview) -> None:
        """Check a push and keep its metrics; PushRefused with the client's error."""
        if client_instance_id in RESERVED_IDS:
            raise PushRefused(ErrorCode.INVALID_REQUEST,
                              f"Invalid request from the client [{client_instance_id}], invalid "
                              "client instance id")
        now = self.time.milliseconds()
        inst = self._instance(client_instance_id, client, now)
        try:
            self._validate_push(inst, subscription, terminating, compression_type, metrics, now)
        except PushRefused as e:
            inst.last_known_error = e.error_code
            raise
        finally:
            inst.terminating = terminating
        if len(metrics):
            try:
                decoded = decode(compression_type, metrics, self.telemetry_max_bytes)
            except InvalidTelemetry as e:
                self.plugin_errors += 1
                inst.last_known_error = ErrorCode.INVALID_RECORD
                log.warning("client instance %s pushed metrics that do not decode: %s",
                            client_instance_id, e)
                raise PushRefused(ErrorCode.INVALID_RECORD, str(e)) from None
            if decoded.truncated:
                log.warning("client instance %s (client id %s) pushed %d data points or more: "
                            "the first %d kept, the rest not read", client_instance_id,
                            client.client_id, MAX_POINTS, MAX_POINTS)
            inst.record(decoded.points, now)
        inst.last_known_error = ErrorCode.NONE

    def _validate_push(self, inst: ClientMetricsInstance, subscription: int, terminating: bool,
                       compression_type: int, metrics: bytes | memoryview, now: int) -> None:
        iid = inst.client_instance_id
        if inst.terminating:
            raise PushRefused(ErrorCode.INVALID_REQUEST,
                              f"Client [{iid}] sent the previous request with state terminating "
                              "to TRUE, can not accept any requests after that")
        if not inst.maybe_update_push_request_timestamp(now) and not terminating:
            self.throttled += 1
            raise PushRefused(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                              f"Request from the client [{iid}] arrived before the next push "
                              "interval time")
        if subscription != inst.subscription_id:
            self.unknown_subscription += 1
            raise PushRefused(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                              f"Unknown client subscription id for the client [{iid}]")
        if compression_type not in SUPPORTED_COMPRESSION_TYPES:
            raise PushRefused(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                              f"Unknown compression type [{compression_type}] is received in "
                              f"telemetry request from [{iid}]")
        if len(metrics) > self.telemetry_max_bytes:
            raise PushRefused(ErrorCode.TELEMETRY_TOO_LARGE,
                              f"Telemetry request from [{iid}] is larger than the maximum "
                              f"allowed size [{self.telemetry_max_bytes}]")
