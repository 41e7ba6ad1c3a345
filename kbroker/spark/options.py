"""The options of Spark's Kafka source and sink, parsed and checked up front.

Option names are case-insensitive, as Spark's are (keys are lowercased first).
The manual's Spark page (docs/spark.md, "Options") has the table of every option of
Spark's Kafka guide and what kbroker does with it; in short:

Source options (as Spark's built-in `kafka` format spells them):

    kafka.bootstrap.servers          host:port[,host:port...]  (required)
    subscribe | subscribePattern | assign   exactly one: "t1,t2" | a regex |
                                     '{"t1":[0,1],"t2":[0]}'
    startingOffsets                  earliest | latest | '{"t1":{"0":23,"1":-2}}'
                                     (-2 earliest, -1 latest; default: earliest for
                                     batch queries, latest for streaming)
    endingOffsets                    latest | '{"t1":{"0":50,"1":-1}}'  (batch only)
    startingTimestamp, endingTimestamp                 one timestamp (ms) for all partitions
    startingOffsetsByTimestamp, endingOffsetsByTimestamp   '{"t1":{"0":1700000000000}}'
    startingOffsetsByTimestampStrategy  error (default) | latest
    maxOffsetsPerTrigger             streaming: records per micro-batch, spread over
                                     partitions in proportion to their backlog
    minOffsetsPerTrigger, maxTriggerDelay   streaming: skip triggers while fewer records
                                     than this wait, unless maxTriggerDelay (default 15m)
                                     passed since the last batch (Spark's delayBatch)
    minPartitions                    split large offset ranges into more Spark tasks
    maxRecordsPerPartition           split ranges into tasks of at most this many offsets
    failOnDataLoss                   true (default) | false
    includeHeaders                   false (default) | true
    kafkaConsumer.pollTimeoutMs      a task fails when a Fetch brings nothing for this
                                     long (default 120000, spark.network.timeout)
    fetchOffset.numRetries, fetchOffset.retryIntervalMs   driver offset lookups retried
                                     (default 3 times, 10 ms apart)
    groupIdPrefix, kafka.group.id    accepted with a warning: no consumer group is used
    kafka.*                          client settings: client.id, request.timeout.ms,
                                     max.partition.fetch.bytes, fetch.max.bytes,
                                     fetch.min.bytes, fetch.max.wait.ms, check.crcs,
                                     retry.backoff.ms, isolation.level: read_uncommitted
                                     (default) | read_committed (offsets up to the last
                                     stable offset; aborted transactions' records skipped)
    maxRecordsPerArrowBatch          kbroker's own: rows per Arrow batch (default 65536)

Sink options: kafka.bootstrap.servers, topic (overrides a `topic` column),
kafka.acks (default all), kafka.batch.size (bytes per record batch, default
1000000), kafka.compression.type (none | gzip | snappy | lz4 | zstd),
kafka.enable.idempotence (default: true when acks=all, as Kafka's producer),
kafka.max.request.size (default 1048576: bytes per Produce request and the largest
record), kafka.partitioner.class (Kafka's DefaultPartitioner, UniformStickyPartitioner
or RoundRobinPartitioner), kafka.partitioner.ignore.keys.

Security (both sides; kbroker.spark.security): kafka.security.protocol PLAINTEXT |
SSL | SASL_PLAINTEXT | SASL_SSL, kafka.sasl.mechanism PLAIN | SCRAM-SHA-256 |
SCRAM-SHA-512 with kafka.sasl.jaas.config, PEM trust and key stores (kafka.ssl.*),
kafka.ssl.endpoint.identification.algorithm.

Other kafka.* keys only tune Kafka's JVM clients (max.poll.records, linger.ms,
buffer.memory, ...): they are accepted and named in one warning, as Kafka's
clients log the configs they do not use. Keys that ask for a feature this client
lacks (deserializers, interceptors, auto commit, transactional.id, GSSAPI and
OAUTHBEARER, JKS and PKCS12 stores, Java classes) are refused.

Offsets JSON is Spark's: {"topic": {"partition": offset}}; partitions sorted.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kbroker.client import TopicPartition
from kbroker.spark.security import SecurityOptionError, SecurityOptions, security_options

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}

# kafka.* consumer/producer settings that mean "use a feature this client does not have"
_UNSUPPORTED_KAFKA = {
    "kafka.auto.offset.reset": "use startingOffsets",
    "kafka.key.deserializer": "keys are always binary; cast in the query",
    "kafka.value.deserializer": "values are always binary; cast in the query",
    "kafka.enable.auto.commit": "offsets live in the checkpoint",
    "kafka.interceptor.classes": "not supported",
    "kafka.key.serializer": "keys are written as binary; cast in the query",
    "kafka.value.serializer": "values are written as binary; cast in the query",
    "kafka.transactional.id": "Spark's Kafka sink does not write transactions",
}

# kafka.* keys this client honours (both sides; the source's and the sink's own below)
_CLIENT_KAFKA = {"kafka.bootstrap.servers", "kafka.client.id", "kafka.request.timeout.ms",
                 "kafka.retry.backoff.ms", "kafka.security.protocol"}
_SOURCE_KAFKA = {"kafka.max.partition.fetch.bytes", "kafka.fetch.max.bytes",
                 "kafka.fetch.min.bytes", "kafka.fetch.max.wait.ms", "kafka.check.crcs",
                 "kafka.isolation.level"}
_SINK_KAFKA = {"kafka.acks", "kafka.batch.size", "kafka.compression.type",
               "kafka.enable.idempotence", "kafka.max.request.size",
               "kafka.partitioner.class", "kafka.partitioner.ignore.keys"}

COMPRESSION_TYPES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# kafka.partitioner.class -> how rows without a partition are placed (batch_encode):
# 0 murmur2(key), null keys sticky; 1 sticky, keys ignored; 2 round robin, keys ignored
PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": 0,
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": 1,
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": 2,
}
PARTITION_BY_KEY, PARTITION_STICKY, PARTITION_ROUND_ROBIN = 0, 1, 2

DEFAULT_POLL_TIMEOUT_MS = 120_000  # spark.network.timeout, Spark's default for the option
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000


class OptionError(ValueError):
    """An option is missing, malformed or not supported."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, per-partition offsets or timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamps" | "timestamp"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True)
