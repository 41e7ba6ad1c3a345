"""A broker with every kind of listener, and client settings for each, for the security tests.

    PLAINTEXT        no authentication (User:ANONYMOUS)
    SSL              TLS, client certificate requested (User:<mapped DN> or ANONYMOUS)
    MTLS             SSL with ssl.client.auth=required (listener.name.mtls.*)
    SASL_PLAINTEXT   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    SASL_SSL         the same over TLS

PLAIN users (JAAS): admin/admin-secret, alice/alice-secret. SCRAM users, made with
AlterUserScramCredentials over PLAINTEXT: alice/alice-scram (both mechanisms),
bob/bob-scram (SCRAM-SHA-512 only).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker

from .tls_support import KEY_PASSWORD, Pki, make_pki

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_USERS = {("alice", "SCRAM-SHA-256"): "alice-scram", ("alice", "SCRAM-SHA-512"): "alice-scram",
               ("bob", "SCRAM-SHA-512"): "bob-scram"}


def security_props(pki: Pki, log_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,"
                     "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "log.dirs": str(log_dir),
        "group.initial.rebalance.delay.ms": "0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.encrypted_keystore("server")),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        **extra,
    }


def endpoint(broker: Broker, listener: str) -> str:
    for bl in broker.server.listeners:
        if bl.name == listener:
            return f"127.0.0.1:{bl.port}"
    raise KeyError(listener)


def add_scram_users(broker: Broker) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": endpoint(broker, "PLAINTEXT")})
    mech = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    ups = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech[m], 4096), pw.encode())
           for (user, m), pw in SCRAM_USERS.items()]
    for future in admin.alter_user_scram_credentials(ups).values():
        future.result(timeout=30)


def produce_for(producer: Any, topic: str, seconds: float) -> list[Any]:
    """Produce to `topic` for `seconds` (polling, which also serves re-authentication and
    token refreshes), then flush: the delivery errors (None for each delivered record)."""
    errors: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda e, m: errors.append(e))
        producer.poll(0.05)
    assert producer.flush(15) == 0
    return errors


def librdkafka_config(broker: Broker, pki: Pki, listener: str, mechanism: str | None = None,
                      user: str | None = None, password: str | None = None,
                      cert: str | None = None) -> dict[str, Any]:
    protocol = {"MTLS": "SSL"}.get(listener, listener)
    conf: dict[str, Any] = {"bootstrap.servers": endpoint(broker, listener),
                            "security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(pki.ca)
    if cert is not None:
        conf["ssl.certificate.location"] = str(pki.cert(cert))
        conf["ssl.key.location"] = str(pki.key(cert))
    if mechanism is not None:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return conf


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(security_props(pki, tmp_path_factory.mktemp("logs"))).start()
    try:
        add_scram_users(broker)
        yield broker
    finally:
        broker.stop()
