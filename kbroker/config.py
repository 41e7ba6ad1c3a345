"""Broker configuration: a typed, frozen BrokerConfig from server.properties keys.

Keys are Apache Kafka's own (`listeners`, `log.dirs`, `log.retention.hours`, ...).
Sources, later wins: built-in defaults < the properties file < `--override` pairs
(or the dict given to `Broker`).

Properties file format (the subset of java.util.Properties Kafka configs use):

    # comment            ! comment too
    key=value            key: value            key value
    long.value=a,\\
               b         (a trailing backslash continues the logical line)

Unknown keys are logged once each and ignored. Keys Kafka has but kbroker does
not use (threads, socket buffers, ZooKeeper/KRaft settings) are accepted
silently at DEBUG level. An ill-typed value raises ConfigError naming the key.

Default data directory: `/tmp/kbroker-logs`, the counterpart of Kafka's
`/tmp/kafka-logs`: the same place Kafka quick-starts use, independent of the
current directory (so `kbroker serve` works from anywhere, including a
read-only checkout) and never inside a source tree where it could be committed.
Set `log.dirs` for anything that must survive a reboot.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_LOG_DIR = "/tmp/kbroker-logs"
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


# ---------------------------------------------------------------------------
# properties files


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties-style text into a dict (later keys win)."""
    props: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        if key:
            props[key] = value
    return props


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _split_key_value(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            key_chars.append(line[i + 1])
            i += 2
            continue
        if c in "=: \t":
            break
        key_chars.append(c)
        i += 1
    rest = line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return "".join(key_chars), _unescape(rest.rstrip())


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), value)


