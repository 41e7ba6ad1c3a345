"""CoordinatorConfig: the group coordinator's keys, as Kafka's GroupCoordinatorConfig
gathers them (the classic protocol's, the offsets', and the KIP-848 consumer groups' in
`consumer`), read from the broker's configuration once at start.

Lock: none (immutable).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbroker.coordinator.consumer_group_coordinator import ConsumerGroupConfig


@dataclass(frozen=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)

    @classmethod
    def from_broker_config(cls, c: Any) -> CoordinatorConfig:
        consumer = ConsumerGroupConfig(c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms,
                                       c.group_consumer_max_size, tuple(c.group_consumer_assignors),
                                       c.group_consumer_migration_policy)
        return cls(c.group_min_session_timeout_ms, c.group_max_session_timeout_ms,
                   c.group_initial_rebalance_delay_ms, c.group_max_size,
                   c.offsets_retention_minutes * 60_000, c.offset_metadata_max_bytes, consumer)
