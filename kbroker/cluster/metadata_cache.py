"""The cluster as request handlers see it: brokers, the controller, topics and each
partition's leader, replicas and ISR. One interface (ClusterView), two owners:

  * LocalClusterView: a single broker. Its topics are the TopicRegistry's; it leads
    every partition alone (leader epoch 0), except partitions of an offline log dir,
    which have no leader.
  * ZkMetadataCache: cluster mode. Filled only by the controller's UpdateMetadata
    requests (Kafka's MetadataCache): every live broker with its endpoints and rack,
    every partition's state; topic configs come from ZooKeeper (ConfigCache). A
    broker answers Metadata from it, so all brokers answer alike once the controller
    has spoken.

`version` grows with every change, so encoded Metadata entries can be cached per
topic state.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import TopicInfo, TopicRegistry
from kbroker.storage.log_manager import LogManager

LEADER_DURING_DELETE = -2  # UpdateMetadata's leader of a partition being deleted
# How long a Metadata answer still lists a broker after the controller dropped it from
# the live brokers. Kafka's controller announces a dead broker's removal and its
# partitions' new leaders in the same UpdateMetadata; librdkafka (2.10 and later) tears
# down the handle of a broker that leaves the Metadata and parks that broker's partitions
# until its next leader query, a second later, even when the same answer names their new
# leader. Listed a little longer, the dead broker holds no partitions by the time it
# leaves, and the client moves them at once. Other clients only skip a listed broker they
# cannot reach; DescribeCluster and every decision inside the cluster use live brokers.
DEPARTED_LISTED_S = 3.0


@dataclass(frozen=True, slots=True)
class BrokerNode:
    broker_id: int
    endpoints: Mapping[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0


class TopicCatalog(Protocol):
    """Topics by name and id (TopicRegistry on a single broker)."""

    def get(self, name: str) -> TopicInfo | None: ...
    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def __contains__(self, name: object) -> bool: ...
    def __iter__(self) -> Iterator[TopicInfo]: ...
    def __len__(self) -> int: ...
    def names(self) -> list[str]: ...


class ClusterView(Protocol):
    node_id: int

    @property
    def controller_id(self) -> int: ...
    @property
    def version(self) -> int: ...
    def alive_brokers(self) -> list[BrokerNode]: ...
    def listed_brokers(self) -> list[BrokerNode]: ...
    def broker(self, broker_id: int) -> BrokerNode | None: ...
    def partitions(self, info: TopicInfo) -> list[PartitionMetadata]: ...
    def partition(self, tp: TopicPartition) -> PartitionMetadata | None: ...


class LocalClusterView:
    """A single broker: see the module docstring."""

    def __init__(self, node_id: int, rack: str | None, topics: TopicRegistry,
                 log_manager: LogManager, endpoints: Mapping[str, tuple[str, int]]) -> None:
        self.node_id = node_id
        self.rack = rack
        self.topics = topics
        self.log_manager = log_manager
        self.endpoints = endpoints

    @property
    def controller_id(self) -> int:
        return self.node_id

    @property
    def version(self) -> int:
        return len(self.log_manager.failures.offline_dirs)

    def alive_brokers(self) -> list[BrokerNode]:
        return [BrokerNode(self.node_id, dict(self.endpoints), self.rack)]

    def listed_brokers(self) -> list[BrokerNode]:
        return self.alive_brokers()

    def broker(self, broker_id: int) -> BrokerNode | None:
        return self.alive_brokers()[0] if broker_id == self.node_id else None

    def partitions(self, info: TopicInfo) -> list[PartitionMetadata]:
        node = self.node_id
        online = PartitionMetadata(0, node, 0, (node,), (node,))
        out = [online if p == 0 else _with_partition(online, p) for p in range(info.partitions)]
        if self.log_manager.failures.offline_dirs:
            for i, pm in enumerate(out):
                if self.log_manager.is_offline(TopicPartition(info.name, pm.partition)):
                    # Its only replica's log dir failed: no leader, as Kafka reports it.
                    out[i] = PartitionMetadata(pm.partition, -1, 0, (node,), (), (node,))
        return out

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        info = self.topics.get(tp.topic)
        if info is None or not 0 <= tp.partition < info.partitions:
            return None
        return self.partitions(info)[tp.partition]


def _with_partition(pm: PartitionMetadata, p: int) -> PartitionMetadata:
    return PartitionMetadata(p, pm.leader, pm.leader_epoch, pm.replicas, pm.isr)


class ZkMetadataCache:
    """Cluster mode: see the module docstring. Also the broker's TopicCatalog."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._controller_id = -1
        self.controller_epoch = -1
        self._version = 0
        self._brokers: dict[int, BrokerNode] = {}
        self._departed: dict[int, tuple[BrokerNode, float]] = {}  # id -> (node, when it left)
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self._infos: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}  # kept by ZkBroker from ZooKeeper
        self.ready = False  # the controller's first UpdateMetadata has come

    # -- ClusterView
    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def version(self) -> int:
        return self._version

    def alive_brokers(self) -> list[BrokerNode]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, broker_id: int) -> BrokerNode | None:
        return self._brokers.get(broker_id)

    def listed_brokers(self) -> list[BrokerNode]:
        """The brokers a Metadata answer lists: the live ones, and for DEPARTED_LISTED_S
        those that just left (see DEPARTED_LISTED_S)."""
        if not self._departed:
            return self.alive_brokers()
        now = time.monotonic()
        for broker_id, (_, left) in list(self._departed.items()):
            if now - left > DEPARTED_LISTED_S:
                del self._departed[broker_id]
        listed = dict(self._brokers)
        for broker_id, (node, _) in self._departed.items():
            listed.setdefault(broker_id, node)
        return [listed[b] for b in sorted(listed)]

    def partitions(self, info: TopicInfo) -> list[PartitionMetadata]:
        parts = self._partitions.get(info.name, {})
        return [parts[p] for p in sorted(parts)]

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self._partitions.get(tp.topic, {}).get(tp.partition)

    # -- TopicCatalog
    def get(self, name: str) -> TopicInfo | None:
        return self._infos.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._infos.values()))

    def __len__(self) -> int:
        return len(self._infos)

    def names(self) -> list[str]:
        return sorted(self._infos)

    # -- updates (UpdateMetadata, config changes)
    def update(self, controller_id: int, controller_epoch: int, brokers: list[BrokerNode],
               topics: list[tuple[str, uuid.UUID | None, list[PartitionMetadata]]]) -> list[str]:
        """Apply an UpdateMetadata; returns the topics it deleted."""
        self.ready = True
        self._controller_id = controller_id
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        now = time.monotonic()
        brokers_now = {b.broker_id: b for b in brokers}
        for broker_id, node in self._brokers.items():
            if broker_id not in brokers_now:
                self._departed[broker_id] = (node, now)
        for broker_id in brokers_now:
            self._departed.pop(broker_id, None)
        self._brokers = brokers_now
        deleted = []
        for name, topic_id, parts in topics:
            current = self._partitions.setdefault(name, {})
            for pm in parts:
                if pm.leader == LEADER_DURING_DELETE:
                    current.pop(pm.partition, None)
                else:
                    current[pm.partition] = pm
            if not current:
                del self._partitions[name]
                info = self._infos.pop(name, None)
                if info is not None:
                    self._by_id.pop(info.topic_id, None)
                    deleted.append(name)
                continue
            info = self._infos.get(name)
            count = max(current) + 1
            if info is None or (topic_id is not None and info.topic_id != topic_id):
                if info is not None:
                    self._by_id.pop(info.topic_id, None)
                info = TopicInfo(name, topic_id or uuid.uuid4(), count,
                                 dict(self.topic_configs.get(name, {})))
                self._infos[name] = info
                self._by_id[info.topic_id] = info
            else:
                info.partitions = count
        self._version += 1
        return deleted

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        self.topic_configs[topic] = dict(config)
        info = self._infos.get(topic)
        if info is not None:
            info.configs = dict(config)
        self._version += 1
