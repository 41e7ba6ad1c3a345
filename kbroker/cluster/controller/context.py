"""ControllerContext: what the active controller knows (Kafka's ControllerContext), loaded
from ZooKeeper when it takes over and kept in step with its own writes and its watches.

    brokers         live brokers: id -> registration (with the broker epoch)
    shutting_down   brokers in a controlled shutdown (alive, but no longer leaders)
    assignments     topic -> its assignment (replicas per partition, a reassignment's
                    adding and removing replicas)
    states          partition -> leader, leader epoch, ISR, controller epoch, zk version

One context lives as long as its controller: reset() empties it when the broker becomes
the controller (with the new epoch) and when it resigns.

Lock: the controller's event processing (one event at a time, on the loop).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.topic_partition import TopicPartition

# The epoch's zk version of a broker that is not the controller: no /controller_epoch
# has it, so every write guarded by it fails (ZooKeeper's -1 would match any version
# and let a resigned controller's write through).
NO_EPOCH_ZK_VERSION = -2


@dataclass
class ControllerContext:
    controller_id: int
    listener: str
    epoch: int = 0
    epoch_zk_version: int = NO_EPOCH_ZK_VERSION
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    deleted_topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)

    def reset(self, epoch: int = 0, epoch_zk_version: int = NO_EPOCH_ZK_VERSION) -> None:
        """Forget everything: a new term as controller (epoch > 0), or none."""
        self.epoch, self.epoch_zk_version = epoch, epoch_zk_version
        self.brokers = {}
        self.shutting_down = set()
        self.assignments = {}
        self.states = {}
        self.deleted_topic_ids = {}

    @property
    def live(self) -> set[int]:
        """Brokers that may lead: alive and not shutting down."""
        return set(self.brokers) - self.shutting_down

    def replicas(self, tp: TopicPartition) -> list[int]:
        a = self.assignments.get(tp.topic)
        return list(a.partitions.get(tp.partition, [])) if a is not None else []

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, a in self.assignments.items() for p in a.partitions]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        a = self.assignments.get(topic)
        return [TopicPartition(topic, p) for p in sorted(a.partitions)] if a is not None else []

    def partitions_on(self, broker: int) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, a in self.assignments.items()
                for p, replicas in a.partitions.items() if broker in replicas]

    def live_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if r in self.brokers]

    def reassigning(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, a in self.assignments.items()
                for p in set(a.adding) | set(a.removing)]