class ClientOptions:
    bootstrap_servers: str
    client_id: str = "kbroker-spark"
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    max_partition_fetch_bytes: int = 8 << 20
    fetch_max_bytes: int = 64 << 20
    fetch_max_wait_ms: int = 500
    check_crcs: bool = True
    isolation_level: int = 0  # 1: read_committed
    fetch_min_bytes: int = 1
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS  # kafkaConsumer.pollTimeoutMs
    offset_retries: int = 3  # fetchOffset.numRetries
    offset_retry_interval_ms: int = 10  # fetchOffset.retryIntervalMs
    security: SecurityOptions = SecurityOptions()  # kafka.security.protocol, sasl.*, ssl.*


@dataclass(frozen=True)
class SourceOptions:
    client: ClientOptions
    strategy: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_records_per_arrow_batch: int = 65536


@dataclass(frozen=True)
class SinkOptions:
    client: ClientOptions
    topic: str | None = None
    acks: int = -1
    batch_size: int = 1_000_000
    compression: int = 0  # a kbroker.records.compression.Codec
    idempotence: bool = True
    max_request_size: int = 1 << 20
    partitioner: int = PARTITION_BY_KEY


def lowercase(options: Mapping[str, Any]) -> dict[str, str]:
    """Option names as Spark compares them: case-insensitively (lowercased here)."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if value is not None:
            out[str(key).lower()] = str(value)
    return out


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return None if value is None else str(value)


def warn_unused(options: Mapping[str, str], honoured: set[str], side: str) -> list[str]:
    """One warning naming the kafka.* keys given but not used by this client (they tune
    Kafka's JVM client only), as Kafka's clients log unused configs. Returns them."""
    honoured_lower = {k.lower() for k in honoured}
    unused = sorted(k for k in options if k.startswith("kafka.") and k not in honoured_lower)
    if unused:
        log.warning("kbroker %s: the configurations %s were supplied but are not used: they "
                    "tune Kafka's JVM client, which kbroker does not run", side, unused)
    return unused


def time_ms(name: str, text: str) -> int:
    """Spark's time strings (Utils.timeStringAsMs): 500, 500ms, 30s, 15m, 1h, 1d."""
    m = re.fullmatch(r"\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*", text.lower())
    if m is None:
        raise OptionError(f"option {name} must be a time such as 500ms, 30s or 15m, "
                          f"not {text!r}")
    scale = {None: 1, "us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
             "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(int(m.group(1)) * scale)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def _int(options: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {value!r}") from None
    if n < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, not {n}")
    return n


def client_options(options: Mapping[str, str]) -> ClientOptions:
    servers = _get(options, "kafka.bootstrap.servers")
    if not servers:
        raise OptionError("option kafka.bootstrap.servers is required")
    for key, why in _UNSUPPORTED_KAFKA.items():
        if _get(options, key) is not None:
            raise OptionError(f"option {key} is not supported: {why}")
    try:
        security = security_options(options)
    except SecurityOptionError as e:
        raise OptionError(str(e)) from None
    isolation = (_get(options, "kafka.isolation.level") or "read_uncommitted").lower()
    if isolation not in ISOLATION_LEVELS:
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, "
                          f"not {isolation!r}")
    kw: dict[str, Any] = {"isolation_level": ISOLATION_LEVELS[isolation], "security": security}
    for key, attr in (("kafka.request.timeout.ms", "request_timeout_ms"),
                      ("kafka.retry.backoff.ms", "retry_backoff_ms"),
                      ("kafka.max.partition.fetch.bytes", "max_partition_fetch_bytes"),
                      ("kafka.fetch.max.bytes", "fetch_max_bytes"),
                      ("kafka.fetch.max.wait.ms", "fetch_max_wait_ms"),
                      ("kafka.fetch.min.bytes", "fetch_min_bytes"),
                      ("kafkaConsumer.pollTimeoutMs", "poll_timeout_ms"),
                      ("fetchOffset.numRetries", "offset_retries"),
                      ("fetchOffset.retryIntervalMs", "offset_retry_interval_ms")):
        n = _int(options, key, 0)
        if n is not None:
            kw[attr] = n
    client_id = _get(options, "kafka.client.id")
    if client_id:
        kw["client_id"] = client_id
    return ClientOptions(bootstrap_servers=servers,
                         check_crcs=_bool(options, "kafka.check.crcs", True), **kw)


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON: {e}: {text!r}") from None


def parse_partition_map(name: str, text: str) -> dict[TopicPartition, int]:
    """'{"t":{"0":5,"1":-2}}' -> {TopicPartition("t", 0): 5, ...}."""
    data = _json(name, text)
    if not isinstance(data, dict):
        raise OptionError(f"option {name} must be a JSON object of topics, not {text!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for p, value in parts.items():
            try:
                out[TopicPartition(topic, int(p))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: bad entry {topic}/{p}: {value!r}") from None
    return out


def _assign(text: str) -> tuple[TopicPartition, ...]:
    data = _json("assign", text)
    if not isinstance(data, dict) or not data:
        raise OptionError(f'option assign must look like {{"topicA":[0,1]}}, not {text!r}')
    tps = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise OptionError(f"option assign: topic {topic!r} needs a list of partitions")
        tps += [TopicPartition(topic, p) for p in parts]
    return tuple(sorted(set(tps)))


def _subscription(options: Mapping[str, str]) -> dict[str, Any]:
    given: dict[str, str] = {}
    for key in ("subscribe", "subscribePattern", "assign"):
        value = _get(options, key)
        if value is not None:
            given[key] = value
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign "
                          f"must be given (got {sorted(given) or 'none'})")
    (strategy, value), = given.items()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe lists no topics")
        return {"strategy": strategy, "topics": topics}
    if strategy == "subscribePattern":
        if not value.strip():
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid regex: {e}") from None
        return {"strategy": strategy, "pattern": value}
    return {"strategy": strategy, "assigned": _assign(value)}


def _offset_spec(options: Mapping[str, str], which: str, default: str,
                 streaming: bool) -> OffsetSpec:
    """startingOffsets / endingOffsets and their by-timestamp variants (these win)."""
    ts = _int(options, f"{which}Timestamp", 0)
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts)
    by_ts = _get(options, f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=parse_partition_map(f"{which}OffsetsByTimestamp",
                                                                    by_ts))
    text = (_get(options, f"{which}Offsets") or default).strip()
    if text.lower() in ("earliest", "latest"):
        kind = text.lower()
        if which == "ending" and kind == "earliest":
            raise OptionError("endingOffsets=earliest is not allowed")
        if which == "starting" and kind == "latest" and not streaming:
            raise OptionError("startingOffsets=latest is not allowed for batch queries")
        return OffsetSpec(kind)
    offsets = parse_partition_map(f"{which}Offsets", text)
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise OptionError(f"{which}Offsets: bad offset {off} for {tp}")
        if which == "ending" and off == EARLIEST:
            raise OptionError(f"endingOffsets: earliest (-2) is not allowed ({tp})")
        if which == "starting" and off == LATEST and not streaming:
            raise OptionError(f"startingOffsets: latest (-1) is not allowed for batch ({tp})")
    return OffsetSpec("offsets", offsets=offsets)


