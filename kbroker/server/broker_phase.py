"""BrokerPhase: where a broker is in its life (Kafka's BrokerState, the lifecycle enum).

Owns: nothing; the Broker (kbroker.broker) holds its current phase, the operations
listener (kbroker.ops) reads it. Here, below both, so that neither imports the other's
wiring.
"""

from __future__ import annotations

import enum


class BrokerPhase(enum.IntEnum):
    """Where the broker is in its life: Kafka's BrokerState values (the metric
    kafka.server:type=KafkaServer,name=BrokerState); /readyz answers ready in RUNNING only."""

    NOT_RUNNING = 0
    STARTING = 1  # cluster mode: connecting to ZooKeeper
    RECOVERY = 2  # loading (and, after an unclean shutdown, recovering) the logs
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7
