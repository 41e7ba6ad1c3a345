"""The Broker: owns the config, the logs, the topic metadata and the network server.

    with kbroker.Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tmp}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})

Without `log.dirs`, an embedded Broker keeps its logs in a fresh temporary
directory removed by stop(). Each log dir is locked for the broker's life (Kafka's
`.lock`): a second broker on the same dir fails to start, naming it.

`Broker.start()` runs the broker's asyncio loop in a background thread (for
embedding and tests) and returns once the port answers; `serve_forever()` runs
it in the calling thread until `stop()` or SIGTERM/SIGINT (the CLI). There is no
global state: two Brokers in one process are independent.

Threading: everything in BrokerComponents (logs, topic registry, connections) is
used from the broker's loop thread only; `Broker.stop()` hands over to that
thread with call_soon_threadsafe.

The operations HTTP listener (operations.listener: /metrics, /healthz, /readyz, the
console; kbroker.ops) runs on the same loop, from before the logs load to after they are
closed; `phase` (BrokerPhase, Kafka's BrokerState) tells it where the broker is.

Shutdown order (SIGTERM, SIGINT, stop()): stop accepting connections; stop
reading new requests and wake parked Fetches; wait (bounded) for in-flight
responses to be sent; close connections; LogManager.shutdown() (flush,
checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
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
from kbroker.config import BrokerConfig, ConfigError, Listener, broker_config
from kbroker.coordinator.coordinator_leadership import CoordinatorLeadership
from kbroker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from kbroker.coordinator.offsets_topic import OffsetsTopic
from kbroker.coordinator.producer_id_manager import ProducerIdManager
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
from kbroker.server.broker_phase import BrokerPhase
from kbroker.server.forwarding import ENVELOPE_API
from kbroker.server.metadata_support import MetadataSupport, SingleBrokerSupport, ZkSupport
from kbroker.server.request_services import CurrentBrokerConfig, RequestServices, local_log
from kbroker.server.topic_admin import SingleBrokerTopicAdmin, TopicAdmin
from kbroker.server.zk_topic_admin import ZkTopicAdmin
from kbroker.storage.log import Log
from kbroker.storage.log_cleaner import CleanerConfig
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_dir_lock import LogDirLocks
from kbroker.storage.log_manager import LogManager
from kbroker.storage.producer_state import expire_producers
from kbroker.utils.periodic import every
from kbroker.utils.rlimit import open_file_limit
from kbroker.utils.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kbroker.cluster.zk_acls import ZkAclStore
    from kbroker.cluster.zk_broker import ZkBroker
    from kbroker.ops.listener import OperationsListener
    from kbroker.server.protocol_trace import TraceSettings
    from kbroker.server.request_metrics import RequestMetrics

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 10.0
PRODUCER_ID_EXPIRATION_CHECK_S = 600.0  # Kafka's producer.id.expiration.check.interval.ms


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
            clustered=self.clustered)
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
                                               self.replica_manager.partitions.get)
            self.replica_manager.add_leadership_listener(leadership.leadership_changed)
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
        the dynamic configs, the SCRAM credentials, client quotas and ACLs."""
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
        an entity's client quotas."""
        from kbroker.cluster.zk_data import desanitize, quota_entity

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
            self.zk_broker.reconfigure(self.config)
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
            offsets_topic=self.offsets_topic, txn_coordinator=self.txn_coordinator,
            transaction_topic=self.transaction_topic, marker_writer=self.marker_writer,
            producer_id_manager=self.producer_id_manager, authorizer=self.authorizer,
            client_quotas=self.client_quotas, scram_credentials=self.scram_credentials,
            topic_stats=self.topic_stats, metadata_topic_cache=self.metadata_topic_cache,
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


