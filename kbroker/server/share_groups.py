"""ShareGroups: the parts of KIP-932 share groups a broker runs, built together by the
wiring and handed to the request handlers as one service.

- `coordinator` (coordinator/share_group.py): membership and assignment by
  ShareGroupHeartbeat;
- `sessions` (server/share_session_cache.py): the share sessions of ShareFetch and
  ShareAcknowledge;
- `partitions` (server/share_partition_manager.py): the share partitions, their
  acquisitions, locks and acknowledgements;
- `state` (coordinator/share_coordinator.py): the share coordinator, their persisted
  state in `__share_group_state`, which `persister` (server/share_state_persister.py)
  reads and writes for the share partitions, locally or, in a cluster, on the broker
  leading the key's partition;
- `offsets` (server/share_group_offsets.py): what the share-group admin APIs read and
  change (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets,
  DeleteGroups of a share group).

At startup every group with a persisted share partition state is known again, empty
(members join anew), so it is listed, described and deleted as before the restart (a
single broker; in a cluster the share coordinator loads a partition's states when it
becomes its leader, and a group is known once a member joins).

A member leaving or fenced releases what it holds; so does its share session closing
or being replaced. Timers (session timeouts, acquisition locks) run on one Timers,
attached to the broker's loop at startup.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.internal_topic import CoordinatorBroker
from kbroker.coordinator.share_coordinator import ShareCoordinator, ShareStateTopic
from kbroker.coordinator.share_group import ShareGroupConfig, ShareGroupCoordinator
from kbroker.coordinator.share_partition import SharePartitionConfig
from kbroker.coordinator.timers import Timers
from kbroker.metadata.group_configs import GroupConfigStore
from kbroker.metadata.group_configs import Persist as GroupConfigPersist
from kbroker.server import group_config
from kbroker.server.share_group_offsets import ShareGroupOffsets
from kbroker.server.share_partition_manager import SharePartitionManager
from kbroker.server.share_session_cache import ShareSession, ShareSessionCache
from kbroker.server.share_state_persister import ShareStatePersister
from kbroker.server.topic_admin import AdminError

if TYPE_CHECKING:
    from kbroker.config import BrokerConfig

log = logging.getLogger(__name__)


def coordinator_config(c: BrokerConfig) -> ShareGroupConfig:
    return ShareGroupConfig(c.group_share_session_timeout_ms, c.group_share_heartbeat_interval_ms,
                            c.group_share_max_size)


class ShareGroups:
    def __init__(self, broker: CoordinatorBroker, other_group_active: Callable[[str], bool],
                 leader_of: Callable[[TopicPartition], int] | None = None,
                 endpoint_of: Callable[[int], tuple[str, int] | None] | None = None,
                 persist_configs: GroupConfigPersist | None = None,
                 write_group_records: Callable[[str, list[tuple[bytes, bytes | None]]], object] | None = None
                 ) -> None:
        config = broker.config
        self.broker = broker
        # the GROUP resources' configs: beside the logs, or in a cluster ZooKeeper's
        # /config/groups (persist_configs: ZkBroker.persist_group_config)
        self.configs = GroupConfigStore(None if broker.clustered else config.log_dirs[0], persist_configs)
        self.timers = Timers(broker.time)
        self.coordinator = ShareGroupCoordinator(coordinator_config(config), self.timers, other_group_active,
                                                 write_group_records)
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self.state = ShareCoordinator(ShareStateTopic(broker))
        self.persister = ShareStatePersister(self.state, config.node_id, config.request_timeout_ms, leader_of,
                                             endpoint_of, config.inter_broker_login)
        self.partitions = SharePartitionManager(
            broker.replica_manager, broker.topics, self.timers, self.partition_config, self.persister,
            lambda group_id: self.group_config(group_id)["share.auto.offset.reset"])
        self.offsets = ShareGroupOffsets(self.coordinator, self.state, self.partitions, broker.topics,
                                         broker.replica_manager, self.persister)
        self.coordinator.add_member_removed_listener(self._member_removed)

    def group_config(self, group_id: str) -> dict[str, Any]:
        """The group's configs, typed (server/group_config.py)."""
        return group_config.effective(self.broker.config, self.configs.get(group_id))

    def config_stored(self, group_id: str, overrides: dict[str, str]) -> None:
        """A group's overrides as ZooKeeper holds them now (a cluster: read at start and
        at each change notification); ones this broker would refuse are logged, not
        taken (the group keeps what it had)."""
        try:
            group_config.check(self.broker.config, overrides)
        except AdminError as e:
            log.warning("group %s: ignoring invalid group configs %s: %s", group_id, overrides, e.message)
            return
        self.configs.apply(group_id, overrides)

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        c = self.broker.config
        group = self.group_config(group_id)
        return SharePartitionConfig(group["share.record.lock.duration.ms"], c.group_share_delivery_count_limit,
                                    c.group_share_partition_max_record_locks,
                                    group["share.isolation.level"] == "read_committed")

    def _member_removed(self, group_id: str, member_id: str) -> None:
        self.sessions.close(group_id, member_id)
        self.partitions.release_member(group_id, member_id)

    def session_closed(self, session: ShareSession | None) -> None:
        if session is None:
            return
        self.partitions.release_member(session.group_id, session.member_id, list(session.partitions))
        if self.persister.clustered and not self.sessions.has_group(session.group_id):
            # the group's last session here: its share partitions are read again at the next
            # fetch, so an AlterShareGroupOffsets or DeleteShareGroupOffsets of the group,
            # now empty, done at another broker's group coordinator, is seen
            self.partitions.forget_idle(session.group_id)

    def startup(self) -> None:
        try:
            self.timers.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        self.configs.load()
        if self.broker.clustered:
            return  # the share coordinator loads what it leads (on_elected)
        self.state.load()
        for group_id in dict.fromkeys(key[0] for key in self.state.states):
            self.coordinator.restore_group(group_id)

    def shutdown(self) -> None:
        self.timers.close()
        self.persister.close()
        self.coordinator.shutdown()
        self.partitions.shutdown()
