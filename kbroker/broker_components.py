"""BrokerComponents: the broker's collaborators, built in dependency order and wired
together (the building half of Kafka's KafkaServer.startup). The Broker (kbroker.broker)
owns the lifecycle around it: the loop and its thread, the phases, the listeners, the
periodic work, the shutdown order.

Threading: everything here (logs, topic registry, coordinators) is used from the
broker's loop thread only, apart from `load_logs`, which the Broker runs on a worker
thread while nothing else uses the components.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kbroker.cluster.broker_topic_stats import BrokerTopicStats
from kbroker.cluster.dynamic_config import DynamicBrokerConfig
from kbroker.cluster.fetch_session import FetchSessionCache
from kbroker.cluster.metadata_cache import (
    ClusterView,
    LocalClusterView,
    TopicCatalog,
    ZkMetadataCache,
)
from kbroker.cluster.replica_manager import ReplicaManager
from kbroker.cluster.zk_producer_ids import ZkProducerIdManager
from kbroker.common.topic_partition import TopicPartition
from kbroker.config import BrokerConfig, ConfigError
from kbroker.coordinator.coordinator_leadership import CoordinatorLeadership
from kbroker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kbroker.coordinator.offsets_topic import OffsetsTopic
from kbroker.coordinator.producer_id_manager import ProducerIdManager
from kbroker.coordinator.share_group_records import SHARE_GROUP_STATE_PARTITION_METADATA
from kbroker.coordinator.transaction_coordinator import TransactionCoordinator
from kbroker.coordinator.transaction_state_manager import TransactionConfig, TransactionStateManager
from kbroker.coordinator.transaction_topic import TransactionTopic
from kbroker.coordinator.txn_marker_channel import NO_PARTITION, TransactionMarkerChannel
from kbroker.coordinator.txn_marker_writer import MarkerWriter
from kbroker.metadata.dynamic_broker_store import LocalDynamicBrokerConfigs
from kbroker.metadata.meta_properties import ensure_meta_properties
from kbroker.metadata.topic_registry import REGISTRY_FILE, TopicInfo, TopicRegistry
from kbroker.protocol.api_key import ApiKey
from kbroker.security.authorizer import ACLS_FILE, AclAuthorizer
from kbroker.security.credentials import CREDENTIALS_FILE, ScramCredentialStore
from kbroker.security.quotas import QUOTAS_FILE, ClientQuotas, quota_values
from kbroker.server.api_table import API_TABLE, CLUSTER_API_TABLE
from kbroker.server.forwarding import ENVELOPE_API
from kbroker.server.metadata_support import MetadataSupport, SingleBrokerSupport, ZkSupport
from kbroker.server.request_services import CurrentBrokerConfig, RequestServices, local_log
from kbroker.server.share_groups import ShareGroups
from kbroker.server.topic_admin import SingleBrokerTopicAdmin, TopicAdmin
from kbroker.server.zk_topic_admin import ZkTopicAdmin
from kbroker.storage.log import Log
from kbroker.storage.log_cleaner import CleanerConfig
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_dir_lock import LogDirLocks
from kbroker.storage.log_manager import LogManager
from kbroker.telemetry.client_metrics_manager import ClientMetricsManager
from kbroker.telemetry.client_metrics_store import ClientMetricsConfigStore
from kbroker.utils.periodic import every
from kbroker.utils.time import Time

if TYPE_CHECKING:
    from kbroker.cluster.zk_acls import ZkAclStore
    from kbroker.cluster.zk_broker import ZkBroker

log = logging.getLogger(__name__)


class BrokerComponents:
    """The broker's collaborators, built and wired together: config, logs, topics, the
    cluster, the coordinators. Request handlers see them through RequestServices
    (`request_services()`), never this object.

    Single broker (no zookeeper.connect): topics are the TopicRegistry's and this broker
    leads every partition. Cluster mode: topics and leaders come from the controller
    (ZkMetadataCache, fed by UpdateMetadata), partitions from its LeaderAndIsr
    (ReplicaManager), and topic changes are written to ZooKeeper (ZkBroker). What differs
    is behind `support` (SingleBrokerSupport / ZkSupport) and `topic_admin`
    (SingleBrokerTopicAdmin / ZkTopicAdmin).

    Built as Kafka's KafkaServer.startup builds things: each object is given what it
    needs in its constructor, in dependency order (log dirs locked, a single broker's
    dynamic broker configs from beside its logs, LogManager, the
    topic catalog; in cluster mode the ZkBroker, not yet connected, with its fetchers
    and AlterPartition channel; ReplicaManager; the coordinators; credentials, quotas,
    ACLs, each with its storage: files of the first log dir, or ZooKeeper's writers;
    the support objects). Nothing is finished afterwards by assigning another object's
    attributes (tests/test_layering.py checks it). The steps that need the ZooKeeper
    session run later: `connect_cluster` (the cluster id, the dynamic configs, what
    ZooKeeper stores of users, clients and ACLs) before the logs load, `start_cluster`
    (registration, the controller election, the ReplicaManager's session handler and
    ISR checks) once the listeners are bound."""

    def __init__(self, config: BrokerConfig, time: Time) -> None:
        self.current_config = CurrentBrokerConfig(config)
        self.time = time
        self.node_id = config.node_id
        self.clustered = config.zookeeper_connect is not None
        # Before anything touches the dirs: one broker per log dir (Kafka's .lock).
        self.log_dir_locks = LogDirLocks()
        self.log_dir_locks.acquire(list(config.log_dirs))
        try:
            self._open_stores(config, time)
        except BaseException:
            self.log_dir_locks.release()
            raise
        self.shutting_down = False

    def _open_stores(self, config: BrokerConfig, time: Time) -> None:
        self.local_broker_configs: LocalDynamicBrokerConfigs | None = None
        if self.clustered:  # the cluster id comes from ZooKeeper (connect_cluster)
            self.cluster_id = config.cluster_id or ""
        else:
            self.cluster_id = ensure_meta_properties(config.log_dirs, config.node_id, config.cluster_id)
            config = self._load_local_broker_configs(config)
        self.log_manager = LogManager(
            list(config.log_dirs),
            self.default_log_config,
            time,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            recovery_threads=config.num_recovery_threads_per_data_dir,
            open_segment_files_max=config.log_open_segment_files_max,
            replicated=self.clustered,
            cleaner_config=CleanerConfig(
                enable=config.log_cleaner_enable, threads=config.log_cleaner_threads,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                io_buffer_size=config.log_cleaner_io_buffer_size,
                io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                backoff_ms=config.log_cleaner_backoff_ms),
        )
        # (topic, version, ops) -> its Metadata entry, encoded (server/apis/metadata.py)
        self.metadata_topic_cache: dict[tuple[str, int, bool], Any] = {}
        self.fetch_sessions = FetchSessionCache()  # followers' incremental fetch sessions
        self.topic_stats = BrokerTopicStats()  # Kafka's BrokerTopicMetrics, per topic
        # listener name -> (advertised host, port); filled in when the server binds
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.topics: TopicCatalog
        self.cluster: ClusterView
        self.registry: TopicRegistry | None = None
        self.zk_broker: ZkBroker | None = None
        if self.clustered:
            cache = ZkMetadataCache(config.node_id)
            self.topics = self.cluster = self.metadata_cache = cache
            self.zk_broker = self._zk_broker(config, cache)
        else:
            self.registry = TopicRegistry(os.path.join(config.log_dirs[0], REGISTRY_FILE))
            self.topics = self.registry
            self.cluster = LocalClusterView(config.node_id, config.broker_rack, self.registry,
                                            self.log_manager, self.endpoints)
        self.replica_manager = self._replica_manager(config, time)
        self.offsets_topic = OffsetsTopic(self)
        self.group_coordinator = GroupCoordinator(
            CoordinatorConfig.from_broker_config(config), time, self.offsets_topic,
            clustered=self.clustered, topics=self.topics)
        self.share_groups = ShareGroups(self, lambda g: g in self.group_coordinator.groups
                                        or self.group_coordinator.consumer.is_active(g),
                                        self._partition_leader if self.clustered else None,
                                        self._broker_endpoint,
                                        self.zk_broker.persist_group_config if self.zk_broker is not None else None,
                                        self.offsets_topic.append)
        self.group_coordinator.add_record_replay(SHARE_GROUP_STATE_PARTITION_METADATA,
                                                 self.share_groups.coordinator.replay)
        self.transaction_topic = TransactionTopic(self)
        txn_state = TransactionStateManager(TransactionConfig.from_broker_config(config), time,
                                            self.transaction_topic)
        self.marker_writer = MarkerWriter(self.replica_manager, self.group_coordinator, time,
                                          config.request_timeout_ms / 1000)
        markers = TransactionMarkerChannel(
            txn_state, config.node_id, self.marker_writer, self._partition_leader,
            endpoint_of=self._broker_endpoint if self.clustered else None,
            metadata_changed=self.metadata_changed if self.clustered else None,
            login=config.inter_broker_login)
        self.txn_coordinator = TransactionCoordinator(txn_state, markers, time, self._generate_producer_id)
        self.client_metrics = ClientMetricsManager(config.telemetry_max_bytes, time)
        self.client_metrics_configs = ClientMetricsConfigStore(
            None if self.zk_broker is not None else config.log_dirs[0], self.client_metrics,
            self.zk_broker.persist_client_metrics if self.zk_broker is not None else None)
        self._open_security(config)
        self.support: MetadataSupport
        self.topic_admin: TopicAdmin
        self.producer_id_manager: ProducerIdManager | ZkProducerIdManager
        if self.zk_broker is None:
            assert self.registry is not None and self.local_broker_configs is not None
            self.support = SingleBrokerSupport(self.transaction_topic, self.txn_coordinator, API_TABLE,
                                               self.local_broker_configs)
            self.topic_admin = SingleBrokerTopicAdmin(
                self.current_config, config.node_id, self.registry, self.cluster, self.log_manager,
                self.replica_manager, self.group_coordinator, self.topic_stats)
            self.producer_id_manager = ProducerIdManager(config.log_dirs[0])
        else:
            zk = ZkSupport(self.transaction_topic, self.zk_broker, self.metadata_cache,
                           self.replica_manager, self.log_manager,
                           {**CLUSTER_API_TABLE, ApiKey.ENVELOPE: ENVELOPE_API})
            self.support = zk
            self.topic_admin = ZkTopicAdmin(self.current_config, config.node_id, self.topics,
                                            self.cluster, zk)
            self.producer_id_manager = ZkProducerIdManager(config.node_id, self.zk_broker.zk)
            # the coordinators follow the leaderships of their topics' partitions
            leadership = CoordinatorLeadership(self.group_coordinator, self.txn_coordinator,
                                               self.share_groups.coordinator, self.share_groups.state,
                                               self.replica_manager.partitions.get)
            self.replica_manager.add_leadership_listener(leadership.leadership_changed)
            # share partitions live with their partitions' leaders
            self.replica_manager.add_leadership_listener(self.share_groups.partitions.leadership_changed)
        self._isr_expiration: asyncio.Task[None] | None = None

    def _zk_broker(self, config: BrokerConfig, cache: ZkMetadataCache) -> ZkBroker:
        """Cluster mode: this broker's part in ZooKeeper, not yet connected (connect_cluster)."""
        from kbroker.cluster.zk_broker import ZkBroker  # kazoo: only in cluster mode

        return ZkBroker(config, self.log_manager, cache, asyncio.get_running_loop(),
                        self.default_log_config, on_broker_config=self.apply_broker_config,
                        on_entity_config=self._entity_config)

    def _replica_manager(self, config: BrokerConfig, time: Time) -> ReplicaManager:
        """The partitions: led here alone (a single broker), or as the controller says, with
        the ZkBroker's fetchers and AlterPartition channel."""
        zk_broker = self.zk_broker
        if zk_broker is None:
            return ReplicaManager(
                config.node_id, self.log_manager, self.topics, time.milliseconds,
                replica_lag_time_max_ms=config.replica_lag_time_max_ms, topic_stats=self.topic_stats)
        cluster = self.cluster
        return ReplicaManager(
            config.node_id, self.log_manager, self.topics, time.milliseconds, clustered=True,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms, topic_stats=self.topic_stats,
            fetchers=zk_broker.fetchers, alter_isr=zk_broker.alter_partitions.submit,
            topic_config=zk_broker.topic_config, is_alive=lambda b: cluster.broker(b) is not None,
            broker_epoch=lambda: zk_broker.broker_epoch)

    def _open_security(self, config: BrokerConfig) -> None:
        """SCRAM credentials, client quotas and ACLs: in files of the first log dir (a single
        broker), or in ZooKeeper's /config/users, /config/clients, /kafka-acl and
        /kafka-acl-extended, as in Kafka's ZooKeeper mode (loaded by connect_cluster)."""
        zk_broker = self.zk_broker
        local = None if zk_broker is not None else config.log_dirs[0]
        self.scram_credentials = ScramCredentialStore(
            local and os.path.join(local, CREDENTIALS_FILE),
            zk_broker.persist_credentials if zk_broker is not None else None)
        self.client_quotas = ClientQuotas(
            local and os.path.join(local, QUOTAS_FILE),
            config.quota_window_size_seconds * 1000, config.quota_window_num,
            zk_broker.persist_client_quotas if zk_broker is not None else None)
        self.acl_store: ZkAclStore | None = None
        self.authorizer: AclAuthorizer | None = None
        if config.authorizer_class_name:
            if zk_broker is not None:
                from kbroker.cluster.zk_acls import ZkAclStore  # kazoo: only in cluster mode

                self.acl_store = ZkAclStore(zk_broker.zk)
            self.authorizer = AclAuthorizer(
                local and os.path.join(local, ACLS_FILE), config.super_users,
                config.allow_everyone_if_no_acl_found, self.acl_store)

    async def connect_cluster(self) -> None:
        """Cluster mode, before anything else: ZooKeeper, the cluster id, meta.properties,
        the dynamic configs, the topics' configs, the SCRAM credentials, client quotas
        and ACLs."""
        from kbroker.metadata.meta_properties import read_meta_properties

        zk_broker = self.zk_broker
        assert zk_broker is not None
        local = {p.get("cluster.id") for d in self.config.log_dirs
                 if (p := read_meta_properties(d)) is not None} - {None}
        local_id = self.config.cluster_id or (next(iter(local)) if len(local) == 1 else None)
        cluster_id = await zk_broker.connect(local_id)
        self.cluster_id = ensure_meta_properties(self.config.log_dirs, self.config.node_id, cluster_id)
        dynamic = await zk_broker.load_dynamic_configs()
        if dynamic is not None:
            self.apply_broker_config(dynamic)
        await zk_broker.load_topic_configs()  # before load_logs: each log gets its topic's
        for entity_type, name, entity_config in await zk_broker.load_entity_configs():
            self._entity_config(entity_type, name, entity_config)
        if self.authorizer is not None and self.acl_store is not None:
            self.authorizer.load(await self.acl_store.start(self.authorizer.set_pattern))

    async def start_cluster(self) -> None:
        """Cluster mode, once the listeners are bound: register and join the controller
        election (ZkBroker.start); the ReplicaManager hears of the session's fencing and
        expiry, and checks its leaders' ISRs every replica.lag.time.max.ms / 2."""
        from kbroker.cluster.zk_client import StateChangeHandler

        zk_broker = self.zk_broker
        assert zk_broker is not None
        await zk_broker.start([(name, host, port) for name, (host, port) in self.endpoints.items()])
        rm = self.replica_manager
        zk_broker.zk.register_state_change_handler(StateChangeHandler(
            "replica-manager", on_fenced=rm.set_zk_fenced, on_session_expired=rm.session_expired))
        self._isr_expiration = asyncio.ensure_future(every(
            self.config.replica_lag_time_max_ms / 2000, rm.maybe_shrink_isr))

    def _entity_config(self, entity_type: str, name: str, entity_config: dict[str, str]) -> None:
        """A users or clients entity's config, from ZooKeeper: a user's SCRAM credentials,
        an entity's client quotas; a client metrics subscription's; or a group's configs."""
        from kbroker.cluster.zk_data import (
            CLIENT_METRICS_ENTITY,
            GROUP_ENTITY,
            desanitize,
            quota_entity,
        )

        if entity_type == CLIENT_METRICS_ENTITY:
            self.client_metrics_configs.set_subscription(desanitize(name), entity_config)
            return
        if entity_type == GROUP_ENTITY:
            self.share_groups.config_stored(desanitize(name), entity_config)
            return
        if entity_type == "users" and "/" not in name:
            self.scram_credentials.set_user(desanitize(name), entity_config)
        entity = quota_entity(entity_type, name)
        if entity is not None:
            self.client_quotas.set_entity(entity, quota_values(entity_config))

    def _load_local_broker_configs(self, config: BrokerConfig) -> BrokerConfig:
        """A single broker, before its logs open: its dynamic broker configs, from the files
        beside its logs (kbroker.metadata.dynamic_broker_store), over server.properties."""
        self.local_broker_configs = LocalDynamicBrokerConfigs(
            config.log_dirs[0], DynamicBrokerConfig(config.props, config.node_id),
            self.apply_broker_config)
        dynamic = self.local_broker_configs.load()
        if dynamic is not None:
            self._take_broker_config(dynamic)
        return self.config

    def _take_broker_config(self, props: Mapping[str, str]) -> LogConfig | None:
        """The new effective config from these props (None: they do not validate)."""
        try:
            config = BrokerConfig.from_props(props)
            default = config.log_config()
        except ConfigError as e:  # checked before it was stored; another version wrote it?
            log.error("ignoring dynamic broker configs that do not validate: %s", e)
            return None
        self.current_config.update(config, default)
        return default

    def apply_broker_config(self, props: Mapping[str, str]) -> None:
        """Dynamic broker configs changed: the new effective config, applied while running.
        Logs without a topic override take the new topic defaults."""
        default = self._take_broker_config(props)
        if default is None:
            return
        manager = self.log_manager
        manager.reconfigure_default_config(default)
        for topic in {tp.topic for tp in manager.all_logs()}:
            info = self.topics.get(topic)
            overrides = info.configs if info is not None else {}
            try:
                manager.update_topic_config(topic, LogConfig.from_props(overrides, base=default))
            except ValueError as e:
                log.warning("topic %s keeps its config: %s", topic, e)
        if self.zk_broker is not None:
            self.zk_broker.reconfigure(self.config, default)
        log.info("broker configs changed dynamically: %s", {
            k: v for k, v in props.items() if self.config.props.get(k) == v and k not in (
                "log.dirs", "listeners")})

    def _partition_leader(self, tp: TopicPartition) -> int:
        """The leader of a partition for the transaction markers (-2: it does not exist)."""
        pm = self.cluster.partition(tp)
        return NO_PARTITION if pm is None else pm.leader

    def _broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.zk_broker.broker_endpoint(broker_id) if self.zk_broker is not None else None

    async def _generate_producer_id(self) -> int:
        ids = self.producer_id_manager
        if isinstance(ids, ZkProducerIdManager):
            return await ids.generate()
        return ids.generate()

    # -- startup

    def startup(self) -> None:
        self.load_logs()
        self.finish_startup()

    def load_logs(self) -> None:
        """The topic registry and every log (recovering them after an unclean shutdown).
        Broker._run runs this on a worker thread, while nothing else uses the state, so
        that the loop keeps answering /healthz and /readyz meanwhile."""
        if self.registry is not None:
            self.registry.load()
        self.log_manager.startup()

    def finish_startup(self) -> None:
        """On the loop thread, after load_logs."""
        if self.registry is not None:
            self._reconcile_logs(self.registry)
        self.group_coordinator.startup()
        self.share_groups.startup()
        if not self.clustered and self.transaction_topic.exists:
            self.support.ensure_transaction_topic()

    def _reconcile_logs(self, registry: TopicRegistry) -> None:
        """Adopt partitions found on disk but missing from the registry; create missing logs."""
        found: dict[str, tuple[Any, int]] = {}
        for lg in self.log_manager.all_logs().values():
            tp = lg.topic_partition
            tid, count = found.get(tp.topic, (lg.topic_id, 0))
            found[tp.topic] = (tid or lg.topic_id, max(count, tp.partition + 1))
        for name, (tid, count) in found.items():
            info = registry.get(name)
            if info is None:
                log.warning("adopting topic %s found on disk but not in %s", name, REGISTRY_FILE)
                topic_id = tid if isinstance(tid, uuid.UUID) else uuid.uuid4()
                registry.adopt(TopicInfo(name, topic_id, count))
            elif count > info.partitions:
                registry.set_partitions(name, count)
        for info in registry:
            config = self.log_config_for(info)
            for p in range(info.partitions):
                self.log_manager.get_or_create_log(TopicPartition(info.name, p), info.topic_id, config)

    # -- topics

    @property
    def config(self) -> BrokerConfig:
        return self.current_config.current

    @property
    def default_log_config(self) -> LogConfig:
        return self.current_config.default_log_config

    def log_config_for(self, info: TopicInfo) -> LogConfig:
        return self.current_config.log_config_for(info)

    def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Register the topic and create its partition logs (a single broker). Raises
        InvalidTopicError, KeyError."""
        if not isinstance(self.topic_admin, SingleBrokerTopicAdmin):
            raise RuntimeError("a cluster's topics live in ZooKeeper, not in a registry")
        return self.topic_admin.create_topic_now(name, partitions, configs)

    async def metadata_changed(self, timeout_s: float) -> None:
        """Return after the next UpdateMetadata, or after `timeout_s` (ZkSupport's)."""
        await self.support.metadata_changed(timeout_s)

    def get_log(self, topic: str, partition: int) -> Log | None:
        """This broker's replica of the partition, or None when it has none."""
        return local_log(self.topics, self.log_manager, topic, partition)

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool:
        """Create an internal topic on first need (the coordinators' topics ask)."""
        return self.topic_admin.create_internal_topic(name, partitions, replication_factor, configs)

    def request_services(self) -> RequestServices:
        """What request handlers see (once the cluster is joined and the logs loaded)."""
        return RequestServices(
            dynamic_config=self.current_config, node_id=self.node_id, cluster_id=self.cluster_id,
            time=self.time, topics=self.topics, cluster=self.cluster, support=self.support,
            topic_admin=self.topic_admin, replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            fetch_sessions=self.fetch_sessions, group_coordinator=self.group_coordinator,
            share_groups=self.share_groups,
            offsets_topic=self.offsets_topic, txn_coordinator=self.txn_coordinator,
            transaction_topic=self.transaction_topic, marker_writer=self.marker_writer,
            producer_id_manager=self.producer_id_manager, authorizer=self.authorizer,
            client_quotas=self.client_quotas, scram_credentials=self.scram_credentials,
            topic_stats=self.topic_stats, client_metrics_configs=self.client_metrics_configs,
            client_metrics_manager=self.client_metrics, metadata_topic_cache=self.metadata_topic_cache,
            shutting_down=lambda: self.shutting_down)

    def begin_shutdown(self) -> None:
        """The broker stops: handlers see `shutting_down` (new work is refused)."""
        self.shutting_down = True

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        return self.endpoints[listener_name]

    # -- periodic work

    def cleanup_logs(self) -> None:
        self.log_manager.cleanup_logs()

    def flush_and_checkpoint(self) -> None:
        self.log_manager.flush_dirty_logs()
        self.log_manager.checkpoint()

    def shutdown_logs(self) -> None:
        try:
            self.txn_coordinator.shutdown()
            self.group_coordinator.shutdown()
            self.share_groups.shutdown()
            self.log_manager.shutdown()
        finally:
            self.log_dir_locks.release()

    async def stop_cluster(self) -> None:
        if self.acl_store is not None:
            self.acl_store.close()
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
        if self.zk_broker is not None:
            try:
                await self.zk_broker.stop()
            except Exception:
                log.exception("leaving the cluster failed")
