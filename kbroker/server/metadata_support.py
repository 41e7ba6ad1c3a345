"""What differs between a single broker and a ZooKeeper cluster, behind one interface
(Kafka's MetadataSupport: ZkSupport / RaftSupport, asked with requireZkOrThrow).

Handlers ask `support` instead of branching on the mode: which APIs the broker
offers, whether its metadata is ready, whether followers fetch from it, and, for the
APIs only a cluster serves (the controller's and the inter-broker ones),
`require_zk()`, which gives the ZooKeeper side or raises ZkRequired: the handler
then answers what a single broker answers.

    SingleBrokerSupport  no ZooKeeper: the topic registry is the metadata, always ready;
                         dynamic broker configs in files beside the logs
    ZkSupport            the ZkBroker (controller, AdminZkClient, dynamic configs, the
                         forwarding to the controller) and the ZkMetadataCache the
                         controller feeds with UpdateMetadata

Owns: ZkSupport, the requests waiting for the next UpdateMetadata and whether the stray
logs were looked for; otherwise references (the ZkBroker, the cache, the transaction
topic and its coordinator). The wiring (kbroker.broker) builds one of them.
Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbroker.cluster.controller.controller import KafkaController
    from kbroker.cluster.dynamic_config import DynamicBrokerConfig
    from kbroker.cluster.metadata_cache import ZkMetadataCache
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.cluster.zk_admin import AdminZkClient
    from kbroker.cluster.zk_broker import ZkBroker
    from kbroker.common.topic_partition import TopicPartition
    from kbroker.coordinator.transaction_coordinator import TransactionCoordinator
    from kbroker.coordinator.transaction_topic import TransactionTopic
    from kbroker.metadata.dynamic_broker_store import LocalDynamicBrokerConfigs
    from kbroker.protocol.messages.envelope import EnvelopeRequest
    from kbroker.server.api_spec import ApiSpec
    from kbroker.server.config_describe import ConfigSource
    from kbroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class ZkRequired(Exception):
    """The API needs ZooKeeper and this is a single broker (Kafka's requireZkOrThrow)."""


class MetadataSupport(ABC):
    """See the module docstring."""

    # Followers fetch from this broker's leaders (replica_id >= 0 in Fetch, ListOffsets)
    serves_followers = False
    clustered = False  # for reports (the console's overview); handlers ask what they need

    def __init__(self, transaction_topic: TransactionTopic) -> None:
        self.transaction_topic = transaction_topic

    @abstractmethod
    def api_table(self) -> dict[int, ApiSpec]:
        """The APIs this broker answers (ApiVersions lists them)."""

    @abstractmethod
    def require_zk(self) -> ZkSupport:
        """The ZooKeeper side; ZkRequired on a single broker."""

    def metadata_ready(self) -> bool:
        """The broker knows the cluster (a cluster broker: after its first UpdateMetadata)."""
        return True

    @abstractmethod
    async def metadata_changed(self, timeout_s: float) -> None:
        """Return after the next metadata update, or after `timeout_s`."""

    def live_config_keys(self) -> frozenset[str]:
        """The broker configs that change while it runs (DescribeConfigs' read_only)."""
        from kbroker.cluster.dynamic_config import LIVE_KEYS

        return LIVE_KEYS

    def dynamic_config_layers(self) -> list[tuple[ConfigSource, Mapping[str, str]]]:
        """The dynamic broker configs above server.properties, highest first."""
        from kbroker.server.config_describe import ConfigSource

        d = self.dynamic
        return [(ConfigSource.DYNAMIC_BROKER_CONFIG, d.per_broker),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, d.cluster_default),
                (ConfigSource.STATIC_BROKER_CONFIG, d.static)]

    def forwarding(self) -> bool:
        """Requests only the controller answers go to another broker (KIP-590)."""
        return False

    def is_controller(self) -> bool:
        """This broker answers the controller's requests (a single broker always does)."""
        return True

    def inter_broker_listener(self) -> str | None:
        """The listener other brokers reach this one on (None: a single broker)."""
        return None

    async def forward(self, envelope: EnvelopeRequest) -> bytes:
        """The controller's answer (response_data) to a forwarded request: KafkaError
        REQUEST_TIMED_OUT / UNKNOWN_SERVER_ERROR when there is none."""
        raise ZkRequired()

    @property
    @abstractmethod
    def dynamic(self) -> DynamicBrokerConfig:
        """This broker's dynamic config layers (the cluster default, its own)."""

    @abstractmethod
    async def alter_broker_config(self, entity: str, layer: dict[str, str]) -> None:
        """Store a dynamic layer ("<default>" or this broker's id), checked by the caller;
        the broker applies it while running."""

    @abstractmethod
    def ensure_transaction_topic(self) -> bool:
        """__transaction_state exists (or is being created: False)."""


class SingleBrokerSupport(MetadataSupport):
    """No ZooKeeper: this broker is the whole cluster and leads every partition."""

    def __init__(self, transaction_topic: TransactionTopic,
                 txn_coordinator: TransactionCoordinator, api_table: dict[int, ApiSpec],
                 broker_configs: LocalDynamicBrokerConfigs) -> None:
        super().__init__(transaction_topic)
        self.txn_coordinator = txn_coordinator
        self._api_table = api_table
        self._broker_configs = broker_configs

    @property
    def dynamic(self) -> DynamicBrokerConfig:
        """This broker's dynamic config layers, as its log dir's files have them."""
        return self._broker_configs.dynamic

    async def alter_broker_config(self, entity: str, layer: dict[str, str]) -> None:
        self._broker_configs.alter(entity, layer)

    def api_table(self) -> dict[int, ApiSpec]:
        return self._api_table

    def require_zk(self) -> ZkSupport:
        raise ZkRequired()

    async def metadata_changed(self, timeout_s: float) -> None:
        """The registry changes with each admin request: nothing to wait for."""

    def ensure_transaction_topic(self) -> bool:
        """The topic now, and this broker coordinates all its partitions."""
        created = self.transaction_topic.ensure_created()
        if created:
            for index in range(self.transaction_topic.num_partitions):
                if not self.txn_coordinator.owns(index):
                    self.txn_coordinator.on_elected(index, 0)
        return created


class ZkSupport(MetadataSupport):
    """A broker of a ZooKeeper cluster (Kafka's ZkSupport)."""

    serves_followers = True
    clustered = True

    def __init__(self, transaction_topic: TransactionTopic, zk_broker: ZkBroker,
                 metadata_cache: ZkMetadataCache, replica_manager: ReplicaManager,
                 log_manager: LogManager, api_table: dict[int, ApiSpec]) -> None:
        super().__init__(transaction_topic)
        self._api_table = api_table
        self._zk_broker = zk_broker
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self._metadata_waiters: list[asyncio.Future[None]] = []
        self._strays_checked = False

    def api_table(self) -> dict[int, ApiSpec]:
        return self._api_table

    def require_zk(self) -> ZkSupport:
        return self

    def metadata_ready(self) -> bool:
        return self.metadata_cache.ready

    async def metadata_changed(self, timeout_s: float) -> None:
        """Return after the next UpdateMetadata, or after `timeout_s`."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._metadata_waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            if fut in self._metadata_waiters:
                self._metadata_waiters.remove(fut)

    def on_metadata_update(self) -> None:
        """After each UpdateMetadata: wake the requests waiting for it. After the first
        (which names every partition): local logs of topics the cluster no longer has, or
        has under another topic id (deleted, perhaps re-created, while this broker was
        down), are removed once ZooKeeper confirms it (Kafka's stray log detection)."""
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        for partition in self.replica_manager.leader_partitions():
            # a follower that left the live brokers is no longer waited for
            if partition.maybe_increment_high_watermark():
                self.replica_manager.check_and_complete_fetch(partition.topic_partition)
        if self._strays_checked:
            return
        self._strays_checked = True
        suspects = {}
        for tp, lg in self.log_manager.all_logs().items():
            info = self.metadata_cache.get(tp.topic)
            if info is None or (lg.topic_id is not None and info.topic_id != lg.topic_id):
                suspects[tp] = lg.topic_id
        if suspects:
            asyncio.ensure_future(self._remove_strays(suspects))

    async def _remove_strays(self, suspects: dict[TopicPartition, uuid.UUID | None]) -> None:
        doomed = []
        for tp, topic_id in suspects.items():
            try:
                found = await self.admin.read_assignment(tp.topic)
            except Exception:
                log.exception("checking %s in ZooKeeper failed", tp)
                continue
            if tp in self.replica_manager.partitions:
                continue  # the controller gave it to us meanwhile
            if found is None or (topic_id is not None and found[0].topic_id != topic_id):
                doomed.append(tp)
        if doomed:
            log.warning("removing %d stray partition logs of deleted topics: %s", len(doomed),
                        ", ".join(str(tp) for tp in doomed[:10]))
            self.log_manager.delete_logs(doomed)

    def forwarding(self) -> bool:
        return not self.controller.active

    def is_controller(self) -> bool:
        return self.controller.active

    def inter_broker_listener(self) -> str | None:
        return self._zk_broker.listener

    async def forward(self, envelope: EnvelopeRequest) -> bytes:
        return await self._zk_broker.forwarding.forward(envelope)

    def ensure_transaction_topic(self) -> bool:
        """Written to ZooKeeper; the controller elects its leaders (and so coordinators)."""
        return self.transaction_topic.ensure_created()

    @property
    def controller(self) -> KafkaController:
        return self._zk_broker.controller

    @property
    def admin(self) -> AdminZkClient:
        return self._zk_broker.admin

    @property
    def dynamic(self) -> DynamicBrokerConfig:
        """This broker's dynamic config layers, as ZooKeeper has them."""
        return self._zk_broker.dynamic

    def registered(self) -> bool:
        """This broker's registration is in ZooKeeper (/brokers/ids)."""
        return self._zk_broker.registration is not None

    def record_live_leader(self, broker_id: int, host: str, port: int) -> None:
        """A leader named by LeaderAndIsr: reachable there until UpdateMetadata says more."""
        self._zk_broker.record_live_leader(broker_id, host, port)

    async def alter_broker_config(self, entity: str, layer: dict[str, str]) -> None:
        await self._zk_broker.alter_broker_config(entity, layer)

    async def change_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        await self._zk_broker.change_topic_config(topic, overrides)
