"""The server side of SASL/OAUTHBEARER (RFC 7628, KIP-255), as Kafka's OAuthBearerSaslServer.

Owns one exchange's state (loop thread only, like the other SaslServers of
kbroker.security.sasl). The client's initial response is RFC 7628's

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]...\\x01

(`parse_initial_response`, Kafka's OAuthBearerClientInitialResponse grammar: keys are
letters, values printable ASCII, `auth` is not an extension). The token goes to the
listener's TokenValidator (kbroker.security.oauth_validators). A valid one completes
the exchange as the token's principal (`User:<principal>` for ACLs); an authzid must
equal it. An invalid one is answered, as RFC 7628 section 3.2.2 says, with a JSON error
challenge (`{"status":"invalid_token"}`, with `scope` for insufficient_scope); the
client acknowledges it with a single `\\x01` and the exchange fails with that JSON as
the message. A malformed response fails with Kafka's generic message.

`credential_lifetime_ms` (once complete) is the time left before the token expires:
the authenticator bounds the session with it (Kafka's CREDENTIAL_LIFETIME_MS).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

SEPARATOR = "\x01"
# Kafka's OAuthBearerClientInitialResponse grammar: SASLNAME is \x01-\x7F but '=' and ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
AUTH_KEY = "auth"
GENERIC_FAILURE = ("Authentication failed during authentication due to invalid credentials "
                   "with SASL mechanism OAUTHBEARER")


class InitialResponseError(ValueError):
    """A malformed client first message (Kafka's SaslException): the text is for the log."""


@dataclass(frozen=True)
class InitialResponse:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def parse_initial_response(data: bytes) -> InitialResponse:
    text = data.decode("utf-8", errors="replace")
    m = _INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for kv in m.group("kvpairs").split(SEPARATOR):
        if kv:
            key, _, value = kv.partition("=")
            pairs[key] = value
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise InitialResponseError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        raise InitialResponseError("Invalid scheme in OAUTHBEARER client first message: "
                                   f"{am.group('scheme')[:32]}")
    return InitialResponse(am.group("token"), m.group("authzid") or "", pairs)


@dataclass(frozen=True)
class OAuthToken:
    """A validated token: who (`principal`), until when (`lifetime_ms`, epoch ms, the
    `exp` claim), since when (`start_ms`, `iat`, or None) and its `scope`."""

    value: str = field(repr=False)
    principal: str
    lifetime_ms: int
    start_ms: int | None
    scope: frozenset[str] = frozenset()


class TokenInvalid(Exception):
    """Validation failed: `status` (invalid_token, insufficient_scope), the `scope` and
    `openid_configuration` of RFC 7628's error; the text is for the broker's log only."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None,
                 openid_configuration: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.scope, self.openid_configuration = status, scope, openid_configuration

    def json(self) -> str:
        """Kafka's rendering of the error challenge (OAuthBearerSaslServer.jsonErrorResponse)."""
        out = f'{{"status":"{self.status}"'
        if self.scope is not None:
            out += f', "scope":"{self.scope}"'
        if self.openid_configuration is not None:
            out += f', "openid-configuration":"{self.openid_configuration}"'
        return out + "}"


class TokenValidator(Protocol):
    def validate(self, token: str) -> OAuthToken: ...

    def now_ms(self) -> int: ...


class OAuthFailure(Exception):
    """The exchange failed; the text is the client's message (kbroker.security.sasl turns
    it into its SaslFailure)."""


class OAuthBearerServer:
    """One OAUTHBEARER exchange; `evaluate` raises OAuthFailure."""

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._error: str | None = None  # the JSON challenge sent, awaiting the client's \x01
        self.complete = False
        self.username: str | None = None
        self.token: OAuthToken | None = None
        self.extensions: dict[str, str] = {}

    @property
    def credential_lifetime_ms(self) -> int | None:
        if self.token is None:
            return None
        return self.token.lifetime_ms - self._validator.now_ms()

    def evaluate(self, data: bytes) -> bytes:
        if self.complete:
            raise OAuthFailure("OAUTHBEARER exchange already complete")
        if data == b"\x01" and self._error is not None:
            raise OAuthFailure(self._error)
        self._error = None
        try:
            response = parse_initial_response(data)
        except InitialResponseError:
            raise OAuthFailure(GENERIC_FAILURE) from None
        try:
            token = self._validator.validate(response.token)
        except TokenInvalid as e:
            log.info("OAUTHBEARER token refused (%s): %s", e.status, e)
            self._error = e.json()
            return self._error.encode()
        if response.authorization_id and response.authorization_id != token.principal:
            raise OAuthFailure(
                f"Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal "
                f"name ({token.principal})")
        # Kafka's validators accept every extension (they are negotiated properties)
        self.token, self.extensions = token, response.extensions
        self.username, self.complete = token.principal, True
        return b""
