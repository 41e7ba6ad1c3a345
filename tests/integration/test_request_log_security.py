"""The request log names each request's listener protocol and authenticated principal
(as Kafka's RequestChannel logs them): an SSL connection's certificate name, a SASL
connection's user, User:ANONYMOUS on PLAINTEXT. Real librdkafka clients, an embedded
broker with every listener kind (security_support)."""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest
from confluent_kafka import Producer

from kbroker.broker import Broker
from kbroker.server import request_logger

from .security_support import librdkafka_config
from .tls_support import Pki

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 15
CASES = [
    ("PLAINTEXT", None, None, None, None, "PLAINTEXT", "User:ANONYMOUS"),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", None, "SASL_PLAINTEXT", "User:alice"),
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-scram", None, "SASL_SSL", "User:bob"),
    ("MTLS", None, None, None, "bob", "SSL", "User:CN=bob,O=kbroker tests"),
]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password", "cert", "protocol",
                          "principal"), CASES, ids=[c[0] for c in CASES])
def test_each_line_names_the_listener_protocol_and_principal(
        secure_broker: Broker, pki: Pki, caplog: pytest.LogCaptureFixture, listener: str,
        mechanism: str | None, user: str | None, password: str | None, cert: str | None,
        protocol: str, principal: str) -> None:
    client_id = f"rl-{uuid.uuid4().hex[:8]}"
    conf = librdkafka_config(secure_broker, pki, listener, mechanism, user, password, cert)
    logger = request_logger.request_logger
    level = logger.level
    logger.setLevel(logging.DEBUG)  # records reach caplog's handler on the root
    try:
        producer = Producer({**conf, "client.id": client_id})
        producer.produce(f"rl-{listener.lower()}", b"v")
        assert producer.flush(TIMEOUT) == 0
        deadline = time.monotonic() + TIMEOUT
        while not (lines := [m for m in caplog.messages if "Completed request: Produce" in m
                             and f'clientId="{client_id}"' in m]):
            assert time.monotonic() < deadline, caplog.messages[-5:]
            time.sleep(0.05)
    finally:
        logger.setLevel(level)
    line = lines[0]
    assert f" listener={listener} " in line
    assert re.search(r" securityProtocol=(\S+)", line).group(1) == protocol  # type: ignore[union-attr]
    found = re.search(r" principal=(.+?) errors=", line)
    assert found is not None and found.group(1) == principal, line
