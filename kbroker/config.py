"""Broker configuration: a typed, frozen BrokerConfig from server.properties keys.

Keys are Apache Kafka's own (`listeners`, `log.dirs`, `log.retention.hours`, ...),
defined once, with their types, defaults, validators and documentation, in
kbroker.common.configs (BROKER_CONFIGS); this module parses the properties file,
types every key through that table and combines the keys Kafka combines (node.id
and broker.id, log.dirs and log.dir, log.retention.{ms,minutes,hours},
log.roll.{ms,hours}, listeners with the security protocol map and the controller
listener names). Sources, later wins: built-in defaults < the properties file <
`--override` pairs (or the dict given to `Broker`).

Properties file format (the subset of java.util.Properties Kafka configs use):

    # comment            ! comment too
    key=value            key: value            key value
    long.value=a,\\
               b         (a trailing backslash continues the logical line)

Unknown keys are logged once each and ignored. Keys Kafka has that only tune what
kbroker does not have (ACCEPTED_WITHOUT_EFFECT: threads, socket buffers, ...) are
accepted silently at DEBUG level. An ill-typed value raises ConfigError naming the key.

Default data directory: `/tmp/kbroker-logs` (DEFAULT_LOG_DIR), the counterpart of
Kafka's `/tmp/kafka-logs`: the same place Kafka quick-starts use, independent of the
current directory (so `kbroker serve` works from anywhere, including a read-only
checkout) and never inside a source tree where it could be committed. Set
`log.dirs` for anything that must survive a reboot.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbroker.common.config_def import ConfigError, Type, parse_host_port, parse_value
from kbroker.common.configs import (
    BROKER_CONFIGS,
    DEFAULT_LOG_DIR,
    SECURITY_PREFIXES,
    TOPIC_CONFIGS,
    accepted_without_effect,
)
from kbroker.security.oauth_settings import check_unprefixed_oidc_keys
from kbroker.security.settings import (
    LISTENER_KEYS,
    PROTOCOL_IDS,
    InterBrokerLogin,
    ListenerSecurity,
    check_security_keys,
    inter_broker_login,
    listener_security,
)
from kbroker.storage.log_config import LogConfig

__all__ = [
    "DEFAULT_LOG_DIR", "BrokerConfig", "ConfigError", "Listener", "broker_config",
    "format_properties", "load_properties_file", "parse_override", "parse_properties",
]

log = logging.getLogger(__name__)


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


def format_properties(props: Mapping[str, str]) -> str:
    """java.util.Properties text of `props` (what Properties.store writes, less its
    date comment): one `key=value` line each, sorted, escaped so parse_properties
    reads back the same dict."""

    def escape(text: str, specials: str) -> str:
        out = text.replace("\\", "\\\\")
        for c, e in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\f", "\\f")):
            out = out.replace(c, e)
        for c in specials:
            out = out.replace(c, "\\" + c)
        return out

    lines = []
    for key in sorted(props):
        value = escape(props[key], "")
        if value[:1] in (" ", "#", "!"):
            value = "\\" + value
        lines.append(f"{escape(key, '=: #!')}={value}\n")
    return "".join(lines)


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
# listeners


@dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` / `advertised.listeners`."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(-?\d+)$")


def parse_listeners(key: str, items: tuple[str, ...]) -> tuple[Listener, ...]:
    listeners = []
    for item in items:
        m = _LISTENER_RE.match(item)
        if not m:
            raise ConfigError(
                f"invalid value {item!r} for {key}: expected NAME://host:port, "
                "e.g. PLAINTEXT://127.0.0.1:9092"
            )
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"invalid value {item!r} for {key}: the port must be in [0, 65535]")
        listeners.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), port))
    names = [x.name for x in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"invalid value {','.join(items)!r} for {key}: listener names must be unique")
    return tuple(listeners)


# ---------------------------------------------------------------------------
# BrokerConfig

# Table keys folded into another key's field by from_props (Kafka's precedence).
FOLDED_KEYS: dict[str, str] = {
    "broker.id": "node.id",
    "log.dir": "log.dirs",
    "log.retention.minutes": "log.retention.ms",
    "log.retention.hours": "log.retention.ms",
    "log.roll.hours": "log.roll.ms",
    "listener.security.protocol.map": "listeners",
    "controller.listener.names": "listeners",
    # each listener's TLS and SASL settings (BrokerConfig.listener_security)
    **dict.fromkeys(sorted(LISTENER_KEYS | {"sasl.mechanism.inter.broker.protocol"}), "listeners"),
}

_warned_unknown: set[str] = set()


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, typed: one field per key of BROKER_CONFIGS (named as the
    key, dots as underscores) except FOLDED_KEYS. Build with `from_props`; `props`
    keeps the inputs."""

    # server and listeners
    node_id: int
    cluster_id: str | None
    broker_rack: str | None
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...] | None
    inter_broker_listener_name: str | None
    security_inter_broker_protocol: str
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: str
    queued_max_requests: int
    queued_max_request_bytes: int
    request_timeout_ms: int
    fetch_max_bytes: int
    fetch_partition_response_max_records: int
    fetch_response_max_records: int
    telemetry_max_bytes: int
    # topics
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    max_broker_partitions: int
    # logs
    log_dirs: tuple[str, ...]
    log_retention_ms: int
    log_roll_ms: int
    log_retention_check_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    num_recovery_threads_per_data_dir: int
    log_open_segment_files_max: int
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_backoff_ms: int
    # the broker defaults of topic configs
    log_cleanup_policy: tuple[str, ...]
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    log_cleaner_delete_retention_ms: int
    log_segment_delete_delay_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_index_interval_bytes: int
    log_cleaner_max_compaction_lag_ms: int
    message_max_bytes: int
    log_message_downconversion_enable: bool
    log_message_format_version: str
    log_message_timestamp_after_max_ms: int
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_difference_max_ms: int
    log_message_timestamp_type: str
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_min_compaction_lag_ms: int
    min_insync_replicas: int
    log_preallocate: bool
    log_retention_bytes: int
    log_segment_bytes: int
    log_index_size_max_bytes: int
    log_roll_jitter_ms: int
    unclean_leader_election_enable: bool
    # cluster mode
    zookeeper_connect: str | None
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int | None
    replica_lag_time_max_ms: int
    replica_socket_timeout_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_backoff_ms: int
    replica_fetch_response_max_bytes: int
    replica_high_watermark_checkpoint_interval_ms: int
    num_replica_fetchers: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    # coordinators
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    group_consumer_session_timeout_ms: int
    group_consumer_min_session_timeout_ms: int
    group_consumer_max_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_min_heartbeat_interval_ms: int
    group_consumer_max_heartbeat_interval_ms: int
    group_consumer_max_size: int
    group_consumer_assignors: tuple[str, ...]
    group_consumer_migration_policy: str
    group_share_session_timeout_ms: int
    group_share_min_session_timeout_ms: int
    group_share_max_session_timeout_ms: int
    group_share_heartbeat_interval_ms: int
    group_share_min_heartbeat_interval_ms: int
    group_share_max_heartbeat_interval_ms: int
    group_share_max_size: int
    group_share_record_lock_duration_ms: int
    group_share_min_record_lock_duration_ms: int
    group_share_max_record_lock_duration_ms: int
    group_share_delivery_count_limit: int
    group_share_partition_max_record_locks: int
    group_share_max_share_sessions: int
    share_coordinator_state_topic_num_partitions: int
    share_coordinator_state_topic_replication_factor: int
    share_coordinator_state_topic_segment_bytes: int
    share_coordinator_state_topic_min_isr: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    offset_metadata_max_bytes: int
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_state_log_segment_bytes: int
    transaction_state_log_load_buffer_size: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    producer_id_expiration_ms: int
    # kbroker's own
    operations_listener: str | None
    operations_write_enable: bool
    # security
    authorizer_class_name: str
    super_users: str | None
    allow_everyone_if_no_acl_found: bool
    quota_window_num: int
    quota_window_size_seconds: int
    # listener name -> its protocol, TLS and SASL settings (derived from the keys above)
    listener_security: Mapping[str, ListenerSecurity] = field(default_factory=dict, repr=False)
    # cluster mode, a SASL inter-broker listener: what this broker logs in to the others with
    inter_broker_login: InterBrokerLogin | None = field(default=None, repr=False)
    props: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_props(cls, props: Mapping[str, str] | None = None) -> BrokerConfig:
        """Validate and type `props` (Kafka keys -> string values)."""
        props = {str(k).strip(): str(v).strip() for k, v in (props or {}).items()}
        _warn_unknown(props)
        typed = BROKER_CONFIGS.parse(props)
        values: dict[str, Any] = {
            key.attr: typed[key.name] for key in BROKER_CONFIGS if key.name not in FOLDED_KEYS
        }
        values["node_id"] = _node_id(typed)
        values["log_dirs"] = _log_dirs(props, typed)
        values["log_retention_ms"] = _retention_ms(props, typed)
        values["log_roll_ms"] = _roll_ms(props, typed)
        values["listeners"], values["advertised_listeners"], protocols = _client_listeners(typed)
        check_security_keys(props, {x.name for x in values["listeners"]})
        values["listener_security"] = {
            x.name: listener_security(x.name, protocols[x.name], props, typed)
            for x in values["listeners"]}
        check_unprefixed_oidc_keys(props, {n: s.oauth for n, s in values["listener_security"].items()})
        values["inter_broker_login"] = _check_inter_broker(props, typed, values)
        _check_inter_broker_principal(typed, values)
        if values["message_max_bytes"] > values["socket_request_max_bytes"]:
            log.warning("message.max.bytes exceeds socket.request.max.bytes")
        queued_bytes = values["queued_max_request_bytes"]
        if 0 < queued_bytes < values["socket_request_max_bytes"]:  # Kafka's KafkaConfig check
            raise ConfigError("queued.max.request.bytes must be -1 (no bound) or at least "
                              f"socket.request.max.bytes ({values['socket_request_max_bytes']})")
        if queued_bytes == 0:
            raise ConfigError("queued.max.request.bytes must be -1 (no bound) or positive")
        overrides = per_ip_overrides(values["max_connections_per_ip_overrides"])
        if values["max_connections_per_ip"] == 0 and not overrides:  # Kafka's check
            raise ConfigError("max.connections.per.ip=0 needs max.connections.per.ip.overrides "
                              "(no address could connect)")
        _check_consumer_group_keys(values)
        config = cls(**values, props=dict(props))
        config.log_config()  # fail fast on values storage rejects
        return config

    @property
    def operations_endpoint(self) -> tuple[str, int] | None:
        """(host, port) of the operations HTTP listener, None when it is off."""
        if not self.operations_listener:
            return None
        return parse_host_port(self.operations_listener)

    def log_config(self) -> LogConfig:
        """The storage LogConfig with this broker's `log.*` defaults (no topic overrides)."""
        defaults = self.topic_config_defaults()
        try:
            config = LogConfig.from_props(defaults)
        except ConfigError as e:
            m = re.search(r"configuration (\S+):", str(e))
            key = TOPIC_CONFIGS[m.group(1)].synonyms[0] if m else "log config"
            raise ConfigError(f"{key}: {e}") from None
        # Broker defaults are not topic overrides (DescribeConfigs tells them apart).
        return dataclasses.replace(config, overridden=frozenset())

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        return BrokerConfig.from_props({**self.props, **overrides})

    def topic_config_defaults(self) -> dict[str, str]:
        """Topic-level configs (`retention.ms`, ...) defaulted from their broker synonyms."""
        out = {}
        for key in TOPIC_CONFIGS:
            if key.synonyms:
                value = key.render(getattr(self, BROKER_CONFIGS[key.synonyms[0]].attr))
                if value is not None:
                    out[key.name] = value
        return out

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)


