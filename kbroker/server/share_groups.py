"""ShareGroups: the parts of KIP-932 share groups a broker runs, built together by the
wiring and handed to the request handlers as one service.

- `coordinator` (coordinator/share_group.py): membership and assignment by
  ShareGroupHeartbeat;
- `sessions` (server/share_session_cache.py): the share sessions of ShareFetch and
  ShareAcknowledge;
- `partitions` (server/share_partition_manager.py): the share partitions, their
  acquisitions, locks and acknowledgements;
- `state` (coordinator/share_coordinator.py): their persisted state in
  `__share_group_state`.

A member leaving or fenced releases what it holds; so does its share session closing
or being replaced. Timers (session timeouts, acquisition locks) run on one Timers,
attached to the broker's loop at startup.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kbroker.coordinator.internal_topic import CoordinatorBroker
from kbroker.coordinator.share_coordinator import ShareCoordinator, ShareStateTopic
from kbroker.coordinator.share_group import ShareGroupConfig, ShareGroupCoordinator
from kbroker.coordinator.share_partition import SharePartitionConfig
from kbroker.coordinator.timers import Timers
from kbroker.server.share_partition_manager import SharePartitionManager
from kbroker.server.share_session_cache import ShareSession, ShareSessionCache

if TYPE_CHECKING:
    from kbroker.config import BrokerConfig


def group_config(c: BrokerConfig) -> ShareGroupConfig:
    return ShareGroupConfig(c.group_share_session_timeout_ms, c.group_share_heartbeat_interval_ms,
                            c.group_share_max_size)


def partition_config(c: BrokerConfig) -> SharePartitionConfig:
    return SharePartitionConfig(c.group_share_record_lock_duration_ms, c.group_share_delivery_count_limit,
                                c.group_share_partition_max_record_locks)


class ShareGroups:
    def __init__(self, broker: CoordinatorBroker, other_group_active: Callable[[str], bool],
                 auto_offset_reset: Callable[[str], str] = lambda group_id: "latest") -> None:
        config = broker.config
        self.timers = Timers(broker.time)
        self.coordinator = ShareGroupCoordinator(group_config(config), self.timers, other_group_active)
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self.state = ShareCoordinator(ShareStateTopic(broker))
        self.partitions = SharePartitionManager(
            broker.replica_manager, broker.topics, self.timers, lambda: partition_config(broker.config),
            self.state, auto_offset_reset)
        self.coordinator.add_member_removed_listener(self._member_removed)

    def _member_removed(self, group_id: str, member_id: str) -> None:
        self.sessions.close(group_id, member_id)
        self.partitions.release_member(group_id, member_id)

    def session_closed(self, session: ShareSession | None) -> None:
        if session is not None:
            self.partitions.release_member(session.group_id, session.member_id, list(session.partitions))

    def startup(self) -> None:
        try:
            self.timers.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        self.state.load()

    def shutdown(self) -> None:
        self.timers.close()
        self.coordinator.shutdown()
        self.partitions.shutdown()
