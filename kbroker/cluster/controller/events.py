"""The controller's events (Kafka's ControllerEvent classes): one small frozen class per
event; KafkaController's event loop processes them one at a time, in the order queued.

  from ZooKeeper watches                    from requests (answered through a future)
    ControllerChange   /controller            AlterPartitionReceived  AlterPartition
    BrokerChange       /brokers/ids           ControlledShutdown      ControlledShutdown
    TopicChange        /brokers/topics        ReplicaLeaderElection   ElectLeaders (or the
    PartitionModifications  a topic's znode                           znode, zk_triggered)
    TopicDeletion      /admin/delete_topics   ApiPartitionReassignment
    ZkPartitionReassignment                                           AlterPartitionReassignments
                       /admin/reassign_partitions
    ReplicaLeaderElection(zk_triggered=True)  from the controller's own timer
                       /admin/preferred_replica_election
                                              AutoPreferredReplicaLeaderElection

Owns nothing: values. Lock: none needed (immutable).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.common.topic_partition import TopicPartition

PREFERRED = 0  # ElectLeaders' election types
UNCLEAN = 1


class ControllerEvent:
    """The base of every event."""

    __slots__ = ()


@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """/controller changed (or this broker starts, or another took over): elect or follow."""


@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """The children of /brokers/ids changed: brokers started, died or restarted."""


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """The children of /brokers/topics changed: topics created or gone."""


@dataclass(frozen=True)
class PartitionModifications(ControllerEvent):
    """A topic's assignment znode changed (partitions added)."""

    topic: str


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """The children of /admin/delete_topics changed."""


@dataclass(frozen=True)
class ZkPartitionReassignment(ControllerEvent):
    """/admin/reassign_partitions changed."""


@dataclass(frozen=True)
class ReplicaLeaderElection(ControllerEvent):
    """Elect leaders: of `partitions` (None: every partition) for ElectLeaders, or of
    those /admin/preferred_replica_election names when zk_triggered."""

    election_type: int = PREFERRED
    partitions: tuple[TopicPartition, ...] | None = None
    zk_triggered: bool = False


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """leader.imbalance.check.interval.seconds went by: give preferred leaders back."""


@dataclass(frozen=True)
class AlterPartitionReceived(ControllerEvent):
    """A leader's ISR changes: (partition, leader epoch, partition epoch, new ISR) each."""

    broker_id: int
    broker_epoch: int
    items: tuple[tuple[TopicPartition, int, int, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker about to stop asks for its leaderships to move."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: partition -> target replicas (None: cancel); v1's
    allow_replication_factor_change false refuses a target of another size."""

    moves: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    allow_replication_factor_change: bool = True
