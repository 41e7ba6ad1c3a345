"""LogConfig: the topic-level configs, under Kafka's own key names, typed and frozen.

The keys, their types, defaults and validators are kbroker.common.configs's
TOPIC_CONFIGS; this module holds a topic's values. `LogConfig.from_props({"retention.ms":
"1000"})` parses strings as Kafka's server.properties / CreateTopics / AlterConfigs
would send them; an unknown key or an ill-typed value is a ConfigError (a ValueError)
naming the key. `entries()` lists every key with its value, its default and whether it
was set explicitly (DescribeConfigs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kbroker.common.config_def import LONG_MAX, ConfigError, ConfigKey
from kbroker.common.configs import TOPIC_CONFIGS

_BY_ATTR: dict[str, ConfigKey] = {k.attr: k for k in TOPIC_CONFIGS}


class ConfigEntry(NamedTuple):
    """One row of DescribeConfigs: value and default rendered as Kafka renders them."""

    name: str
    value: str
    default: str
    is_default: bool


def _default(name: str) -> Any:
    return TOPIC_CONFIGS[name].default


@dataclass(frozen=True)
class LogConfig:
    """Topic configuration, one field per key of TOPIC_CONFIGS (named as the key, dots as
    underscores), defaulting to the table's defaults. Frozen: change with with_overrides."""

    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    delete_retention_ms: int = _default("delete.retention.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = _default(
        "follower.replication.throttled.replicas")
    index_interval_bytes: int = _default("index.interval.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = _default(
        "leader.replication.throttled.replicas")
    local_retention_bytes: int = _default("local.retention.bytes")
    local_retention_ms: int = _default("local.retention.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    message_format_version: str = _default("message.format.version")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    message_timestamp_type: str = _default("message.timestamp.type")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    min_insync_replicas: int = _default("min.insync.replicas")
    preallocate: bool = _default("preallocate")
    remote_storage_enable: bool = _default("remote.storage.enable")
    retention_bytes: int = _default("retention.bytes")
    retention_ms: int = _default("retention.ms")
    segment_bytes: int = _default("segment.bytes")
    segment_index_bytes: int = _default("segment.index.bytes")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_ms: int = _default("segment.ms")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    # Kafka key names set explicitly (topic overrides), for DescribeConfigs.
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """A config from Kafka keys -> values (strings or typed); ConfigError names a bad key."""
        return (base or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, Any] | None = None, **attrs: Any) -> LogConfig:
        """A copy with some keys changed: Kafka key names in props, or field names as kwargs."""
        changes: dict[str, Any] = {}
        names = set(self.overridden)
        for name, raw in (props or {}).items():
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            changes[key.attr] = key.parse(raw)
            names.add(name)
        for attr, raw in attrs.items():
            key = _BY_ATTR.get(attr)
            if key is None:
                raise ConfigError(f"unknown topic config field {attr}")
            changes[attr] = key.parse(raw)
            names.add(key.name)
        return dataclasses.replace(self, overridden=frozenset(names), **changes)

    def get(self, name: str) -> Any:
        return getattr(self, TOPIC_CONFIGS[name].attr)

    def entries(self) -> list[ConfigEntry]:
        """Every topic config key with its value, its default and whether it is the default."""
        return [
            ConfigEntry(
                k.name,
                k.render(getattr(self, k.attr)) or "",
                k.default_string or "",
                k.name not in self.overridden,
            )
            for k in TOPIC_CONFIGS
        ]

    def to_props(self, only_overrides: bool = False) -> dict[str, str]:
        return {e.name: e.value for e in self.entries() if not (only_overrides and e.is_default)}

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_size(self) -> int:
        return self.segment_index_bytes

    @property
    def timestamp_before_max_ms(self) -> int:
        """The bound on a CreateTime timestamp in the past: message.timestamp.before.max.ms,
        or while that is at its default the deprecated message.timestamp.difference.max.ms
        (Kafka 3.9's LogConfig)."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """The bound on a CreateTime timestamp in the future, as timestamp_before_max_ms."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms
