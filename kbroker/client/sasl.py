"""The client's side of a secured connection: TLS from a caller's SSLContext, then SASL.

`ConnectionSecurity` says what a BrokerConnection does after connecting, as Kafka's
`security.protocol` does: PLAINTEXT (nothing), SSL (a TLS handshake with
`ssl_context`, checking the broker's name against its certificate when the context
says so), SASL_PLAINTEXT or SASL_SSL (then SaslHandshake v1 and SaslAuthenticate
with the mechanism, as Kafka's clients authenticate).

Mechanisms: PLAIN (RFC 4616: one token, `NUL user NUL password`) and SCRAM-SHA-256 /
SCRAM-SHA-512 (RFC 5802, RFC 7677: client-first, client-final; the server's
signature is checked, so a broker that does not know the password cannot pretend).
A failed authentication raises AuthenticationError, which callers do not retry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from dataclasses import dataclass, field

__all__ = ["MECHANISMS", "PROTOCOLS", "ConnectionSecurity", "PlainClient", "ScramClient",
           "is_sasl", "is_tls"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *_SCRAM_HASHES)


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

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol!r} is not one of {PROTOCOLS}")
        if self.uses_tls and self.ssl_context is None:
            raise ValueError(f"{self.protocol} needs an ssl_context")
        if self.uses_sasl and self.sasl_mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {self.sasl_mechanism!r} is not one of {MECHANISMS}")

    @property
    def uses_tls(self) -> bool:
        return is_tls(self.protocol)

    @property
    def uses_sasl(self) -> bool:
        return is_sasl(self.protocol)

    def sasl_client(self) -> PlainClient | ScramClient:
        if self.sasl_mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(self.sasl_mechanism, self.username, self.password)


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


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._hash = _SCRAM_HASHES[mechanism]
        self._password = password.encode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""
        self._state = 0
        self.complete = False

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self._hash).digest()

    def step(self, challenge: bytes | None) -> bytes | None:
        if self._state == 0:
            self._state = 1
            return f"n,,{self._first_bare}".encode()
        if self._state == 1:
            self._state = 2
            return self._final(challenge or b"")
        if self._state == 2:
            attrs = _attributes(challenge or b"")
            if "e" in attrs:
                raise SaslClientError(f"the broker refused the SCRAM proof: {attrs['e']}")
            signature = base64.b64decode(attrs.get("v", ""))
            if not hmac.compare_digest(signature, self._server_signature):
                raise SaslClientError("the broker's SCRAM signature is wrong: it does not "
                                      "know the password")
            self._state, self.complete = 3, True
            return None
        raise SaslClientError("SCRAM exchange already complete")

    def _final(self, server_first: bytes) -> bytes:
        attrs = _attributes(server_first)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise SaslClientError("invalid SCRAM server-first message")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, base64.b64decode(salt),
                                     int(iterations))
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first.decode()},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise SaslClientError("invalid SCRAM message") from None
    return {item[0]: item[2:] for item in text.split(",") if len(item) >= 2 and item[1] == "="}
