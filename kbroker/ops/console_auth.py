"""Who is asking the web console, and the Kafka authorization of what they ask.

The console (/, /api/ and /login) treats its user as the Kafka listeners treat a client:

- With HTTP Basic credentials (RFC 7617), the user is `User:<name>` once the password is
  checked as the broker's SASL listeners check it: against a SCRAM credential the
  broker holds (AlterUserScramCredentials; the password is salted and hashed with the
  credential's own salt and iterations, SCRAM-SHA-512 then SCRAM-SHA-256, and the
  stored key compared) or a PLAIN user of a listener's JAAS config (`user_<name>`),
  each compared in constant time. A wrong name or password is a 401, as a failed
  SaslAuthenticate closes the connection.
- Without credentials, the user is User:ANONYMOUS, but only while some Kafka listener
  lets anyone in as ANONYMOUS (PLAINTEXT, or SSL with ssl.client.auth none or
  requested); when every listener asks who the client is (SASL, or SSL with
  ssl.client.auth=required), the console asks too: a 401 with a Basic challenge, which a
  browser answers with its sign-in dialog. /login always asks (a way to sign in where
  ANONYMOUS is let in) and then sends the browser back to the console.

What the user then sees and does is authorized by the broker's authorizer as the Kafka
APIs that show or do the same authorize it (no authorizer: everything, as on the
Kafka listeners); see console_api and console_admin for each URL. /metrics, /healthz,
/readyz and /static/ ask no one, as the Prometheus JMX exporter beside a Kafka broker
does not: they carry figures and topic names, never records.

Checking a password costs a PBKDF2 of the credential's iterations (4096 at least, a few
milliseconds on the loop); a browser sends its credentials with every request, so a
checked (name, password) pair is remembered for VERIFIED_S, by its SHA-256 only, and
forgotten at once when the user's credentials change (the entry records which
credentials it was checked against).

Loop thread only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from kbroker.security.principal import ANONYMOUS, KafkaPrincipal
from kbroker.security.scram import MECHANISMS, credential_from_salted_password, salted_password
from kbroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker
    from kbroker.server.request_services import RequestServices

REALM = "kbroker console"
VERIFIED_S = 60.0
VERIFIED_ENTRIES = 1024
PRINCIPAL = web.RequestKey("kbroker.console.principal", KafkaPrincipal)  # the user
# the console's pages and data; everything else is open (see the module docstring)
GUARDED_PREFIXES = ("/api/", "/login")
CONSOLE_API_KEY = -1  # a RequestContext built for a console read names no Kafka API


class ConsoleAuth:
    """See the module docstring. `middleware` guards the console's URLs."""

    def __init__(self, broker: ServedBroker) -> None:
        self.broker = broker
        # sha256(name NUL password) -> (until, what it was checked against)
        self._verified: dict[bytes, tuple[float, object]] = {}

    @property
    def anonymous_allowed(self) -> bool:
        """Whether some Kafka listener lets a client in as ANONYMOUS."""
        for security in self.broker.config.listener_security.values():
            if security.sasl:
                continue
            if not security.tls or security.ssl is None or security.ssl.client_auth != "required":
                return True
        return False

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
        path = request.path
        if not (path == "/" or path.startswith(GUARDED_PREFIXES)):
            return await handler(request)
        principal = self.principal(request)
        if principal is None or principal == ANONYMOUS and path == "/login":
            return _challenge("a name and password the broker's SASL listeners accept"
                              if principal is None or request.headers.get("Authorization")
                              else "sign in")
        request[PRINCIPAL] = principal
        if path == "/login":
            raise web.HTTPFound("/")
        return await handler(request)

    def principal(self, request: web.Request) -> KafkaPrincipal | None:
        """The user, or None when they must (again) give a name and password."""
        header = request.headers.get("Authorization")
        if header is None:
            return ANONYMOUS if self.anonymous_allowed else None
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, sep, password = base64.b64decode(encoded.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not name or not password:
            return None
        return KafkaPrincipal("User", name) if self._check(name, password) else None

    def _check(self, name: str, password: str) -> bool:
        now = time.monotonic()
        key = hashlib.sha256(f"{name}\0{password}".encode()).digest()
        against = self._credentials(name)
        found = self._verified.get(key)
        if found is not None and found[0] > now and found[1] is against:
            return True
        ok = against is not None and _password_matches(against, password)
        if ok:
            if len(self._verified) >= VERIFIED_ENTRIES:
                self._verified.clear()
            self._verified[key] = (now + VERIFIED_S, against)
        return ok

    def _credentials(self, name: str) -> object:
        """What `name`'s password is checked against: a SCRAM credential (the strongest
        mechanism held), else the PLAIN password of the first listener naming the user."""
        state = self.broker.state
        if state is not None:
            for mechanism in sorted(MECHANISMS, reverse=True):  # SHA-512 first
                credential = state.scram_credentials.get(name, mechanism)
                if credential is not None:
                    return (mechanism, credential)
        for security in self.broker.config.listener_security.values():
            password = security.plain_users.get(name)
            if password is not None:
                return ("PLAIN", password)
        return None


def _password_matches(against: object, password: str) -> bool:
    assert isinstance(against, tuple)
    mechanism, expected = against
    if mechanism == "PLAIN":
        return hmac.compare_digest(password.encode(), expected.encode())
    computed = credential_from_salted_password(
        mechanism, salted_password(mechanism, password, expected.salt, expected.iterations),
        expected.salt, expected.iterations)
    return hmac.compare_digest(computed.stored_key, expected.stored_key)


def _challenge(message: str) -> web.Response:
    return web.json_response(
        {"error": f"authentication required: {message}"}, status=401,
        headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})


def principal_of(request: web.Request) -> KafkaPrincipal:
    """The console user of a guarded request (ANONYMOUS for an unguarded one)."""
    return request.get(PRINCIPAL, ANONYMOUS)


def context(services: RequestServices, request: web.Request, listener_name: str,
            api_key: int = CONSOLE_API_KEY, api_version: int = 0,
            correlation_id: int = 0, client_id: str | None = None) -> RequestContext:
    """A RequestContext for the console's user, so kbroker.server.authorization decides
    for them as it decides for a Kafka client (principal, host)."""
    peer = request.remote or "unknown"
    return RequestContext(services=services, api_key=api_key, api_version=api_version,
                          correlation_id=correlation_id, client_id=client_id,
                          listener_name=listener_name, peer=f"{peer}:0",
                          principal=principal_of(request))


def cache_key(request: web.Request) -> str:
    """A console answer depends on who asked: the per-URL cache is per user too."""
    return f"{principal_of(request)}|{request.remote}|{request.rel_url}"


def listener_name(broker: ServedBroker) -> str:
    """The listener the console acts on: the inter-broker one (in cluster mode PLAINTEXT or
    SASL_PLAINTEXT, where the console logs in as the broker does: it reaches the other
    brokers as the brokers reach each other), else the first."""
    config = broker.config
    return config.inter_broker_listener_name or config.listeners[0].name

