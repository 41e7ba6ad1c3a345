"""Why a tool's plain connection failed: whether the listener wants TLS or SASL.

A Kafka listener whose protocol is SSL, SASL_PLAINTEXT or SASL_SSL closes a connection
that does not start TLS (a ClientHello) or SASL (SaslHandshake before other requests),
and librdkafka then reports the same `_TRANSPORT: Broker transport failure` as for a
dead port. After such a failure the tools ask the listener itself, over two short
connections (kbroker's own client, any Kafka broker):

    1. TLS: a ClientHello, certificates not checked (what is asked is only whether
       the listener speaks TLS); a handshake that completes means SSL or SASL_SSL.
    2. Over TLS if it completed, else plain: ApiVersions (allowed before SASL) and then
       Metadata; a listener that answers the first and closes on the second wants SASL.

`needed_protocol(host, port, timeout_s)` is the security.protocol the listener wants
(SSL, SASL_PLAINTEXT, SASL_SSL), or None when it answers PLAINTEXT Metadata or cannot
be reached at all (then the tool's own error stands).
"""

from __future__ import annotations

import ssl

from kbroker.client import ConnectionSecurity
from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.metadata import MetadataRequest

CLIENT_ID = "kbroker-tools-probe"
PROBE_TIMEOUT_S = 5.0


def needed_protocol(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """See the module docstring."""
    tls = _unverified_tls()
    try:
        conn = BrokerConnection(host, port, CLIENT_ID, timeout_s, security=tls)
    except KafkaClientError:  # no TLS there (or nothing at all): try plain
        try:
            conn = BrokerConnection(host, port, CLIENT_ID, timeout_s)
        except KafkaClientError:
            return None
        uses_tls = False
    else:
        uses_tls = True
    with conn:
        try:
            conn.request(MetadataRequest(topics=[]), conn.version_for(ApiKey.METADATA, 1, 12))
        except KafkaClientError:
            return "SASL_SSL" if uses_tls else "SASL_PLAINTEXT"
    return "SSL" if uses_tls else None


def _unverified_tls() -> ConnectionSecurity:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return ConnectionSecurity("SSL", ssl_context=context)


def hint(tool: str, host: str, port: int, protocol: str) -> str:
    """The line a tool prints: what the listener wants, and the option that sets it."""
    wants = {"SSL": "TLS", "SASL_PLAINTEXT": "SASL authentication",
             "SASL_SSL": "TLS and SASL authentication"}[protocol]
    keys = ["security.protocol=" + protocol]
    if protocol != "SSL":
        keys += ["sasl.mechanism", "sasl.jaas.config"]
    if protocol != "SASL_PLAINTEXT":
        keys += ["ssl.truststore.location"]
    return (f"kbroker {tool}: the listener at {host}:{port} closed the connection because the "
            f"client did not start {wants}: it is a {protocol} listener. Give the client "
            f"settings with --command-config FILE ({', '.join(keys)}), as for Kafka's tools")