def load_properties_file(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e


def parse_override(pair: str) -> tuple[str, str]:
    """`KEY=VALUE` from the command line."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--override expects KEY=VALUE, got {pair!r}")
    return key.strip(), value.strip()


# ---------------------------------------------------------------------------
# typed values


def _to_int(key: str, value: str, lo: int = -(2**63), hi: int = LONG_MAX) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ConfigError(f"invalid value {value!r} for {key}: expected an integer") from None
    if not lo <= n <= hi:
        raise ConfigError(f"invalid value {value!r} for {key}: must be in [{lo}, {hi}]")
    return n


def _to_bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigError(f"invalid value {value!r} for {key}: expected true or false")


def _to_list(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


@dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` / `advertised.listeners`."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(-?\d+)$")


def parse_listeners(key: str, value: str) -> tuple[Listener, ...]:
    listeners = []
    for item in _to_list(value):
        m = _LISTENER_RE.match(item)
        if not m:
            raise ConfigError(
                f"invalid value {item!r} for {key}: expected NAME://host:port, "
                "e.g. PLAINTEXT://127.0.0.1:9092"
            )
        port = _to_int(key, m.group(3), 0, 65535)
        listeners.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), port))
    names = [x.name for x in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"invalid value {value!r} for {key}: listener names must be unique")
    return tuple(listeners)


# ---------------------------------------------------------------------------
# the key table


@dataclass(frozen=True)
class _Key:
    key: str
    attr: str
    default: str | None
    convert: Callable[[str, str], Any]


def _int(lo: int = -(2**31), hi: int = 2**31 - 1) -> Callable[[str, str], int]:
    return lambda k, v: _to_int(k, v, lo, hi)


def _long(lo: int = -(2**63)) -> Callable[[str, str], int]:
    return lambda k, v: _to_int(k, v, lo)


def _str(k: str, v: str) -> str:
    return v


def _choice(*choices: str) -> Callable[[str, str], str]:
    def convert(k: str, v: str) -> str:
        if v not in choices:
            raise ConfigError(f"invalid value {v!r} for {k}: expected one of {', '.join(choices)}")
        return v

    return convert


_KEYS: tuple[_Key, ...] = (
    _Key("listeners", "listeners", "PLAINTEXT://127.0.0.1:9092", parse_listeners),
    _Key("advertised.listeners", "advertised_listeners", None, parse_listeners),
    _Key("node.id", "node_id", None, _int(0)),
    _Key("num.partitions", "num_partitions", "1", _int(1)),
    _Key("default.replication.factor", "default_replication_factor", "1", _int(1)),
    _Key("auto.create.topics.enable", "auto_create_topics_enable", "true", _to_bool),
    _Key("log.segment.bytes", "log_segment_bytes", "1073741824", _int(14)),
    _Key("log.roll.jitter.ms", "log_roll_jitter_ms", "0", _long(0)),
    _Key("log.retention.bytes", "log_retention_bytes", "-1", _long(-1)),
    _Key("log.retention.check.interval.ms", "log_retention_check_interval_ms", "300000", _long(1)),
    _Key("log.index.interval.bytes", "log_index_interval_bytes", "4096", _int(0)),
    _Key("log.index.size.max.bytes", "log_index_size_max_bytes", "10485760", _int(4)),
    _Key("log.flush.interval.messages", "log_flush_interval_messages", str(LONG_MAX), _long(1)),
    _Key("log.flush.interval.ms", "log_flush_interval_ms", str(LONG_MAX), _long(0)),
    _Key("log.segment.delete.delay.ms", "log_segment_delete_delay_ms", "60000", _long(0)),
    _Key("log.cleanup.policy", "log_cleanup_policy", "delete", _str),
    _Key("log.preallocate", "log_preallocate", "false", _to_bool),
    _Key(
        "log.message.timestamp.type",
        "log_message_timestamp_type",
        "CreateTime",
        _choice("CreateTime", "LogAppendTime"),
    ),
    _Key(
        "log.message.timestamp.before.max.ms",
        "log_message_timestamp_before_max_ms",
        str(LONG_MAX),
        _long(0),
    ),
    _Key(
        "log.message.timestamp.after.max.ms",
        "log_message_timestamp_after_max_ms",
        str(LONG_MAX),
        _long(0),
    ),
    _Key("log.cleaner.delete.retention.ms", "log_cleaner_delete_retention_ms", "86400000", _long(0)),
    _Key("log.cleaner.min.compaction.lag.ms", "log_cleaner_min_compaction_lag_ms", "0", _long(0)),
    _Key(
        "log.cleaner.max.compaction.lag.ms",
        "log_cleaner_max_compaction_lag_ms",
        str(LONG_MAX),
        _long(1),
    ),
    _Key("log.cleaner.min.cleanable.ratio", "log_cleaner_min_cleanable_ratio", "0.5", _str),
    _Key("num.recovery.threads.per.data.dir", "num_recovery_threads_per_data_dir", "1", _int(1)),
    _Key("min.insync.replicas", "min_insync_replicas", "1", _int(1)),
    _Key("unclean.leader.election.enable", "unclean_leader_election_enable", "false", _to_bool),
    _Key("message.max.bytes", "message_max_bytes", "1048588", _int(0)),
    _Key(
        "compression.type",
        "compression_type",
        "producer",
        _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    ),
    _Key("socket.request.max.bytes", "socket_request_max_bytes", "104857600", _int(1)),
    _Key("connections.max.idle.ms", "connections_max_idle_ms", "600000", _long(-1)),
    _Key("max.connections", "max_connections", str(2**31 - 1), _int(0)),
    _Key("queued.max.request.bytes", "queued_max_request_bytes", "-1", _long(-1)),
    _Key("queued.max.requests", "queued_max_requests", "500", _int(1)),
    _Key("max.broker.partitions", "max_broker_partitions", str(2**31 - 1), _int(0)),  # KIP-578
    # kbroker's own (Kafka keeps every segment open): segments holding an open .log and
    # mapped indexes at once, least recently used closed first; -1: half the open-file limit
    _Key("log.open.segment.files.max", "log_open_segment_files_max", "-1", _int(-1)),
    _Key(
        "group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", "3000", _int(0)
    ),
    _Key("group.min.session.timeout.ms", "group_min_session_timeout_ms", "6000", _int(0)),
    _Key("group.max.session.timeout.ms", "group_max_session_timeout_ms", "1800000", _int(0)),
    _Key("group.max.size", "group_max_size", str(2**31 - 1), _int(1)),
    _Key("offsets.topic.num.partitions", "offsets_topic_num_partitions", "50", _int(1)),
    _Key("offsets.topic.replication.factor", "offsets_topic_replication_factor", "1", _int(1)),
    _Key("offsets.topic.segment.bytes", "offsets_topic_segment_bytes", "104857600", _int(1)),
    _Key("offsets.retention.minutes", "offsets_retention_minutes", "10080", _int(1)),
    _Key("offsets.retention.check.interval.ms", "offsets_retention_check_interval_ms", "600000", _long(1)),
    _Key("offset.metadata.max.bytes", "offset_metadata_max_bytes", "4096", _int(0)),
    _Key("transaction.max.timeout.ms", "transaction_max_timeout_ms", "900000", _int(1)),
    _Key("transactional.id.expiration.ms", "transactional_id_expiration_ms", "604800000", _int(1)),
    _Key("transaction.state.log.num.partitions", "transaction_state_log_num_partitions", "50", _int(1)),
    _Key("producer.id.expiration.ms", "producer_id_expiration_ms", "86400000", _int(1)),
    _Key("delete.topic.enable", "delete_topic_enable", "true", _to_bool),
    _Key("broker.rack", "broker_rack", None, _str),
    _Key("cluster.id", "cluster_id", None, _str),
)

# Keys that combine: handled in BrokerConfig.from_props, not by _KEYS.
_COMBINED = {
    "log.dirs", "log.dir", "broker.id", "listener.security.protocol.map", "controller.listener.names",
    "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "log.roll.ms", "log.roll.hours",
}

# Kafka keys accepted without effect: threading, socket buffers, replication and
# cluster-membership settings of a multi-broker Kafka, quotas, metrics.
_IGNORED = frozenset(
    """
    num.io.threads num.network.threads num.replica.fetchers num.replica.alter.log.dirs.threads
    background.threads socket.send.buffer.bytes socket.receive.buffer.bytes
    socket.listen.backlog.size log.flush.scheduler.interval.ms log.flush.offset.checkpoint.interval.ms
    log.flush.start.offset.checkpoint.interval.ms log.cleaner.enable log.cleaner.threads
    log.cleaner.dedupe.buffer.size log.cleaner.io.buffer.size log.cleaner.backoff.ms
    transaction.state.log.replication.factor transaction.state.log.min.isr
    transaction.state.log.segment.bytes zookeeper.connect zookeeper.connection.timeout.ms
    zookeeper.session.timeout.ms process.roles controller.quorum.voters
    controller.quorum.bootstrap.servers inter.broker.listener.name
    security.inter.broker.protocol replica.lag.time.max.ms
    replica.fetch.max.bytes replica.socket.timeout.ms auto.leader.rebalance.enable
    leader.imbalance.check.interval.seconds metadata.log.dir metric.reporters
    metrics.num.samples metrics.sample.window.ms request.timeout.ms group.coordinator.rebalance.protocols
    inter.broker.protocol.version log.message.format.version log.message.downconversion.enable
    """.split()
)

# topic-level config key -> the broker key that supplies its default (Kafka's
# LogConfig synonyms). DescribeConfigs reports these as DEFAULT_CONFIG sources.
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

_warned_unknown: set[str] = set()


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, typed. Build with `from_props`; `props` keeps the inputs."""

    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...] | None
    log_dirs: tuple[str, ...]
    node_id: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_jitter_ms: int
    log_retention_ms: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_segment_delete_delay_ms: int
    log_cleanup_policy: str
    log_preallocate: bool
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_min_cleanable_ratio: str
    num_recovery_threads_per_data_dir: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    message_max_bytes: int
    compression_type: str
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    max_connections: int
    queued_max_request_bytes: int
    queued_max_requests: int
    max_broker_partitions: int
    log_open_segment_files_max: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_state_log_num_partitions: int
    producer_id_expiration_ms: int
    delete_topic_enable: bool
    broker_rack: str | None
    cluster_id: str | None
    props: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_props(cls, props: Mapping[str, str] | None = None) -> BrokerConfig:
        """Validate and type `props` (Kafka keys -> string values)."""
        props = {str(k).strip(): str(v).strip() for k, v in (props or {}).items()}
        _warn_unknown(props)
        values: dict[str, Any] = {}
        for spec in _KEYS:
            raw = props.get(spec.key, spec.default)
            values[spec.attr] = None if raw is None else spec.convert(spec.key, raw)
        values["node_id"] = _node_id(props)
        values["log_dirs"] = _log_dirs(props)
        values["log_retention_ms"] = _retention_ms(props)
        values["log_roll_ms"] = _roll_ms(props)
        if not values["listeners"]:
            raise ConfigError("listeners must name at least one listener")
        values["listeners"], values["advertised_listeners"] = _client_listeners(
            props, values["listeners"], values["advertised_listeners"]
        )
        if values["message_max_bytes"] > values["socket_request_max_bytes"]:
            log.warning("message.max.bytes exceeds socket.request.max.bytes")
        queued_bytes = values["queued_max_request_bytes"]
        if 0 < queued_bytes < values["socket_request_max_bytes"]:  # Kafka's KafkaConfig check
            raise ConfigError("queued.max.request.bytes must be -1 (no bound) or at least "
                              f"socket.request.max.bytes ({values['socket_request_max_bytes']})")
        if queued_bytes == 0:
            raise ConfigError("queued.max.request.bytes must be -1 (no bound) or positive")
        config = cls(**values, props=dict(props))
        config.log_config()  # fail fast on values storage rejects
        return config

    def log_config(self) -> Any:
        """The storage LogConfig with this broker's `log.*` defaults (no topic overrides)."""
        from kbroker.storage.log_config import LogConfig

        defaults = self.topic_config_defaults()
        try:
            config = LogConfig.from_props(defaults)
        except ValueError as e:
            m = re.search(r"config (\S+)", str(e))
            key = TOPIC_CONFIG_SYNONYMS.get(m.group(1), m.group(1)) if m else "log config"
            raise ConfigError(f"{key}: {e}") from None
        # Broker defaults are not topic overrides (DescribeConfigs tells them apart).
        return dataclasses.replace(config, overridden=frozenset())

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        return BrokerConfig.from_props({**self.props, **overrides})

    def topic_config_defaults(self) -> dict[str, str]:
        """Topic-level configs (`retention.ms`, ...) defaulted from the broker's `log.*` keys."""
        by_broker_key = {
            "log.retention.ms": str(self.log_retention_ms),
            "log.roll.ms": str(self.log_roll_ms),
        }
        for spec in _KEYS:
            value = getattr(self, spec.attr)
            if isinstance(value, bool):
                by_broker_key[spec.key] = "true" if value else "false"
            elif value is not None:
                by_broker_key[spec.key] = str(value)
        return {t: by_broker_key[b] for t, b in TOPIC_CONFIG_SYNONYMS.items() if b in by_broker_key}

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)