class Broker:
    """A single kbroker node. See the module docstring."""

    def __init__(
        self,
        config: BrokerConfig | Mapping[str, str] | None = None,
        *,
        time: Time = SYSTEM_TIME,
        trace: TraceSettings | None = None,
        operations_optional: bool = False,
    ) -> None:
        self._temp_log_dir: str | None = None
        if not isinstance(config, BrokerConfig) and not {"log.dirs", "log.dir"} & set(config or {}):
            # Embedded without log.dirs: a fresh directory of its own, removed on stop,
            # never the shared default of `kbroker serve` (another broker may hold it).
            self._temp_log_dir = tempfile.mkdtemp(prefix="kbroker-")
            config = {**(config or {}), "log.dirs": self._temp_log_dir}
        self.config = broker_config(config)
        self.time = time
        self.trace = trace  # the protocol trace (kbroker serve --trace), off unless given
        self.state: BrokerComponents | None = None
        self.services: RequestServices | None = None  # what handlers see, once serving
        self.server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._periodic: list[asyncio.Task[None]] = []
        self.failure: str | None = None  # why the broker stopped by itself, if it did
        self._bound: list[tuple[str, int]] = []
        self.phase = BrokerPhase.NOT_RUNNING
        # kbroker serve: the default operations listener gives way to a taken port
        self._operations_optional = operations_optional
        self.operations: OperationsListener | None = None  # with operations.listener
        self.request_metrics: RequestMetrics | None = None  # while /metrics is served

    # -- public API

    @property
    def bootstrap_servers(self) -> str:
        """`host:port[,host:port]` of the bound listeners (port 0 resolved), once started."""
        if not self._bound:
            raise RuntimeError("the broker is not started")
        return ",".join(f"{_host_for_url(h)}:{p}" for h, p in self._bound)

    @property
    def port(self) -> int:
        if not self._bound:
            raise RuntimeError("the broker is not started")
        return self._bound[0][1]

    @property
    def running(self) -> bool:
        return self.phase is BrokerPhase.RUNNING

    @property
    def operations_url(self) -> str | None:
        """http://host:port of the operations listener (operations.listener), once bound."""
        return self.operations.url if self.operations is not None else None

    def start(self, timeout: float = 60.0) -> Broker:
        """Start in a background thread; return once the listeners accept connections."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._thread_main, name="kbroker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("kbroker did not start in time")
        if self._startup_error is not None:
            self._thread.join()
            self._remove_temp_log_dir()
            raise self._startup_error
        return self

    def serve_forever(self, install_signal_handlers: bool = True) -> None:
        """Run in this thread until stop(), SIGTERM or SIGINT."""
        try:
            asyncio.run(self._run(install_signal_handlers))
        finally:
            self._remove_temp_log_dir()

    def stop(self, timeout: float = 60.0) -> None:
        loop, stop_event = self._loop, self._stop_event
        if loop is not None and stop_event is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop_event.set)
            except RuntimeError:
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if self._thread is None or not self._thread.is_alive():
            self._remove_temp_log_dir()

    def _remove_temp_log_dir(self) -> None:
        if self._temp_log_dir is not None:
            shutil.rmtree(self._temp_log_dir, ignore_errors=True)
            self._temp_log_dir = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals

    def _bound_endpoints(self, server: Any) -> list[tuple[str, int]]:
        out = []
        for bl in server.listeners:
            host = bl.host or "127.0.0.1"
            if host in ("0.0.0.0", "::"):
                host = "127.0.0.1"
            out.append((host, bl.port))
        return out

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._run(False))
        except BaseException as e:  # surfaced by start()
            if not self._ready.is_set():
                self._startup_error = e
                self._ready.set()
            else:
                log.exception("kbroker loop failed")

    async def _run(self, install_signal_handlers: bool) -> None:
        from kbroker.server.listener import SocketServer
        from kbroker.server.protocol_trace import ProtocolTrace

        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop_event = asyncio.Event()
        self.phase = BrokerPhase.STARTING
        await self._start_operations()
        try:
            state = BrokerComponents(self.config, self.time)
        except BaseException:
            await self._stop_operations()
            raise
        self.state = state
        try:
            if state.clustered:
                await state.connect_cluster()
            self.phase = BrokerPhase.RECOVERY
            await loop.run_in_executor(None, state.load_logs)
            state.finish_startup()
            # The logs, segments and topics loaded now live as long as the broker: keep
            # them out of the garbage collector's full passes, which otherwise walk every
            # one of them (hundreds of ms at 100,000 partitions) whenever a large request
            # allocates enough to trigger one.
            gc.freeze()
            trace = ProtocolTrace(self.trace, loop) if self.trace is not None else None
            self.services = state.request_services()
            server = SocketServer(self.services, loop, trace, self.request_metrics)
            self.server = server
            await loop.run_in_executor(None, server.oauth.start)  # OIDC listeners' JWKS
            # A cluster broker serves nobody before it is registered (see listener.py).
            server.start(accepting=state.zk_broker is None)
            state.endpoints.update(_advertised(self.config, server))
            if state.zk_broker is not None:
                await state.start_cluster()
                server.start_accepting()
        except BaseException:
            await state.stop_cluster()
            if self.server is not None:
                self.server.close_all()
            state.shutdown_logs()
            await self._stop_operations()
            raise
        self._bound = self._bound_endpoints(server)
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop_event.set)
        def dir_offline(log_dir: str, any_left: bool) -> None:  # on the failing thread
            loop.call_soon_threadsafe(self._log_dir_offline, state, log_dir, any_left)

        state.log_manager.register_dir_offline_handler(dir_offline)
        self._start_periodic(state)
        listening = ", ".join(
            f"{bl.name}://{_host_for_url(bl.bound_host)}:{bl.port}" for bl in server.listeners
        )
        log.info("kbroker listening on %s (log.dirs=%s)", listening, ",".join(self.config.log_dirs))
        log.info("open-file limit %d: %d descriptors in use for %d partitions; at most %d "
                 "segments hold open files at once (log.open.segment.files.max)", open_file_limit(),
                 _open_descriptors(), len(state.log_manager.all_logs()),
                 state.log_manager.file_cache.max_open)
        self.phase = BrokerPhase.RUNNING
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await self._shutdown(state, server)

    def _log_dir_offline(self, state: BrokerComponents, log_dir: str, any_left: bool) -> None:
        state.log_manager.take_dir_offline(log_dir)
        if not any_left and self._stop_event is not None:
            # Kafka halts when every log dir has failed: nothing could be served.
            self.failure = f"every log dir has failed (the last: {log_dir}); shutting down"
            log.error("%s", self.failure)
            self._stop_event.set()

    def _start_periodic(self, state: BrokerComponents) -> None:
        if state.log_manager.cleaner is not None:
            state.log_manager.cleaner.start()
        self._periodic = [
            asyncio.ensure_future(
                every(self.config.log_retention_check_interval_ms / 1000, state.cleanup_logs)
            ),
            asyncio.ensure_future(every(1.0, state.log_manager.flush_dirty_logs)),
            asyncio.ensure_future(every(self.config.log_flush_offset_checkpoint_interval_ms / 1000,
                                         state.log_manager.checkpoint_in_background)),
            asyncio.ensure_future(every(self.config.offsets_retention_check_interval_ms / 1000,
                                         state.group_coordinator.expire_offsets)),
            asyncio.ensure_future(every(PRODUCER_ID_EXPIRATION_CHECK_S, lambda: expire_producers(
                state.log_manager.all_logs().values(), self.time.milliseconds(),
                state.config.producer_id_expiration_ms))),
            asyncio.ensure_future(every(
                self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000,
                state.txn_coordinator.abort_timed_out_transactions)),
            asyncio.ensure_future(every(
                self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000,
                state.txn_coordinator.remove_expired_transactional_ids)),
        ]

    async def _start_operations(self) -> None:
        """The operations HTTP listener (operations.listener), first: /healthz and /readyz
        answer while the logs load. A port in use stops the start, unless this is
        `kbroker serve`'s default listener, which is then left off (logged)."""
        endpoint = self.config.operations_endpoint
        if endpoint is None:
            return
        from kbroker.ops.listener import OperationsListener
        from kbroker.server.request_metrics import RequestMetrics

        listener = OperationsListener(self, *endpoint)
        try:
            await listener.start()
        except OSError as e:
            if not self._operations_optional:
                raise OSError(e.errno, f"operations.listener {endpoint[0]}:{endpoint[1]}: "
                                       f"{e.strerror or e}") from e
            log.warning("the operations listener is off: cannot listen on %s:%d (%s); set "
                        "operations.listener to another host:port", *endpoint, e.strerror or e)
            return
        self.operations = listener
        self.request_metrics = RequestMetrics()
        log.info("operations listener on %s (/metrics, /healthz, /readyz, console at /)",
                 listener.url)

    async def _stop_operations(self) -> None:
        if self.operations is not None:
            await self.operations.stop()

    async def _shutdown(self, state: BrokerComponents, server: Any) -> None:
        log.info("kbroker shutting down")
        if state.zk_broker is not None:  # leaderships move away while we still serve
            self.phase = BrokerPhase.PENDING_CONTROLLED_SHUTDOWN
            await state.zk_broker.controlled_shutdown()
        self.phase = BrokerPhase.SHUTTING_DOWN
        state.begin_shutdown()
        server.stop_accepting()
        for task in self._periodic:
            task.cancel()
        state.replica_manager.delayed_fetch_purgatory.check_and_complete_all()
        state.group_coordinator.shutdown()  # parked JoinGroup/SyncGroup answer NOT_COORDINATOR
        state.txn_coordinator.shutdown()  # markers in flight: completed after the restart
        await server.drain(SHUTDOWN_GRACE_SECONDS)
        server.close_all()
        await state.stop_cluster()
        state.shutdown_logs()
        await self._stop_operations()
        self.phase = BrokerPhase.NOT_RUNNING
        log.info("kbroker stopped")


def _advertised(config: BrokerConfig, server: Any) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port) clients should use, per advertised.listeners."""
    bound = {bl.name: bl for bl in server.listeners}
    adv: dict[str, Listener] = {a.name: a for a in (config.advertised_listeners or ())}
    out: dict[str, tuple[str, int]] = {}
    for name, bl in bound.items():
        a = adv.get(name)
        host = a.host if a and a.host else bl.host
        port = a.port if a and a.port else bl.port
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        out[name] = (host, port)
    return out


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host