def _warn_unknown(props: Mapping[str, str]) -> None:
    for key in props:
        if key in BROKER_CONFIGS or key.startswith(SECURITY_PREFIXES):  # checked by security
            continue
        if accepted_without_effect(key):
            log.debug("config %s is accepted and has no effect in kbroker", key)
            continue
        if key not in _warned_unknown:
            _warned_unknown.add(key)
            log.warning("unknown configuration %s ignored", key)


def _node_id(typed: Mapping[str, Any]) -> int:
    node, broker = typed["node.id"], typed["broker.id"]
    if node is not None and broker is not None and node != broker:
        raise ConfigError(f"node.id ({node}) and broker.id ({broker}) disagree")
    for value in (node, broker):
        if value is not None:
            return int(value)
    return 0


def _log_dirs(props: Mapping[str, str], typed: Mapping[str, Any]) -> tuple[str, ...]:
    key = "log.dirs" if "log.dirs" in props else "log.dir"
    dirs = parse_value(key, Type.LIST, typed[key])
    if not dirs:
        raise ConfigError(f"{key} is empty")
    return tuple(dirs)


def _retention_ms(props: Mapping[str, str], typed: Mapping[str, Any]) -> int:
    # Kafka: log.retention.ms > log.retention.minutes > log.retention.hours; -1 = unlimited.
    if "log.retention.ms" in props:
        ms = int(typed["log.retention.ms"])
    elif "log.retention.minutes" in props:
        ms = int(typed["log.retention.minutes"]) * 60_000
    else:
        ms = int(typed["log.retention.hours"]) * 3_600_000
    return -1 if ms < 0 else ms