def _warn_unknown(props: Mapping[str, str]) -> None:
    known = {s.key for s in _KEYS} | _COMBINED
    for key in props:
        if key in known:
            continue
        if key in _IGNORED or key.startswith(("listener.name.", "ssl.", "sasl.", "kafka.metrics.")):
            log.debug("config %s is accepted and has no effect in kbroker", key)
            continue
        if key not in _warned_unknown:
            _warned_unknown.add(key)
            log.warning("unknown configuration %s ignored", key)


def _node_id(props: Mapping[str, str]) -> int:
    node = props.get("node.id")
    broker = props.get("broker.id")
    if node is not None and broker is not None and node != broker:
        raise ConfigError(f"node.id ({node}) and broker.id ({broker}) disagree")
    raw = node if node is not None else broker
    if raw is None:
        return 0
    key = "node.id" if node is not None else "broker.id"
    return _to_int(key, raw, 0, 2**31 - 1)


def _log_dirs(props: Mapping[str, str]) -> tuple[str, ...]:
    if "log.dirs" in props:
        dirs = _to_list(props["log.dirs"])
        if not dirs:
            raise ConfigError("log.dirs is empty")
        return dirs
    if "log.dir" in props:
        dirs = _to_list(props["log.dir"])
        if not dirs:
            raise ConfigError("log.dir is empty")
        return dirs
    return (DEFAULT_LOG_DIR,)


