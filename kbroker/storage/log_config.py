"""LogConfig: the topic-level configs, under Kafka's own key names, typed and frozen.

`LogConfig.from_props({"retention.ms": "1000"})` parses strings as Kafka's
server.properties / CreateTopics / AlterConfigs would send them; an unknown key or
an ill-typed value is a ValueError naming the key. `entries()` lists every key with
its value, its default and whether it was set explicitly (DescribeConfigs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CLEANUP_POLICIES = ("delete", "compact")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class ConfigKey(NamedTuple):
    name: str  # Kafka's key
    attr: str  # LogConfig field
    kind: str  # "long" | "int" | "string" | "boolean" | "double" | "list"
    default: Any
    check: Callable[[Any], bool] | None = None
    doc: str = ""


def _at_least(n: int | float) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _one_of(*choices: str) -> Callable[[Any], bool]:
    return lambda v: v in choices


def _all_in(choices: Iterable[str]) -> Callable[[Any], bool]:
    allowed = set(choices)
    return lambda v: bool(v) and all(x in allowed for x in v)


KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("cleanup.policy", "cleanup_policy", "list", ("delete",), _all_in(CLEANUP_POLICIES)),
    ConfigKey("compression.type", "compression_type", "string", "producer", _one_of(*COMPRESSION_TYPES)),
    ConfigKey("compression.gzip.level", "compression_gzip_level", "int", -1),
    ConfigKey("compression.lz4.level", "compression_lz4_level", "int", 9),
    ConfigKey("compression.zstd.level", "compression_zstd_level", "int", 3),
    ConfigKey("delete.retention.ms", "delete_retention_ms", "long", 86400000, _at_least(0)),
    ConfigKey("file.delete.delay.ms", "file_delete_delay_ms", "long", 60000, _at_least(0)),
    ConfigKey("flush.messages", "flush_messages", "long", LONG_MAX, _at_least(1)),
    ConfigKey("flush.ms", "flush_ms", "long", LONG_MAX, _at_least(0)),
    ConfigKey("follower.replication.throttled.replicas", "follower_replication_throttled_replicas", "list", ()),
    ConfigKey("index.interval.bytes", "index_interval_bytes", "int", 4096, _at_least(0)),
    ConfigKey("leader.replication.throttled.replicas", "leader_replication_throttled_replicas", "list", ()),
    ConfigKey("local.retention.bytes", "local_retention_bytes", "long", -2, _at_least(-2)),
    ConfigKey("local.retention.ms", "local_retention_ms", "long", -2, _at_least(-2)),
    ConfigKey("max.compaction.lag.ms", "max_compaction_lag_ms", "long", LONG_MAX, _at_least(1)),
    ConfigKey("max.message.bytes", "max_message_bytes", "int", 1048588, _at_least(0)),
    ConfigKey("message.downconversion.enable", "message_downconversion_enable", "boolean", True),
    ConfigKey("message.format.version", "message_format_version", "string", "3.0-IV1"),
    ConfigKey("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long", LONG_MAX, _at_least(0)),
    ConfigKey("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long", LONG_MAX, _at_least(0)),
    ConfigKey("message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", "long", LONG_MAX, _at_least(0)),
    ConfigKey("message.timestamp.type", "message_timestamp_type", "string", "CreateTime", _one_of(*TIMESTAMP_TYPES)),
    ConfigKey("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0.5, lambda v: 0.0 <= v <= 1.0),
    ConfigKey("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0, _at_least(0)),
    ConfigKey("min.insync.replicas", "min_insync_replicas", "int", 1, _at_least(1)),
    # Not implemented: only Kafka's default (false) is accepted, never silently ignored.
    ConfigKey("preallocate", "preallocate", "boolean", False, lambda v: v is False),
    ConfigKey("remote.storage.enable", "remote_storage_enable", "boolean", False),
    ConfigKey("retention.bytes", "retention_bytes", "long", -1),
    ConfigKey("retention.ms", "retention_ms", "long", 604800000, _at_least(-1)),
    ConfigKey("segment.bytes", "segment_bytes", "int", 1073741824, _at_least(14)),
    ConfigKey("segment.index.bytes", "segment_index_bytes", "int", 10485760, _at_least(12)),
    ConfigKey("segment.jitter.ms", "segment_jitter_ms", "long", 0, _at_least(0)),
    ConfigKey("segment.ms", "segment_ms", "long", 604800000, _at_least(1)),
    ConfigKey("unclean.leader.election.enable", "unclean_leader_election_enable", "boolean", False),
)
KEYS_BY_NAME = {k.name: k for k in KEYS}
KEYS_BY_ATTR = {k.attr: k for k in KEYS}


class ConfigEntry(NamedTuple):
    """One row of DescribeConfigs: value and default rendered as Kafka renders them."""

    name: str
    value: str
    default: str
    is_default: bool


def render(kind: str, value: Any) -> str:
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(value)
    return str(value)


def parse(key: ConfigKey, raw: Any) -> Any:
    """Parse one value (a string as on the wire, or an already-typed value)."""
    try:
        if key.kind in ("long", "int"):
            if isinstance(raw, bool) or not isinstance(raw, int | str):
                raise TypeError
            value: Any = int(str(raw).strip())
            limit = LONG_MAX if key.kind == "long" else INT_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
        elif key.kind == "double":
            value = float(raw)
        elif key.kind == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError
        elif key.kind == "list":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            value = tuple(s.strip() for s in items if s.strip())
        else:
            if not isinstance(raw, str):
                raise TypeError
            value = raw.strip()
    except (TypeError, ValueError):
        raise ValueError(f"invalid value {raw!r} for config {key.name} (expected {key.kind})") from None
    if key.check is not None and not key.check(value):
        raise ValueError(f"invalid value {raw!r} for config {key.name}")
    return value


@dataclass(frozen=True)
class LogConfig:
    """Topic configuration; defaults are Kafka 3.9's. Frozen: change with with_overrides."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604800000
    segment_bytes: int = 1073741824
    segment_index_bytes: int = 10485760
    segment_jitter_ms: int = 0
    segment_ms: int = 604800000
    unclean_leader_election_enable: bool = False
    # Kafka key names set explicitly (topic overrides), for DescribeConfigs.
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """A config from Kafka keys -> values (strings or typed); ValueError names a bad key."""
        return (base or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, Any] | None = None, **attrs: Any) -> LogConfig:
        """A copy with some keys changed: Kafka key names in props, or field names as kwargs."""
        changes: dict[str, Any] = {}
        names = set(self.overridden)
        for name, raw in (props or {}).items():
            key = KEYS_BY_NAME.get(name)
            if key is None:
                raise ValueError(f"unknown topic config {name}")
            changes[key.attr] = parse(key, raw)
            names.add(name)
        for attr, raw in attrs.items():
            key = KEYS_BY_ATTR.get(attr)
            if key is None:
                raise ValueError(f"unknown topic config field {attr}")
            changes[attr] = parse(key, raw)
            names.add(key.name)
        return dataclasses.replace(self, overridden=frozenset(names), **changes)

    def get(self, name: str) -> Any:
        return getattr(self, KEYS_BY_NAME[name].attr)

    def entries(self) -> list[ConfigEntry]:
        """Every topic config key with its value, its default and whether it is the default."""
        return [
            ConfigEntry(
                k.name,
                render(k.kind, getattr(self, k.attr)),
                render(k.kind, k.default),
                k.name not in self.overridden,
            )
            for k in KEYS
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
