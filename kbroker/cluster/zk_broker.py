"""ZkBroker: this broker's part in a ZooKeeper cluster (what Kafka's KafkaServer does in
ZooKeeper mode besides serving requests).

Start, in order:
  1. connect to ZooKeeper (a clear error naming the address after
     zookeeper.connection.timeout.ms), create the chroot and Kafka's persistent paths;
  2. agree on the cluster id (/cluster/id; the log dirs' meta.properties must match it);
  3. load topic configs (/config/topics: before the logs are opened, and again once the
     listeners are bound) and watch /config/changes for later ones;
  4. register /brokers/ids/<id> (ephemeral; its czxid is the broker epoch). A znode left
     by this broker's previous life (a SIGKILL) stays until that session expires: the
     start waits for it rather than failing;
  5. take part in the controller election.

Then: high watermark checkpoints (replica.high.watermark.checkpoint.interval.ms); the
leaders' ISR changes to the controller (AlterPartition, alter_partition_manager.py);
re-registration after a session expiry; the admin requests this broker forwards to the
controller (KIP-590, `forwarding`: forwarding_manager.py); on stop, a controlled shutdown
(controlled.shutdown.enable) before the session closes.

Built before the ReplicaManager, which is given its `fetchers`, `alter_partitions` and
`topic_config` (as Kafka's KafkaServer builds its AlterPartitionManager before the
ReplicaManager); the wiring registers the ReplicaManager's own handler of the session's
events (fencing when ZooKeeper goes silent, see zk_client.py) with `zk` and runs its ISR
shrink checks. What the broker does with a dynamic config change (`on_broker_config`) and
with a user's or client's config (`on_entity_config`) is given to the constructor.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import (
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)

from kbroker.client.connection import KafkaClientError
from kbroker.cluster import zk_data
from kbroker.cluster.alter_partition_manager import AlterPartitionManager
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.cluster.controller.controller import ControllerConfig, KafkaController
from kbroker.cluster.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from kbroker.cluster.forwarding_manager import ForwardingManager
from kbroker.cluster.metadata_cache import ZkMetadataCache
from kbroker.cluster.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kbroker.cluster.zk_admin import AdminZkClient
from kbroker.cluster.zk_client import StateChangeHandler, ZooKeeperClient
from kbroker.cluster.zk_data import BrokerRegistration
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.config import BrokerConfig
from kbroker.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kbroker.security.quotas import Entity, quota_string, quota_values
from kbroker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kbroker.security.scram import ScramCredential
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.periodic import every

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
RETRY_BACKOFF_S = 0.2
# ZooKeeper errors that say nothing about the request itself: the connection or session
# went away under it (kazoo reconnects by itself).
ZK_RETRIABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


class ClusterIdMismatch(KafkaError):
    pass


# The broker's new effective props after a dynamic config change.
BrokerConfigListener = Callable[[dict[str, str]], None]
# (entity type, entity name as in ZooKeeper, its config) of a users or clients entity:
# SCRAM credentials and client quotas.
EntityConfigListener = Callable[[str, str, dict[str, str]], None]


class ZkBroker:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, metadata: ZkMetadataCache,
                 loop: asyncio.AbstractEventLoop, default_log_config: LogConfig, *,
                 on_broker_config: BrokerConfigListener,
                 on_entity_config: EntityConfigListener) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.loop = loop
        self.default_log_config = default_log_config
        connect = config.zookeeper_connect or ""
        connection_timeout = config.zookeeper_connection_timeout_ms or config.zookeeper_session_timeout_ms
        self.zk = ZooKeeperClient(connect, config.zookeeper_session_timeout_ms, connection_timeout, loop)
        self.admin = AdminZkClient(self.zk)
        self.listener = config.inter_broker_listener_name or config.listeners[0].name
        self.controller = KafkaController(ControllerConfig(
            broker_id=self.broker_id, listener=self.listener,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            delete_topic_enable=config.delete_topic_enable, login=config.inter_broker_login), self.zk,
            on_controller_change=self._controller_changed)
        self.fetchers = ReplicaFetcherManager(self.broker_id, FetcherConfig(
            num_replica_fetchers=config.num_replica_fetchers,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_min_bytes=config.replica_fetch_min_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            replica_socket_timeout_ms=config.replica_socket_timeout_ms,
            login=config.inter_broker_login), self.broker_endpoint)
        self.alter_partitions = AlterPartitionManager(
            self.broker_id, self._channel_to_controller, lambda: self.broker_epoch,
            config.request_timeout_ms / 1000)
        self.forwarding = ForwardingManager(
            self.broker_id, self._controller_id, self._endpoint_of, config.inter_broker_login,
            config.request_timeout_ms)
        self.cluster_id = ""
        self.broker_epoch = -1
        self.registration: BrokerRegistration | None = None
        self._endpoints: list[tuple[str, str, int]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._controller_channel: BrokerChannel | None = None
        self._controller_channel_target = -1
        self._last_config_change = -1
        self._stopping = False
        # broker id -> (host, port) of the leaders named in LeaderAndIsr requests: a new
        # follower may hear of its leader before UpdateMetadata describes it
        self.live_leaders: dict[int, tuple[str, int]] = {}
        self.dynamic = DynamicBrokerConfig(config.props, self.broker_id)
        self._on_broker_config = on_broker_config
        self._on_entity_config = on_entity_config

    # -- start --------------------------------------------------------------------------------
    async def connect(self, local_cluster_id: str | None) -> str:
        """Steps 1-2; returns the cluster id (the caller writes it to meta.properties). A new
        ZooKeeper (or chroot) gets a new id (cluster.id when set), as Kafka's
        getOrGenerateClusterId: log dirs of another cluster are then refused."""
        await self.zk.start()
        for path in zk_data.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        found = await self.zk.get(zk_data.CLUSTER_ID_PATH)
        if found is None:
            from kbroker.metadata.meta_properties import new_cluster_id

            cluster_id = self.config.cluster_id or new_cluster_id()
            try:
                await self.zk.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(cluster_id),
                                     makepath=True)
            except NodeExistsError:
                found = await self.zk.get(zk_data.CLUSTER_ID_PATH)
        if found is not None:
            cluster_id = zk_data.decode_cluster_id(found[0])
        if local_cluster_id is not None and local_cluster_id != cluster_id:
            raise ClusterIdMismatch(
                f"the cluster id {cluster_id} in ZooKeeper ({self.config.zookeeper_connect}) does not "
                f"match the cluster id {local_cluster_id} in meta.properties of the log dirs: this "
                "log dir belongs to another cluster")
        self.cluster_id = cluster_id
        return cluster_id

    async def load_dynamic_configs(self) -> dict[str, str] | None:
        """The dynamic broker configs in ZooKeeper (before the broker opens its logs): the
        effective props when there are any, else None."""
        await self._load_broker_configs()
        if not (self.dynamic.cluster_default or self.dynamic.per_broker):
            return None
        return self.dynamic.props()

    async def start(self, endpoints: list[tuple[str, str, int]]) -> None:
        """Steps 3-5, once the listeners are bound: `endpoints` are (listener, host, port)."""
        self._endpoints = endpoints
        await self.load_topic_configs()
        self.zk.watch_children(zk_data.CONFIG_CHANGES_PATH, self._config_changes)
        await self._register()
        self.zk.register_state_change_handler(StateChangeHandler(
            "broker-registration", on_new_session=lambda: self._spawn(self._reregister())))
        self.controller.startup()
        self._tasks.append(asyncio.ensure_future(every(
            self.config.replica_high_watermark_checkpoint_interval_ms / 1000,
            self.log_manager.checkpoint_in_background)))

    def _protocols(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, s.protocol) for name, s in self.config.listener_security.items())

    async def _register(self) -> None:
        reg = BrokerRegistration(self.broker_id, tuple(self._endpoints), self.config.broker_rack,
                                 protocols=self._protocols())
        path = zk_data.broker_path(self.broker_id)
        data = reg.encode(int(time.time() * 1000))
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000 * 2 + 5
        announced = False
        while True:
            try:
                try:
                    _path, stat = await self.zk.create(path, data, ephemeral=True)
                    break
                except NodeExistsError:
                    found = await self.zk.get(path)
                    if found is not None and found[1].ephemeralOwner == self.zk.session_id:
                        stat = found[1]  # ours: a create whose answer the connection lost
                        break
            except ZK_RETRIABLE as e:
                # The connection dropped (or the session expired) under the request: kazoo
                # reconnects by itself; try again, as Kafka retries until connected.
                log.info("registering broker %d: %s; retrying", self.broker_id, type(e).__name__)
                await asyncio.sleep(RETRY_BACKOFF_S)
                deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000 * 2 + 5
                continue
            if time.monotonic() > deadline:
                raise KafkaError(f"broker id {self.broker_id} is registered in ZooKeeper by "
                                 "another live broker") from None
            if not announced:
                log.info("broker %d is still registered by an earlier session (a crash?): "
                         "waiting for ZooKeeper to expire it", self.broker_id)
                announced = True
            await asyncio.sleep(0.5)
        self.broker_epoch = stat.czxid
        self.registration = BrokerRegistration(self.broker_id, tuple(self._endpoints),
                                               self.config.broker_rack, stat.czxid,
                                               self._protocols())
        log.info("registered broker %d in ZooKeeper (%s, epoch %d)", self.broker_id,
                 self.config.zookeeper_connect, stat.czxid)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _reregister(self) -> None:
        if self._stopping:
            return
        try:
            await self._register()
        except Exception:
            log.exception("re-registering broker %d failed", self.broker_id)

    def _controller_changed(self, controller_id: int) -> None:
        log.info("the controller is broker %d", controller_id)

    # -- stop ---------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away; retried as Kafka retries it."""
        if not self.config.controlled_shutdown_enable or self.broker_epoch < 0:
            return
        retries = self.config.controlled_shutdown_max_retries
        backoff = self.config.controlled_shutdown_retry_backoff_ms / 1000
        started = time.monotonic()
        for attempt in range(retries + 1):
            try:
                remaining = await self._send_controlled_shutdown()
            except (KafkaClientError, KafkaError) as e:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, e)
                remaining = None
            if remaining == []:
                log.info("controlled shutdown of broker %d done in %.2f s", self.broker_id,
                         time.monotonic() - started)
                return
            if remaining:
                log.info("controlled shutdown: broker %d still leads %s", self.broker_id,
                         [str(tp) for tp in remaining][:10])
            if attempt < retries:
                await asyncio.sleep(min(backoff, 1.0) if remaining is None else backoff)
        log.warning("controlled shutdown of broker %d did not complete; shutting down anyway",
                    self.broker_id)

    async def _send_controlled_shutdown(self) -> list[TopicPartition]:
        channel = self._channel_to_controller()
        if channel is None:
            raise KafkaError("no controller known", ErrorCode.NOT_CONTROLLER)
        response = await channel.request(ControlledShutdownRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch), CONTROLLED_SHUTDOWN_VERSION,
            timeout_s=self.config.request_timeout_ms / 1000)
        if response.error_code != ErrorCode.NONE:
            channel.reset()
            raise KafkaError(f"ControlledShutdown: {ErrorCode(response.error_code).name}",
                             response.error_code)
        return [TopicPartition(p.topic_name, p.partition_index) for p in response.remaining_partitions]

    async def stop(self) -> None:
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        self.alter_partitions.shutdown()
        self.fetchers.shutdown()
        await self.controller.shutdown()
        if self._controller_channel is not None:
            self._controller_channel.close()
        self.forwarding.close()
        await self.zk.close()

    # -- the controller's address ---------------------------------------------------------------
    def record_live_leader(self, broker_id: int, host: str, port: int) -> None:
        """A leader named by LeaderAndIsr: reachable there until UpdateMetadata says more."""
        self.live_leaders[broker_id] = (host, port)

    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        node = self.metadata.broker(broker_id)
        endpoint = node.endpoints.get(self.listener) if node is not None else None
        return endpoint or self.live_leaders.get(broker_id)

    def _controller_id(self) -> int:
        """The controller: ZooKeeper's (the freshest), else the metadata's; -1: none known."""
        controller = self.controller.active_controller_id
        return controller if controller >= 0 else self.metadata.controller_id

    def _channel_to_controller(self) -> BrokerChannel | None:
        controller = self._controller_id()
        if controller < 0:
            return None
        if self._controller_channel is None or self._controller_channel_target != controller:
            if self._controller_channel is not None:
                self._controller_channel.close()
            self._controller_channel = BrokerChannel(
                controller, self._endpoint_of(controller), f"broker-{self.broker_id}-to-controller",
                self.config.inter_broker_login)
            self._controller_channel_target = controller
        return self._controller_channel

    def _endpoint_of(self, broker_id: int) -> Callable[[], tuple[str, int] | None]:
        return lambda: self.broker_endpoint(broker_id) or self._zk_endpoint(broker_id)

    def _zk_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """The controller's address before UpdateMetadata told us (our own, at least)."""
        if broker_id == self.broker_id:
            for name, host, port in self._endpoints:
                if name == self.listener:
                    return host, port
        return None

    # -- topic configs ------------------------------------------------------------------------------
    async def topic_config(self, topic: str) -> LogConfig:
        overrides = await self.admin.read_config("topics", topic)
        self.metadata.set_topic_config(topic, overrides)
        return self._log_config(topic, overrides)

    def _log_config(self, topic: str, overrides: dict[str, str]) -> LogConfig:
        try:
            return LogConfig.from_props(overrides, base=self.default_log_config)
        except ValueError as e:
            log.warning("topic %s: ignoring an invalid config in ZooKeeper: %s", topic, e)
            return self.default_log_config

    async def change_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """AlterConfigs in a cluster: ZooKeeper gets the new overrides and a change
        notification; every broker (this one at once) applies them."""
        await self.admin.change_config("topics", topic, overrides)
        self.metadata.set_topic_config(topic, overrides)
        self.log_manager.update_topic_config(topic, self._log_config(topic, overrides))

    async def alter_broker_config(self, entity: str, values: dict[str, str]) -> None:
        """Dynamic broker configs: ZooKeeper gets the entity's new values (a cluster-wide
        default or one broker's) and a change notification; every broker affected applies
        them from its watch, this one at once."""
        await self.admin.change_config("brokers", entity, values)
        self._broker_config_changed(entity, values)

    def _broker_config_changed(self, entity: str, values: dict[str, str]) -> None:
        if entity not in (DEFAULT_ENTITY, str(self.broker_id)):
            return
        if self.dynamic.layer(entity) == values:
            return
        self.dynamic.set_layer(entity, values)
        self._on_broker_config(self.dynamic.props())

    def reconfigure(self, config: BrokerConfig, default_log_config: LogConfig) -> None:
        """Kafka's Reconfigurable: live changes of the cluster-side keys reach their owners,
        the controller's defaults and the fetchers (re-spread over a new fetcher count); the
        new topic defaults are the base of the logs opened from now on."""
        self.config = config
        self.default_log_config = default_log_config
        self.controller.reconfigure(dataclasses.replace(
            self.controller.config, unclean_leader_election_enable=config.unclean_leader_election_enable))
        if config.num_replica_fetchers != self.fetchers.config.num_replica_fetchers:
            self.fetchers.reconfigure(dataclasses.replace(
                self.fetchers.config, num_replica_fetchers=config.num_replica_fetchers))

    async def _load_broker_configs(self) -> None:
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self.dynamic.set_layer(entity, await self.admin.read_config("brokers", entity))

    async def load_topic_configs(self) -> None:
        """Every topic's overrides from ZooKeeper (/config/topics), into the metadata and
        the LogManager: before the broker opens its logs, so each is loaded with its
        topic's config (as Kafka's LogManager gets the overrides when it is made), and
        again at start (what changed meanwhile), applied to the logs already open."""
        for topic in await self.zk.get_children("/config/topics"):
            overrides = await self.admin.read_config("topics", topic)
            self.metadata.set_topic_config(topic, overrides)
            self.log_manager.update_topic_config(topic, self._log_config(topic, overrides))

    def _config_changes(self, children: list[str]) -> None:
        self._spawn(self._read_config_changes(children))

    async def _read_config_changes(self, children: list[str]) -> None:
        for child in sorted(children):
            try:
                seq = int(child[len(zk_data.CONFIG_CHANGE_PREFIX):])
            except ValueError:
                continue
            if seq <= self._last_config_change:
                continue
            self._last_config_change = seq
            try:
                found = await self.zk.get(f"{zk_data.CONFIG_CHANGES_PATH}/{child}")
            except NoNodeError:
                continue
            entity = zk_data.decode_config_change(found[0]) if found else None
            if entity is None:
                continue
            entity_type, name = entity
            if entity_type == "topics":
                overrides = await self.admin.read_config("topics", name)
                self.metadata.set_topic_config(name, overrides)
                self.log_manager.update_topic_config(name, self._log_config(name, overrides))
            elif entity_type == "brokers":
                self._broker_config_changed(name, await self.admin.read_config("brokers", name))
            elif entity_type in ("users", "clients", zk_data.CLIENT_METRICS_ENTITY, zk_data.GROUP_ENTITY):
                self._on_entity_config(entity_type, name, await self.admin.read_config(entity_type, name))

    # -- users and clients: SCRAM credentials in /config/users/<user>, client quotas in
    # /config/users/<user>, /config/clients/<client-id> and /config/users/<user>/clients/
    # <client-id>, as Kafka's ZooKeeper mode keeps them (names sanitized: zk_data.sanitize)

    async def load_entity_configs(self) -> list[tuple[str, str, dict[str, str]]]:
        """(entity type, name as in ZooKeeper, config) of every user and client entity, and
        of every client metrics subscription (/config/client-metrics) and every group's
        configs (/config/groups)."""
        out = []
        for user in await self.zk.get_children("/config/users"):
            out.append(("users", user, await self.admin.read_config("users", user)))
            for client in await self.zk.get_children(f"/config/users/{user}/clients"):
                name = f"{user}/clients/{client}"
                out.append(("users", name, await self.admin.read_config("users", name)))
        for client in await self.zk.get_children("/config/clients"):
            out.append(("clients", client, await self.admin.read_config("clients", client)))
        for entity_type in (zk_data.CLIENT_METRICS_ENTITY, zk_data.GROUP_ENTITY):
            for name in await self.zk.get_children(f"{zk_data.CONFIG_PATH}/{entity_type}"):
                out.append((entity_type, name, await self.admin.read_config(entity_type, name)))
        return out

    async def change_user_config(self, user: str, changes: Mapping[str, str | None]) -> None:
        """Set (or, for None, remove) keys of a user's config; other keys (quotas) stay."""
        await self.admin.update_config("users", zk_data.sanitize(user),
                                       lambda config: _changed(config, changes))

    async def change_quota_config(self, user: str | None, client: str | None,
                                  changes: Mapping[str, str | None]) -> dict[str, str]:
        """Set (or remove) quota keys of a (user, client id) entity; other keys (SCRAM
        credentials) stay. The entity's config once written."""
        entity_type, name = zk_data.quota_entity_path(user, client)
        return await self.admin.update_config(entity_type, name,
                                              lambda config: _changed(config, changes))

    async def persist_credentials(self, user: str, creds: Mapping[str, ScramCredential]) -> None:
        """ScramCredentialStore's writer in a cluster: a user's credentials after a change."""
        await self.change_user_config(user, {
            m: (creds[m].to_string() if m in creds else None) for m in SCRAM_MECHANISMS})

    async def persist_client_quotas(self, entity: Entity,
                                    ops: Mapping[str, float | None]) -> Mapping[str, float]:
        """ClientQuotas' writer in a cluster: an entity's changes; its quotas once written."""
        written = await self.change_quota_config(
            *entity, {k: None if v is None else quota_string(k, v) for k, v in ops.items()})
        return quota_values(written)

    async def persist_client_metrics(self, name: str, configs: Mapping[str, str]) -> None:
        """The client metrics subscriptions' writer in a cluster: /config/client-metrics/<name>
        (sanitized) and a change notification; every broker applies it from its watch."""
        await self.admin.change_config(zk_data.CLIENT_METRICS_ENTITY, zk_data.sanitize(name),
                                       dict(configs))

    async def persist_group_config(self, group_id: str, overrides: Mapping[str, str]) -> None:
        """The group configs' writer in a cluster: /config/groups/<group id> (sanitized) and
        a change notification; every broker applies it from its watch."""
        await self.admin.change_config(zk_data.GROUP_ENTITY, zk_data.sanitize(group_id), dict(overrides))


def _changed(config: dict[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config