def _retention_ms(props: Mapping[str, str]) -> int:
    # Kafka: log.retention.ms > log.retention.minutes > log.retention.hours; -1 = unlimited.
    if "log.retention.ms" in props:
        ms = _to_int("log.retention.ms", props["log.retention.ms"], -1)
    elif "log.retention.minutes" in props:
        ms = _to_int("log.retention.minutes", props["log.retention.minutes"], -1, 2**31 - 1) * 60_000
    else:
        hours = _to_int("log.retention.hours", props.get("log.retention.hours", "168"), -1, 2**31 - 1)
        ms = hours * 3_600_000
    return -1 if ms < 0 else ms


def _roll_ms(props: Mapping[str, str]) -> int:
    if "log.roll.ms" in props:
        return _to_int("log.roll.ms", props["log.roll.ms"], 1)
    return _to_int("log.roll.hours", props.get("log.roll.hours", "168"), 1, 2**31 - 1) * 3_600_000


_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def _client_listeners(
    props: Mapping[str, str],
    listeners: tuple[Listener, ...],
    advertised: tuple[Listener, ...] | None,
) -> tuple[tuple[Listener, ...], tuple[Listener, ...] | None]:
    """The listeners kbroker serves: KRaft controller listeners are dropped (a single
    kbroker node has no controller quorum), the rest must map to PLAINTEXT through
    `listener.security.protocol.map`, so a stock Kafka server.properties starts."""
    key = "listener.security.protocol.map"
    protocols: dict[str, str] = {}
    for item in _to_list(props.get(key, _DEFAULT_PROTOCOL_MAP)):
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(f"invalid value {item!r} for {key}: expected NAME:PROTOCOL")
        protocols[name.strip().upper()] = proto.strip().upper()
    controllers = {n.upper() for n in _to_list(props.get("controller.listener.names", ""))}
    served = tuple(x for x in listeners if x.name not in controllers)
    if not served:
        raise ConfigError("listeners must name at least one listener for clients")
    for lst in served:
        if lst.name not in protocols:
            raise ConfigError(f"listeners: {lst.name} is not in {key}")
        if protocols[lst.name] != "PLAINTEXT":
            raise ConfigError(
                f"invalid value for listeners: {lst} uses {protocols[lst.name]}; "
                "only PLAINTEXT is supported"
            )
    if advertised:
        advertised = tuple(a for a in advertised if a.name not in controllers)
        names = {x.name for x in served}
        for adv in advertised:
            if adv.name not in names:
                raise ConfigError(f"advertised.listeners names {adv.name}, which is not in listeners")
    return served, advertised


def broker_config(config: BrokerConfig | Mapping[str, str] | None) -> BrokerConfig:
    """Accept what Broker accepts: a BrokerConfig, a dict of Kafka keys, or None."""
    if isinstance(config, BrokerConfig):
        return config
    return BrokerConfig.from_props(config or {})