def _roll_ms(props: Mapping[str, str], typed: Mapping[str, Any]) -> int:
    if "log.roll.ms" in props:
        return int(typed["log.roll.ms"])
    return int(typed["log.roll.hours"]) * 3_600_000


def _client_listeners(
    typed: Mapping[str, Any],
) -> tuple[tuple[Listener, ...], tuple[Listener, ...] | None, dict[str, str]]:
    """The listeners kbroker serves and their security protocols: KRaft controller
    listeners are dropped (a single kbroker node has no controller quorum), every other
    one must be in `listener.security.protocol.map`."""
    listeners = parse_listeners("listeners", typed["listeners"])
    if not listeners:
        raise ConfigError("listeners must name at least one listener")
    advertised_items = typed["advertised.listeners"]
    advertised = (None if advertised_items is None
                  else parse_listeners("advertised.listeners", advertised_items))
    key = "listener.security.protocol.map"
    protocols: dict[str, str] = {}
    for item in _items(typed[key]):
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(f"invalid value {item!r} for {key}: expected NAME:PROTOCOL")
        protocols[name.strip().upper()] = proto.strip().upper()
    controllers = {n.upper() for n in _items(typed["controller.listener.names"])}
    served = tuple(x for x in listeners if x.name not in controllers)
    if not served:
        raise ConfigError("listeners must name at least one listener for clients")
    for lst in served:
        if lst.name not in protocols:
            raise ConfigError(f"listeners: {lst.name} is not in {key}")
        if protocols[lst.name] not in PROTOCOL_IDS:
            raise ConfigError(f"invalid value for {key}: {lst.name} maps to "
                              f"{protocols[lst.name]}, not one of {', '.join(PROTOCOL_IDS)}")
    if advertised:
        advertised = tuple(a for a in advertised if a.name not in controllers)
        names = {x.name for x in served}
        for adv in advertised:
            if adv.name not in names:
                raise ConfigError(f"advertised.listeners names {adv.name}, which is not in listeners")
    return served, advertised, protocols


