"""A cluster whose brokers also listen with SASL_PLAINTEXT (PLAIN and both SCRAMs) on a
port of their own; brokers talk to each other on their PLAINTEXT listener (or, with
`inter_broker`, the SASL one). Requests and records as a chosen user through one chosen
broker."""

from __future__ import annotations

from typing import Any

import confluent_kafka

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import free_port
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.integration.wire import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";')


class SaslCluster(Cluster):
    """Each broker also listens with SASL_PLAINTEXT on a port of its own (kept across
    restarts); `jaas` is the PLAIN users' JAAS config, `more_jaas` other mechanisms'
    (mechanism -> config), `inter_broker` the listener brokers talk to each other on."""

    sasl_ports: dict[int, int]
    jaas: str = JAAS
    more_jaas: dict[str, str] = {}  # noqa: RUF012 - read only
    inter_broker: str = "PLAINTEXT"

    def broker_props(self, broker_id: int, port: int, *args: Any, **kwargs: Any) -> dict[str, str]:
        props = super().broker_props(broker_id, port, *args, **kwargs)
        host = args[0] if args else kwargs.get("host")
        if not hasattr(self, "sasl_ports"):
            self.sasl_ports = {}
        sasl_port = self.sasl_ports.setdefault(broker_id, free_port())
        props["listeners"] += f",SASL_PLAINTEXT://{host or self.host}:{sasl_port}"
        props.update({
            "inter.broker.listener.name": self.inter_broker,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": self.jaas,
            **{f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config": j
               for m, j in self.more_jaas.items()},
        })
        return props

    def sasl_bootstrap(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.sasl_ports[broker_id]}"


def call(cluster: SaslCluster, broker_id: int, request: Any, version: int,
         user: str | None = None) -> Any:
    """One request to the broker with kbroker's wire client: on its PLAINTEXT listener
    (User:ANONYMOUS), or as `user` (password `<user>-secret`) on its SASL listener (PLAIN)."""
    if user is None:
        with WireClient(cluster.brokers[broker_id].bootstrap, timeout=30) as c:
            return c.call(request, version)
    with WireClient(cluster.sasl_bootstrap(broker_id), timeout=30) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = f"\0{user}\0{user}-secret".encode()
        assert c.call(SaslAuthenticateRequest(auth_bytes=token), 2).error_code == 0
        return c.call(request, version)


def client_conf(cluster: SaslCluster, broker_id: int, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.sasl_bootstrap(broker_id),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0}


def produce_one(cluster: SaslCluster, broker_id: int, user: str, topic: str,
                partition: int) -> int | None:
    """Produce one record as `user` through broker `broker_id` alone (its bootstrap):
    the delivery's error code, None when delivered."""
    errors: list[Any] = []
    producer = confluent_kafka.Producer({**client_conf(cluster, broker_id, user), "acks": "all",
                                         "message.timeout.ms": 8000, "retries": 0})
    producer.produce(topic, b"v", partition=partition, on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    if not errors:
        return ErrorCode.REQUEST_TIMED_OUT
    return None if errors[0] is None else errors[0].code()
