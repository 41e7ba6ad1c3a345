"""The client's side of a secured connection: TLS from a caller's SSLContext, then SASL.

`ConnectionSecurity` says what a BrokerConnection does after connecting, as Kafka's
`security.protocol` does: PLAINTEXT (nothing), SSL (a TLS handshake with
`ssl_context`, checking the broker's name against its certificate when the context
says so), SASL_PLAINTEXT or SASL_SSL (then SaslHandshake v1 and SaslAuthenticate
with the mechanism, as Kafka's clients authenticate).

Mechanisms: PLAIN (RFC 4616: one token, `NUL user NUL password`) here; SCRAM-SHA-256 /
SCRAM-SHA-512 through the caller's `scram` factory (kbroker.security.scram's
ScramClient, which this layer cannot import), any object whose step(challenge) gives
the next token (None: done) and raises SaslClientError when the broker's answer does
not prove it knows the password. A failed authentication raises AuthenticationError,
which callers do not retry.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["MECHANISMS", "PROTOCOLS", "ConnectionSecurity", "PlainClient", "SaslClient",
           "SaslClientError", "is_sasl", "is_tls"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClient(Protocol):
    def step(self, challenge: bytes | None) -> bytes | None: ...


def is_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def is_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ConnectionSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None  # SSL, SASL_SSL
    sasl_mechanism: str = "PLAIN"  # SASL_*
    username: str = ""
    password: str = field(default="", repr=False)
    # SCRAM: (mechanism, username, password) -> a SaslClient
    scram: Callable[[str, str, str], SaslClient] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol!r} is not one of {PROTOCOLS}")
        if self.uses_tls and self.ssl_context is None:
            raise ValueError(f"{self.protocol} needs an ssl_context")
        if self.uses_sasl and self.sasl_mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.sasl_mechanism!r} is not one of {MECHANISMS}")
        if self.uses_sasl and self.sasl_mechanism != "PLAIN" and self.scram is None:
            raise ValueError(f"{self.sasl_mechanism} needs a scram client factory")

    @property
    def uses_tls(self) -> bool:
        return is_tls(self.protocol)

    @property
    def uses_sasl(self) -> bool:
        return is_sasl(self.protocol)

    def sasl_client(self) -> SaslClient:
        if self.sasl_mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        assert self.scram is not None
        return self.scram(self.sasl_mechanism, self.username, self.password)


class SaslClientError(Exception):
    """The broker's SASL answer is malformed or does not prove it knows the password."""


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def step(self, challenge: bytes | None) -> bytes | None:
        """The next token for the broker (None: done). `challenge`: None at first."""
        if challenge is None:
            return self._token
        self.complete = True
        return None