def _check_inter_broker(props: Mapping[str, str], typed: Mapping[str, Any],
                        values: Mapping[str, Any]) -> InterBrokerLogin | None:
    """Kafka's checks of the inter-broker listener. Set explicitly on a single broker, it
    must be one of the listeners (with its SASL mechanism enabled there); in cluster
    mode it must be, and be PLAINTEXT or SASL_PLAINTEXT: the brokers' own client speaks
    no TLS (SSL and SASL_SSL are refused). Cluster mode over SASL: what this broker logs
    in with (the listener's JAAS username and password for the mechanism)."""
    name = typed["inter.broker.listener.name"]
    if name is not None and "security.inter.broker.protocol" in props:
        raise ConfigError("Only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol should be set.")
    explicit = name is not None or "security.inter.broker.protocol" in props
    clustered = typed["zookeeper.connect"] is not None
    if not explicit and not clustered:
        return None
    key = "inter.broker.listener.name" if name is not None else "security.inter.broker.protocol"
    name = (name or typed["security.inter.broker.protocol"]).upper()
    security = values["listener_security"].get(name)
    if security is None:
        if clustered and not explicit:
            return None  # the first listener, as before (zk_broker)
        raise ConfigError(f"{key}: {name} must be a listener name defined in listeners")
    if clustered and security.tls:
        raise ConfigError(f"{key}: the inter-broker listener {name} is {security.protocol}; "
                          "kbroker brokers talk to each other over PLAINTEXT or SASL_PLAINTEXT "
                          "only (their client has no TLS)")
    mech = typed["sasl.mechanism.inter.broker.protocol"]
    if security.sasl and mech not in security.sasl_mechanisms:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mech} must be included in "
                          f"sasl.enabled.mechanisms of the inter-broker listener {name}")
    if clustered and security.sasl:
        if mech == "OAUTHBEARER":
            raise ConfigError("sasl.mechanism.inter.broker.protocol: kbroker's brokers log in to "
                              "each other with PLAIN or SCRAM; OAUTHBEARER (a token the broker "
                              "would fetch for itself) is not implemented between brokers")
        return inter_broker_login(name, mech, props)
    return None