def source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    options = lowercase(options)
    client = client_options(options)
    if _get(options, "kafka.group.id") is not None:
        log.warning("kbroker source: kafka.group.id=%s is accepted but not used: the source "
                    "reads without a consumer group and keeps its offsets in the query's "
                    "checkpoint (Spark warns against this option too)",
                    _get(options, "kafka.group.id"))
    if _get(options, "groupIdPrefix") is not None:
        log.warning("kbroker source: groupIdPrefix is accepted but not used: the source "
                    "reads without a consumer group")
    warn_unused(options, _CLIENT_KAFKA | _SOURCE_KAFKA | {"kafka.group.id"} |
                client.security.used_keys(), "source")
    sub = _subscription(options)
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if _get(options, name) is not None:
                raise OptionError(f"option {name} is for batch queries only")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")
    return SourceOptions(
        client=client,
        starting=_offset_spec(options, "starting", "latest" if streaming else "earliest",
                              streaming),
        ending=OffsetSpec("latest") if streaming else
        _offset_spec(options, "ending", "latest", streaming),
        by_timestamp_strategy=strategy,
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", 1),
        min_partitions=_int(options, "minPartitions", 1),
        max_records_per_partition=_int(options, "maxRecordsPerPartition", 1),
        min_offsets_per_trigger=_int(options, "minOffsetsPerTrigger", 0),
        max_trigger_delay_ms=time_ms("maxTriggerDelay",
                                     _get(options, "maxTriggerDelay") or "15m"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_records_per_arrow_batch=_int(options, "maxRecordsPerArrowBatch", 1) or 65536,
        **sub,
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    options = lowercase(options)
    client = client_options(options)
    acks_text = (_get(options, "kafka.acks") or "all").strip().lower()
    acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(acks_text)
    if acks is None:
        raise OptionError(f"kafka.acks must be all, -1, 0 or 1, not {acks_text!r}")
    codec_name = (_get(options, "kafka.compression.type") or "none").strip().lower()
    if codec_name not in COMPRESSION_TYPES:
        raise OptionError(f"kafka.compression.type must be one of {sorted(COMPRESSION_TYPES)}, "
                          f"not {codec_name!r}")
    # Kafka's producer: idempotent by default unless acks says otherwise; asked for
    # explicitly with acks other than all, it is a configuration error
    idempotence = _bool(options, "kafka.enable.idempotence", acks == -1)
    if idempotence and acks != -1:
        raise OptionError("kafka.enable.idempotence=true needs kafka.acks=all "
                          f"(not {acks_text}), as Kafka's producer requires")
    partitioner_class = _get(options, "kafka.partitioner.class")
    partitioner = PARTITION_BY_KEY
    if partitioner_class is not None:
        partitioner_class = partitioner_class.strip()
        if partitioner_class not in PARTITIONERS:
            raise OptionError(f"kafka.partitioner.class={partitioner_class}: a Java class "
                              f"cannot run here; kbroker knows {sorted(PARTITIONERS)}")
        partitioner = PARTITIONERS[partitioner_class]
    if _bool(options, "kafka.partitioner.ignore.keys", False) and partitioner == PARTITION_BY_KEY:
        partitioner = PARTITION_STICKY
    max_request_size = _int(options, "kafka.max.request.size", 1) or 1 << 20
    warn_unused(options, _CLIENT_KAFKA | _SINK_KAFKA | client.security.used_keys(), "sink")
    return SinkOptions(client=client, topic=_get(options, "topic"), acks=acks,
                       batch_size=_int(options, "kafka.batch.size", 1) or 1_000_000,
                       compression=COMPRESSION_TYPES[codec_name], idempotence=idempotence,
                       max_request_size=max_request_size, partitioner=partitioner)


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON shape: {"topic": {"partition": offset}}, sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}
