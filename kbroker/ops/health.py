"""Health and readiness of a broker, as /healthz and /readyz answer them.

Alive (/healthz): the process serves HTTP from the broker's loop, in whatever phase;
the body says which (BrokerPhase, Kafka's BrokerState names).

Ready (/readyz): every check passes:

    logs_loaded          the logs are loaded (and recovered after an unclean shutdown)
    listeners_bound      every Kafka listener accepts connections
    registered           cluster mode: this broker is registered in ZooKeeper (and its
                         session is not fenced); a single broker: always
    log_dirs_online      at least one log dir is online
    not_shutting_down    no shutdown has begun

Both read the Broker's fields and nothing that a worker thread is changing: while the
logs load, the checks read only the phase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbroker.server.metadata_support import ZkRequired

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker


def health(broker: ServedBroker) -> dict[str, Any]:
    return {"status": "alive", "phase": broker.phase.name, "node_id": broker.config.node_id}


def readiness(broker: ServedBroker) -> tuple[bool, dict[str, Any]]:
    from kbroker.server.broker_phase import BrokerPhase

    phase = broker.phase
    loaded = phase >= BrokerPhase.RUNNING
    state, server = broker.services, broker.server
    running = phase is BrokerPhase.RUNNING and state is not None and server is not None
    checks: dict[str, bool] = {
        "logs_loaded": loaded,
        "listeners_bound": bool(running and server.listeners),
        "registered": bool(running and _registered(broker)),
        "log_dirs_online": bool(running and state is not None and state.log_manager.online_dirs),
        "not_shutting_down": phase < BrokerPhase.PENDING_CONTROLLED_SHUTDOWN,
    }
    ready = all(checks.values())
    return ready, {"status": "ready" if ready else "not ready", "phase": phase.name,
                   "checks": checks}


def _registered(broker: ServedBroker) -> bool:
    state = broker.services
    assert state is not None
    try:
        zk = state.support.require_zk()
    except ZkRequired:
        return True
    return zk.registered() and not state.replica_manager.zk_fenced
