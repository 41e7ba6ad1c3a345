"""Config entries as DescribeConfigs (and CreateTopics v5+) report them, read from the
one table of keys (kbroker.common.configs): names, types, defaults, documentation
and a topic key's broker synonyms.

A topic config's value is the effective one (override, else the broker's
default for it, else Kafka's); its source and synonyms follow Kafka 3.9's
`ConfigHelper.createTopicConfigEntry`: the list of synonyms is the topic
override (TOPIC_CONFIG, alias DYNAMIC_TOPIC_CONFIG) when there is one, then each
broker synonym (`retention.ms` -> `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`) set in server.properties (STATIC_BROKER_CONFIG), then
each broker synonym that has a built-in default (DEFAULT_CONFIG); the entry's
source is the first synonym's, or DEFAULT_CONFIG when there is none.

A broker's configs (resource type BROKER, name = node.id) are every key of
BROKER_CONFIGS, from the strongest layer that sets it: DYNAMIC_BROKER_CONFIG (this
broker's dynamic configs), DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide default),
STATIC_BROKER_CONFIG (server.properties), else DEFAULT_CONFIG. Only the keys kbroker
changes while running (`live_keys`) are writable; the rest are read-only whatever
Kafka's update mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kbroker.common.config_def import Type
from kbroker.common.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from kbroker.config import BrokerConfig
from kbroker.storage.log_config import LogConfig


class ResourceType(IntEnum):
    """Config resource types (Kafka's ConfigResource.Type) that kbroker answers for."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's ConfigSource (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


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
    config_type: Type  # numbered as DescribeConfigsResponse's ConfigType
    read_only: bool
    documentation: str | None
    is_sensitive: bool = False


# A broker's config layers, strongest first: (source, values). A single broker has one
# (its server.properties); a cluster broker has its dynamic configs from ZooKeeper above.
Layers = Sequence[tuple["ConfigSource", Mapping[str, str]]]


def describe_topic(
    overrides: Mapping[str, str],
    log_config: LogConfig,
    broker: BrokerConfig,
    keys: Iterable[str] | None = None,
    include_documentation: bool = False,
    layers: Layers | None = None,
) -> list[ConfigDescription]:
    """Every topic config (or those in `keys`) of a topic with these overrides."""
    wanted = None if keys is None else set(keys)
    layers = layers or [(ConfigSource.STATIC_BROKER_CONFIG, broker.props)]
    out = []
    for key in TOPIC_CONFIGS:
        if wanted is not None and key.name not in wanted:
            continue
        value = key.render(log_config.get(key.name))
        synonyms: list[Synonym] = []
        if key.name in overrides:
            synonyms.append(Synonym(key.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        synonyms += [
            Synonym(b, values[b], source) for source, values in layers for b in key.synonyms
            if b in values
        ]
        synonyms += [
            Synonym(b, BROKER_CONFIGS[b].default_string, ConfigSource.DEFAULT_CONFIG)
            for b in key.synonyms
            if BROKER_CONFIGS[b].default is not None
        ]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        doc = key.doc if include_documentation else None
        out.append(
            ConfigDescription(key.name, value, source, tuple(synonyms), key.type, False, doc)
        )
    return out


def describe_broker(
    broker: BrokerConfig, keys: Iterable[str] | None = None, include_documentation: bool = False,
    layers: Layers | None = None, live_keys: frozenset[str] = frozenset(),
) -> list[ConfigDescription]:
    """Every broker config key (or those in `keys`) with its value and source; read-only
    unless it is one of `live_keys` (what a cluster changes while running)."""
    wanted = None if keys is None else set(keys)
    layers = layers or [(ConfigSource.STATIC_BROKER_CONFIG, broker.props)]
    out = []
    for key in sorted(BROKER_CONFIGS, key=lambda k: k.name):
        if wanted is not None and key.name not in wanted:
            continue
        synonyms: list[Synonym] = [
            Synonym(key.name, values[key.name], source) for source, values in layers
            if key.name in values]
        if key.default is not None:
            synonyms.append(Synonym(key.name, key.default_string, ConfigSource.DEFAULT_CONFIG))
        value = synonyms[0].value if synonyms else _effective(broker, key.name)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        doc = key.doc if include_documentation else None
        sensitive = key.type == Type.PASSWORD  # Kafka describes passwords as null, sensitive
        if sensitive:
            value = None
            synonyms = [Synonym(s.name, None, s.source) for s in synonyms]
        out.append(ConfigDescription(key.name, value, source, tuple(synonyms), key.type,
                                     key.name not in live_keys, doc, sensitive))
    return out


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
