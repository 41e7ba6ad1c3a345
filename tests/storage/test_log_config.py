"""LogConfig: Kafka's keys, defaults, typed parsing, overrides, DescribeConfigs rows."""

from __future__ import annotations

import pytest

from kbroker.common.config_def import LONG_MAX
from kbroker.common.configs import TOPIC_CONFIGS
from kbroker.storage.log_config import LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.cleanup_policy == ("delete",)
    assert c.compression_type == "producer"
    assert c.file_delete_delay_ms == 60000
    assert c.min_insync_replicas == 1


def test_every_key_has_a_field_with_its_default() -> None:
    c = LogConfig()
    for k in TOPIC_CONFIGS:
        assert getattr(c, k.attr) == k.default, k.name


def test_from_props_parses_and_records_overrides() -> None:
    c = LogConfig.from_props({"retention.ms": "1000", "cleanup.policy": "compact,delete",
                              "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25"})
    assert c.retention_ms == 1000 and c.compact and c.delete and c.message_timestamp_type == "LogAppendTime"
    assert c.min_cleanable_dirty_ratio == 0.25
    rows = {e.name: e for e in c.entries()}
    assert len(rows) == len(TOPIC_CONFIGS)
    assert rows["retention.ms"].value == "1000" and not rows["retention.ms"].is_default
    assert rows["retention.ms"].default == "604800000"
    assert rows["segment.bytes"].is_default and rows["segment.bytes"].value == "1073741824"
    assert rows["cleanup.policy"].value == "compact,delete"
    assert rows["message.timestamp.type"].value == "LogAppendTime"


@pytest.mark.parametrize("key,value", [
    ("retention.ms", "soon"), ("segment.bytes", "1.5"), ("preallocate", "yes"), ("preallocate", "true"),
    ("message.timestamp.type", "WallTime"), ("cleanup.policy", "shred"),
    ("segment.bytes", "3000000000"), ("min.insync.replicas", "0"), ("compression.type", "brotli"),
    ("no.such.key", "1"),
])
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_props({key: value})


def test_with_overrides_keeps_earlier_ones() -> None:
    c = LogConfig.from_props({"retention.ms": "5"}).with_overrides({"segment.bytes": "1024"})
    assert c.overridden == {"retention.ms", "segment.bytes"}
    assert c.with_overrides(retention_bytes=10).retention_bytes == 10
    assert c.to_props(only_overrides=True) == {"retention.ms": "5", "segment.bytes": "1024"}
    base = LogConfig.from_props({"retention.ms": "7"})
    assert LogConfig.from_props({}, base=base).retention_ms == 7


def test_timestamp_difference_bounds_what_before_and_after_leave_at_their_default() -> None:
    c = LogConfig.from_props({"message.timestamp.difference.max.ms": "1000"})
    assert (c.timestamp_before_max_ms, c.timestamp_after_max_ms) == (1000, 1000)
    c = c.with_overrides({"message.timestamp.after.max.ms": "5"})
    assert (c.timestamp_before_max_ms, c.timestamp_after_max_ms) == (1000, 5)
    assert LogConfig().timestamp_before_max_ms == LONG_MAX


@pytest.mark.parametrize("key,value", [
    ("remote.storage.enable", "true"), ("compression.gzip.level", "0"),
    ("leader.replication.throttled.replicas", "0-1"), ("retention.ms", "-2"),
])
def test_values_kbroker_cannot_honour_or_kafka_refuses_are_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_props({key: value})