def _check_inter_broker_principal(typed: Mapping[str, Any], values: Mapping[str, Any]) -> None:
    """Cluster mode with ACLs on: brokers reach each other on the inter-broker listener,
    as User:ANONYMOUS on a PLAINTEXT one or as their JAAS username on a SASL one, and their
    LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown, AlterPartition,
    WriteTxnMarkers and follower Fetches need CLUSTER_ACTION on the cluster (Kafka's
    checks). super.users holding that principal grants it, as does an ACL; without either
    (and allow.everyone.if.no.acl.found off) replication stops until such an ACL exists:
    said at startup, as a warning."""
    if typed["zookeeper.connect"] is None or not typed["authorizer.class.name"]:
        return
    login = values["inter_broker_login"]
    principal = login.principal if login is not None else "User:ANONYMOUS"
    supers = {s.strip() for s in (typed["super.users"] or "").split(";")}
    if principal not in supers and not typed["allow.everyone.if.no.acl.found"]:
        log.warning("authorizer.class.name is set in cluster mode and super.users does not "
                    "name %s, the principal of brokers on the inter-broker listener: their "
                    "requests to each other need an ACL allowing CLUSTER_ACTION on the "
                    "cluster to %s", principal, principal)


CONSUMER_ASSIGNORS = {
    "uniform": "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "range": "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _check_bounded(values: dict[str, Any], kind: str, whats: tuple[str, ...]) -> None:
    """group.<kind>.<what> between group.<kind>.min.<what> and group.<kind>.max.<what>."""
    for what in whats:
        lo, hi = values[f"group_{kind}_min_{what}"], values[f"group_{kind}_max_{what}"]
        value = values[f"group_{kind}_{what}"]
        dotted = what.replace("_", ".")
        if lo > hi:
            raise ConfigError(f"group.{kind}.min.{dotted} must be at most group.{kind}.max.{dotted}")
        if not lo <= value <= hi:
            raise ConfigError(f"group.{kind}.{dotted} must be between group.{kind}.min.{dotted} "
                              f"({lo}) and group.{kind}.max.{dotted} ({hi})")
    if values[f"group_{kind}_heartbeat_interval_ms"] >= values[f"group_{kind}_session_timeout_ms"]:
        raise ConfigError(f"group.{kind}.heartbeat.interval.ms must be less than "
                          f"group.{kind}.session.timeout.ms")


def _check_consumer_group_keys(values: dict[str, Any]) -> None:
    """Kafka's GroupCoordinatorConfig checks of the KIP-848 and the share group keys;
    assignor class names become their short names."""
    _check_bounded(values, "consumer", ("session_timeout_ms", "heartbeat_interval_ms"))
    _check_bounded(values, "share", ("session_timeout_ms", "heartbeat_interval_ms",
                                     "record_lock_duration_ms"))
    names = []
    for name in values["group_consumer_assignors"]:
        if name not in CONSUMER_ASSIGNORS:
            raise ConfigError(f"group.consumer.assignors: unknown assignor {name!r} "
                              f"(known: {', '.join(sorted(CONSUMER_ASSIGNORS))})")
        names.append(CONSUMER_ASSIGNORS[name])
    if not names:
        raise ConfigError("group.consumer.assignors must name at least one assignor")
    values["group_consumer_assignors"] = tuple(names)


def _items(value: str | None) -> Iterable[str]:
    return (p.strip() for p in (value or "").split(",") if p.strip())


def broker_config(config: BrokerConfig | Mapping[str, str] | None) -> BrokerConfig:
    """Accept what Broker accepts: a BrokerConfig, a dict of Kafka keys, or None."""
    if isinstance(config, BrokerConfig):
        return config
    return BrokerConfig.from_props(config or {})


def per_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides (`host:count,...`, hosts as names or IP addresses,
    IPv6 ones in brackets or bare) as host -> count; ConfigError when malformed."""
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        try:
            n = int(count)
        except ValueError:
            n = -1
        if not sep or not host or n < 0:
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not <host>:<count>")
        out[host] = n
    return out
