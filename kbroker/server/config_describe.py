"""Config entries as DescribeConfigs (and CreateTopics v5+) report them.

A topic config's value is the effective one (override, else the broker's
default for it, else Kafka's); its source and synonyms follow Kafka 3.9's
`ConfigHelper.createTopicConfigEntry`: the list of synonyms is the topic
override (TOPIC_CONFIG, alias DYNAMIC_TOPIC_CONFIG) when there is one, then each
broker synonym (`retention.ms` -> `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`) set in server.properties (STATIC_BROKER_CONFIG), then
each broker synonym that has a built-in default (DEFAULT_CONFIG); the entry's
source is the first synonym's, or DEFAULT_CONFIG when there is none.

A broker's configs (resource type BROKER, name = node.id) are every key of
kbroker's BrokerConfig: STATIC_BROKER_CONFIG when set, else DEFAULT_CONFIG.
kbroker has no dynamic broker configs, so all of them are read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kbroker import config as broker_config_module
from kbroker.config import DEFAULT_LOG_DIR, TOPIC_CONFIG_SYNONYMS, BrokerConfig
from kbroker.storage.log_config import KEYS, LogConfig, render


class ResourceType(IntEnum):
    """Config resource types (Kafka's ConfigResource.Type) that kbroker answers for."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's ConfigSource (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(IntEnum):
    """DescribeConfigsResponse's ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


KIND_TYPES = {
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
}


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigDescription:
    """One described config: what DescribeConfigsResourceResult carries."""

    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[Synonym, ...]
    config_type: ConfigType
    read_only: bool
    documentation: str | None
    is_sensitive: bool = False


# Broker keys that supply a topic config's default, most specific first, where
# Kafka has more than the one listed in kbroker.config.TOPIC_CONFIG_SYNONYMS.
_MULTI_SYNONYMS: dict[str, tuple[str, ...]] = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
}

# Built-in defaults of the broker keys that BrokerConfig combines.
_COMBINED_DEFAULTS: dict[str, str | None] = {
    "log.dirs": None,
    "log.dir": DEFAULT_LOG_DIR,
    "broker.id": None,
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.roll.ms": None,
    "log.roll.hours": "168",
}
_COMBINED_TYPES: dict[str, ConfigType] = {
    "log.dirs": ConfigType.STRING,
    "log.dir": ConfigType.STRING,
    "broker.id": ConfigType.INT,
    "log.retention.ms": ConfigType.LONG,
    "log.retention.minutes": ConfigType.INT,
    "log.retention.hours": ConfigType.INT,
    "log.roll.ms": ConfigType.LONG,
    "log.roll.hours": ConfigType.INT,
}

TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": "delete: drop old segments by time or size; compact: keep the latest "
    "record per key. A list: both may be given. kbroker does not compact yet: a compact "
    "topic keeps every record (compact,delete still applies retention).",
    "compression.type": "The codec batches are stored with; producer keeps the producer's codec.",
    "compression.gzip.level": "The gzip level used when compression.type is gzip.",
    "compression.lz4.level": "The lz4 level used when compression.type is lz4.",
    "compression.zstd.level": "The zstd level used when compression.type is zstd.",
    "delete.retention.ms": "How long delete tombstones stay readable on a compacted topic.",
    "file.delete.delay.ms": "How long a deleted segment's files stay on disk before removal.",
    "flush.messages": "fsync the log after this many records (default: leave it to the OS).",
    "flush.ms": "fsync the log when this much time has passed since the last flush.",
    "follower.replication.throttled.replicas": "Replicas throttled on the follower side.",
    "index.interval.bytes": "Bytes of records between two entries of the offset index.",
    "leader.replication.throttled.replicas": "Replicas throttled on the leader side.",
    "local.retention.bytes": "Local retention size with tiered storage (-2: retention.bytes).",
    "local.retention.ms": "Local retention time with tiered storage (-2: retention.ms).",
    "max.compaction.lag.ms": "The longest a record may stay uncompacted.",
    "max.message.bytes": "The largest record batch the broker accepts for this topic.",
    "message.downconversion.enable": "Whether old fetch versions get converted batches.",
    "message.format.version": "Ignored since Kafka 3.0: batches are always format v2.",
    "message.timestamp.after.max.ms": "How far a record's timestamp may lie in the future.",
    "message.timestamp.before.max.ms": "How far a record's timestamp may lie in the past.",
    "message.timestamp.difference.max.ms": "Deprecated: the largest allowed timestamp skew.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime "
    "stamps batches with the broker's time.",
    "min.cleanable.dirty.ratio": "The dirty share of a log that triggers compaction.",
    "min.compaction.lag.ms": "The shortest a record stays uncompacted.",
    "min.insync.replicas": "In-sync replicas an acks=all produce needs (a single broker has one: "
    "above 1, acks=all gets NOT_ENOUGH_REPLICAS, as Kafka answers).",
    "preallocate": "Preallocate segment files on disk when rolling (not implemented by kbroker: only false is accepted).",
    "remote.storage.enable": "Tiered storage for this topic (not supported by kbroker).",
    "retention.bytes": "Delete old segments while the partition is larger than this (-1: no limit).",
    "retention.ms": "Delete segments whose records are older than this (-1: keep forever).",
    "segment.bytes": "Roll a new segment file when the active one reaches this size.",
    "segment.index.bytes": "The size of each segment's offset and time index files.",
    "segment.jitter.ms": "The maximum random jitter subtracted from segment.ms when a segment is created, drawn per segment.",
    "segment.ms": "Roll a new segment after this long even when it is not full.",
    "unclean.leader.election.enable": "Whether an out-of-sync replica may become leader.",
}


def topic_synonym_keys(name: str) -> tuple[str, ...]:
    if name in _MULTI_SYNONYMS:
        return _MULTI_SYNONYMS[name]
    broker_key = TOPIC_CONFIG_SYNONYMS.get(name)
    return (broker_key,) if broker_key else ()


def describe_topic(
    overrides: Mapping[str, str],
    log_config: LogConfig,
    broker: BrokerConfig,
    keys: Iterable[str] | None = None,
    include_documentation: bool = False,
) -> list[ConfigDescription]:
    """Every topic config (or those in `keys`) of a topic with these overrides."""
    wanted = None if keys is None else set(keys)
    static = broker.props
    defaults = broker_defaults()
    out = []
    for key in KEYS:
        if wanted is not None and key.name not in wanted:
            continue
        value = render(key.kind, log_config.get(key.name))
        synonyms: list[Synonym] = []
        if key.name in overrides:
            synonyms.append(Synonym(key.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_keys = topic_synonym_keys(key.name)
        synonyms += [
            Synonym(b, static[b], ConfigSource.STATIC_BROKER_CONFIG) for b in broker_keys if b in static
        ]
        synonyms += [
            Synonym(b, defaults[b], ConfigSource.DEFAULT_CONFIG)
            for b in broker_keys
            if defaults.get(b) is not None
        ]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        doc = (key.doc or TOPIC_DOCS.get(key.name, "")) if include_documentation else None
        out.append(
            ConfigDescription(
                key.name, value, source, tuple(synonyms), KIND_TYPES[key.kind], False, doc
            )
        )
    return out


def describe_broker(
    broker: BrokerConfig, keys: Iterable[str] | None = None, include_documentation: bool = False
) -> list[ConfigDescription]:
    """Every broker config key (or those in `keys`) with its value and source."""
    wanted = None if keys is None else set(keys)
    static = broker.props
    defaults = broker_defaults()
    types = broker_types()
    out = []
    for name in sorted(defaults):
        if wanted is not None and name not in wanted:
            continue
        synonyms: list[Synonym] = []
        if name in static:
            synonyms.append(Synonym(name, static[name], ConfigSource.STATIC_BROKER_CONFIG))
        if defaults[name] is not None:
            synonyms.append(Synonym(name, defaults[name], ConfigSource.DEFAULT_CONFIG))
        value = synonyms[0].value if synonyms else _effective(broker, name)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        doc = "" if include_documentation else None
        out.append(ConfigDescription(name, value, source, tuple(synonyms), types[name], True, doc))
    return out


def broker_defaults() -> dict[str, str | None]:
    """Broker key -> its built-in default string (None: no default)."""
    out: dict[str, str | None] = {k.key: k.default for k in _broker_keys()}
    out.update(_COMBINED_DEFAULTS)
    return out


def broker_types() -> dict[str, ConfigType]:
    out = {k.key: _type_of_converter(k.convert) for k in _broker_keys()}
    out.update(_COMBINED_TYPES)
    return out


def _broker_keys() -> tuple[Any, ...]:
    # kbroker.config's key table (name, attr, default, converter).
    return broker_config_module._KEYS


def _type_of_converter(convert: Any) -> ConfigType:
    qualname = getattr(convert, "__qualname__", "")
    if qualname.startswith("_int."):
        return ConfigType.INT
    if qualname.startswith("_long."):
        return ConfigType.LONG
    if qualname.startswith("_to_bool"):
        return ConfigType.BOOLEAN
    if qualname.startswith("parse_listeners"):
        return ConfigType.LIST
    return ConfigType.STRING


def _effective(broker: BrokerConfig, name: str) -> str | None:
    """The value BrokerConfig derived for a key that was neither set nor defaulted."""
    if name == "log.dirs":
        return ",".join(broker.log_dirs)
    if name in ("node.id", "broker.id"):
        return str(broker.node_id)
    if name == "log.retention.ms":
        return str(broker.log_retention_ms)
    if name == "log.roll.ms":
        return str(broker.log_roll_ms)
    return None
