"""The internal compacted topic __transaction_state: where transaction coordinators keep
the state of every transactional id (records in transaction_log.py's formats).

A transactional id lives in partition `abs(java_hash(id)) % transaction.state.log.num.partitions`
(InternalTopic has how records are written, replicated and read back); its coordinator is
the leader of that partition. Created on first need (FindCoordinator for a transactional
id) with Kafka's settings: `cleanup.policy=compact`, uncompressed, unclean leader election
off, `transaction.state.log.segment.bytes`, `.replication.factor` and `.min.isr` (a single
broker keeps one replica and needs one in sync). Every write is acks=all.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

from kbroker.coordinator.internal_topic import InternalTopic

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


class TransactionTopic(InternalTopic):
    name = TRANSACTION_STATE_TOPIC_NAME

    @property
    def configured_partitions(self) -> int:
        return self.broker.config.transaction_state_log_num_partitions

    @property
    def configured_replication_factor(self) -> int:
        return self.broker.config.transaction_state_log_replication_factor

    @property
    def min_insync_replicas(self) -> int:
        return self.broker.config.transaction_state_log_min_isr if self.broker.clustered else 1

    def topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(self.min_insync_replicas),
            "segment.bytes": str(self.broker.config.transaction_state_log_segment_bytes),
        }
