"""The server side of SASL mechanisms: PLAIN (RFC 4616), SCRAM (kbroker.security.scram) and
OAUTHBEARER (kbroker.security.oauthbearer, with the listener's token validator).

`authenticator(mechanism, ...)` gives an object whose `evaluate(token)` returns the
next challenge and raises SaslFailure when authentication fails (its message is what
Kafka sends the client); `complete` and `username` tell the outcome, and
`credential_lifetime_ms` how long the credential has left (OAUTHBEARER's token; None:
no bound), which bounds the session as Kafka's CREDENTIAL_LIFETIME_MS does.

PLAIN's token is `[authzid] NUL authcid NUL password` (UTF-8); the password is
compared with the JAAS config's `user_<authcid>` in constant time, also when the
user does not exist (against a dummy), so the answer's timing tells nothing.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Protocol

from kbroker.security.oauthbearer import OAuthBearerServer, OAuthFailure, TokenValidator
from kbroker.security.scram import MECHANISMS, ScramCredential, ScramError, ScramServer


class SaslFailure(Exception):
    """Authentication failed: Kafka's SaslAuthenticationException, the message for the client."""


class SaslServer(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    @property
    def credential_lifetime_ms(self) -> int | None: ...

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    credential_lifetime_ms = None

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("PLAIN exchange already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens, got "
                              f"{len(parts)}")
        try:
            authzid, authcid, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not authcid:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(authcid)
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None
                                                     else "\0" + password).encode())
        if expected is None or not ok:
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != authcid:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        self.username, self.complete = authcid, True
        return b""


class ScramSaslServer:
    credential_lifetime_ms = None

    def __init__(self, mechanism: str,
                 lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._scram = ScramServer(mechanism, lambda user: lookup(user, mechanism))

    @property
    def complete(self) -> bool:
        return self._scram.complete

    @property
    def username(self) -> str | None:
        return self._scram.username if self._scram.complete else None

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._scram.evaluate(token)
        except ScramError as e:
            if self._scram.username is not None or "credentials" in str(e):
                raise SaslFailure(f"Authentication failed during authentication due to invalid "
                                  f"credentials with SASL mechanism {self.mechanism}") from None
            raise SaslFailure(str(e)) from None


class OAuthBearerSaslServer:
    def __init__(self, validator: TokenValidator) -> None:
        self._server = OAuthBearerServer(validator)

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def username(self) -> str | None:
        return self._server.username

    @property
    def credential_lifetime_ms(self) -> int | None:
        return self._server.credential_lifetime_ms

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._server.evaluate(token)
        except OAuthFailure as e:
            raise SaslFailure(str(e)) from None


def authenticator(mechanism: str, plain_users: Mapping[str, str],
                  scram_lookup: Callable[[str, str], ScramCredential | None],
                  oauth_validator: TokenValidator | None = None) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainServer(plain_users)
    if mechanism in MECHANISMS:
        return ScramSaslServer(mechanism, scram_lookup)
    if mechanism == "OAUTHBEARER" and oauth_validator is not None:
        return OAuthBearerSaslServer(oauth_validator)
    raise ValueError(mechanism)
