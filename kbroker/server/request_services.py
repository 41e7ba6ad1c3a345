"""What a request handler may use: the broker's collaborators named one by one, as
Kafka's KafkaApis is constructed (replica manager, metadata cache, admin manager,
coordinators, authorizer, quotas, credentials, ...), instead of the whole broker.

Owns: nothing. RequestServices is a frozen record of references, built once by the
wiring (kbroker.broker) after the broker has joined its cluster and loaded its logs,
and handed to every RequestContext. What differs between a single broker and a
ZooKeeper cluster is behind `support` (server/metadata_support.py) and `topic_admin`
(server/topic_admin.py, server/zk_topic_admin.py): handlers do not ask which mode
they run in.

The two values that change while the broker runs are read through their owners:
the config through CurrentBrokerConfig (dynamic broker configs replace it), the
shutdown flag through `shutting_down()`.

Lock: the broker's event-loop thread, as every service named here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.log_config import LogConfig

if TYPE_CHECKING:
    from kbroker.cluster.broker_topic_stats import BrokerTopicStats
    from kbroker.cluster.fetch_session import FetchSessionCache
    from kbroker.cluster.metadata_cache import ClusterView, TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.cluster.zk_producer_ids import ZkProducerIdManager
    from kbroker.config import BrokerConfig
    from kbroker.coordinator.group_coordinator import GroupCoordinator
    from kbroker.coordinator.offsets_topic import OffsetsTopic
    from kbroker.coordinator.producer_id_manager import ProducerIdManager
    from kbroker.coordinator.transaction_coordinator import TransactionCoordinator
    from kbroker.coordinator.transaction_topic import TransactionTopic
    from kbroker.coordinator.txn_marker_writer import MarkerWriter
    from kbroker.metadata.topic_registry import TopicInfo
    from kbroker.security.authorizer import AclAuthorizer
    from kbroker.security.credentials import ScramCredentialStore
    from kbroker.security.quotas import ClientQuotas
    from kbroker.server.metadata_support import MetadataSupport
    from kbroker.server.share_groups import ShareGroups
    from kbroker.server.topic_admin import TopicAdmin
    from kbroker.storage.log import Log
    from kbroker.storage.log_manager import LogManager
    from kbroker.telemetry.client_metrics_manager import ClientMetricsManager
    from kbroker.telemetry.client_metrics_store import ClientMetricsConfigStore
    from kbroker.utils.time import Time


class CurrentBrokerConfig:
    """The broker's current config and topic defaults (what Kafka's DynamicBrokerConfig keeps
    current in its KafkaConfig):
    replaced as a whole when dynamic broker configs change (cluster mode), so readers
    take `current` each time instead of keeping a BrokerConfig."""

    __slots__ = ("current", "default_log_config")

    def __init__(self, config: BrokerConfig) -> None:
        self.current = config
        self.default_log_config: LogConfig = config.log_config()

    def update(self, config: BrokerConfig, default_log_config: LogConfig) -> None:
        self.current, self.default_log_config = config, default_log_config

    def log_config_for(self, info: TopicInfo) -> LogConfig:
        """A topic's effective LogConfig: the defaults under its overrides."""
        if not info.configs:
            return self.default_log_config
        return LogConfig.from_props(info.configs, base=self.default_log_config)


def local_log(topics: TopicCatalog, log_manager: LogManager, topic: str, partition: int
              ) -> Log | None:
    """This broker's replica of a partition of the catalog, or None when it has none."""
    info = topics.get(topic)
    if info is None or not 0 <= partition < info.partitions:
        return None
    return log_manager.get_log(TopicPartition(topic, partition))


@dataclass(frozen=True, slots=True)
class RequestServices:
    """See the module docstring."""

    dynamic_config: CurrentBrokerConfig
    node_id: int
    cluster_id: str
    time: Time
    # the metadata: topics (name, id, partition count, overrides) and the cluster's view
    # of them (brokers, leaders, ISRs, the controller)
    topics: TopicCatalog
    cluster: ClusterView
    support: MetadataSupport  # what differs between the single broker and a ZooKeeper cluster
    topic_admin: TopicAdmin
    replica_manager: ReplicaManager
    log_manager: LogManager
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    share_groups: ShareGroups  # KIP-932: share group membership, sessions, partitions, state
    offsets_topic: OffsetsTopic
    txn_coordinator: TransactionCoordinator
    transaction_topic: TransactionTopic
    marker_writer: MarkerWriter
    producer_id_manager: ProducerIdManager | ZkProducerIdManager
    authorizer: AclAuthorizer | None
    client_quotas: ClientQuotas
    scram_credentials: ScramCredentialStore
    topic_stats: BrokerTopicStats
    # client metrics (KIP-714): the subscriptions as stored, the instances and what they pushed
    client_metrics_configs: ClientMetricsConfigStore
    client_metrics_manager: ClientMetricsManager
    # (topic, version, ops) -> its Metadata entry, encoded (server/apis/metadata.py)
    metadata_topic_cache: dict[tuple[str, int, bool], Any]
    shutting_down: Callable[[], bool]

    def get_log(self, topic: str, partition: int) -> Log | None:
        """This broker's replica of the partition, or None when it has none."""
        return local_log(self.topics, self.log_manager, topic, partition)

    @property
    def config(self) -> BrokerConfig:
        return self.dynamic_config.current

    @property
    def default_log_config(self) -> LogConfig:
        return self.dynamic_config.default_log_config
