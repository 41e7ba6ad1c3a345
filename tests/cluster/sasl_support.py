"""A cluster whose brokers also listen with SASL_PLAINTEXT (PLAIN and both SCRAMs) on a
port of their own; brokers talk to each other on their PLAINTEXT listener."""

from __future__ import annotations

import socket
from typing import Any

from kbroker.cluster.local_cluster import Cluster

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SaslCluster(Cluster):
    """Each broker also listens with SASL_PLAINTEXT on a port of its own (kept across
    restarts); `jaas` is the PLAIN users' JAAS config."""

    sasl_ports: dict[int, int]
    jaas: str = JAAS

    def broker_props(self, broker_id: int, port: int, *args: Any, **kwargs: Any) -> dict[str, str]:
        props = super().broker_props(broker_id, port, *args, **kwargs)
        host = args[0] if args else kwargs.get("host")
        if not hasattr(self, "sasl_ports"):
            self.sasl_ports = {}
        sasl_port = self.sasl_ports.setdefault(broker_id, free_port())
        props["listeners"] += f",SASL_PLAINTEXT://{host or self.host}:{sasl_port}"
        props.update({
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": self.jaas,
        })
        return props

    def sasl_bootstrap(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.sasl_ports[broker_id]}"
