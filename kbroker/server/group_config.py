"""A group's configs (Kafka's GroupConfig and GroupConfigManager): the overrides a
GROUP resource holds (metadata/group_configs.py), checked, and read with what they sit
on. A key a group does not override takes its broker synonym's value
(`group.share.record.lock.duration.ms` for `share.record.lock.duration.ms`), else its
default; `share.record.lock.duration.ms` must lie within the broker's
`group.share.min/max.record.lock.duration.ms` (Kafka's GroupConfig.validate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kbroker.common.config_def import ConfigError
from kbroker.common.configs import GROUP_CONFIGS
from kbroker.common.error_code import ErrorCode
from kbroker.config import BrokerConfig
from kbroker.server.config_describe import ConfigDescription, ConfigSource, Synonym
from kbroker.server.topic_admin import AdminError


def inherited(broker: BrokerConfig, name: str) -> str | None:
    """The value of a key the group does not override."""
    key = GROUP_CONFIGS[name]
    for synonym in key.synonyms:
        return str(getattr(broker, synonym.replace(".", "_")))
    return key.default_string


def effective(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every group key's typed value."""
    return {key.name: key.parse(overrides[key.name] if key.name in overrides else inherited(broker, key.name))
            for key in GROUP_CONFIGS}


def check(broker: BrokerConfig, overrides: Mapping[str, str]) -> None:
    """INVALID_CONFIG for an unknown key, a bad value or a lock duration out of bounds."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise AdminError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    try:
        values = effective(broker, overrides)
    except ConfigError as e:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(e)) from None
    lock = values["share.record.lock.duration.ms"]
    lo, hi = broker.group_share_min_record_lock_duration_ms, broker.group_share_max_record_lock_duration_ms
    if not lo <= lock <= hi:
        raise AdminError(ErrorCode.INVALID_CONFIG, f"share.record.lock.duration.ms must be between "
                         f"group.share.min.record.lock.duration.ms ({lo}) and "
                         f"group.share.max.record.lock.duration.ms ({hi})")


def describe(broker: BrokerConfig, overrides: Mapping[str, str], keys: Iterable[str] | None,
             include_documentation: bool) -> list[ConfigDescription]:
    wanted = None if keys is None else set(keys)
    out = []
    for key in GROUP_CONFIGS:
        if wanted is not None and key.name not in wanted:
            continue
        synonyms: list[Synonym] = []
        if key.name in overrides:
            synonyms.append(Synonym(key.name, overrides[key.name], ConfigSource.DYNAMIC_GROUP_CONFIG))
        synonyms += [Synonym(b, inherited(broker, key.name), ConfigSource.STATIC_BROKER_CONFIG
                             if b in broker.props else ConfigSource.DEFAULT_CONFIG) for b in key.synonyms]
        value = synonyms[0].value if synonyms else key.default_string
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigDescription(key.name, value, source, tuple(synonyms), key.type, False,
                                     key.doc if include_documentation else None))
    return out
