"""SASL on one connection: SaslHandshake, SaslAuthenticate and re-authentication, as Kafka's
SaslServerAuthenticator runs them.

States (a SASL listener's connection starts in HANDSHAKE):

    HANDSHAKE     one ApiVersions and SaslHandshake only; anything else (a SaslAuthenticate,
                  a second ApiVersions, any other request) closes the connection unanswered
    AUTHENTICATE  after SaslHandshake v1: SaslAuthenticate requests carry the tokens; any
                  other request (a second SaslHandshake, ApiVersions, ...) is answered with
                  its ILLEGAL_SASL_STATE error, then the connection closes
    RAW           after SaslHandshake v0: the next frames are bare tokens (size-prefixed,
                  no request header), answered the same way
    COMPLETE      authenticated: every API; a SaslHandshake v1 starts re-authentication
                  (KIP-368), which must end as the same principal, when the session has an
                  end (without one it is answered ILLEGAL_SASL_STATE, as KafkaApis does); a
                  SaslAuthenticate outside re-authentication is answered ILLEGAL_SASL_STATE
                  ("... after successful authentication") and the connection stays open

A handshake naming a mechanism the listener does not enable answers
UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closes; a failed
exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message (raw tokens: the
connection just closes), and the connection closes. A session lasts
connections.max.reauth.ms when that is > 0, and no longer than the credential (an
OAUTHBEARER token's exp), as Kafka's SaslServerAuthenticator bounds it: SaslAuthenticate
v1+ tells the client (session_lifetime_ms), and a request other than SASL's after it
ends closes the connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeResponse
from kbroker.security.oauthbearer import TokenValidator
from kbroker.security.principal import KafkaPrincipal
from kbroker.security.sasl import SaslFailure, SaslServer, authenticator
from kbroker.security.scram import ScramCredential
from kbroker.security.settings import ListenerSecurity

log = logging.getLogger(__name__)


class SaslState(Enum):
    HANDSHAKE = 0
    AUTHENTICATE = 1
    RAW = 2
    COMPLETE = 3


class SaslStep(Enum):
    """What a request does before authentication completes (SaslAuthenticator.step), as in
    Kafka's SaslServerAuthenticator: handleKafkaRequest throws IllegalSaslStateException in
    its handshake states before any answer; handleSaslToken answers a request that is not
    SaslAuthenticate with that request's error, then fails."""

    SERVE = 0  # answered as usual
    CLOSE = 1  # the connection closes unanswered
    REFUSE = 2  # answered with ILLEGAL_SASL_STATE, then the connection closes


class SaslAuthenticator:
    """Owned by one Connection; loop thread only."""

    def __init__(self, security: ListenerSecurity,
                 scram_lookup: Callable[[str, str], ScramCredential | None],
                 now_ms: Callable[[], int], oauth_validator: TokenValidator | None = None) -> None:
        self.security = security
        self._scram_lookup = scram_lookup
        self._oauth_validator = oauth_validator
        self._now_ms = now_ms
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None  # set once authenticated
        self.session_expiry_ms: int | None = None
        self.reauthenticating = False
        self.versions_answered = False  # an ApiVersions of a supported version was served

    def step(self, api_key: int) -> SaslStep:
        """The fate of a request of `api_key` while not authenticated (RAW frames are tokens)."""
        if self.state is SaslState.HANDSHAKE:
            if api_key == ApiKey.SASL_HANDSHAKE or (api_key == ApiKey.API_VERSIONS
                                                    and not self.versions_answered):
                return SaslStep.SERVE
            return SaslStep.CLOSE
        if self.state is SaslState.AUTHENTICATE and api_key != ApiKey.SASL_AUTHENTICATE:
            return SaslStep.REFUSE
        return SaslStep.SERVE

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self) -> bool:
        return self.session_expiry_ms is not None and self._now_ms() >= self.session_expiry_ms

    def handshake(self, mechanism: str, version: int) -> tuple[SaslHandshakeResponse, bool]:
        """The answer and whether the connection closes after it."""
        enabled = list(self.security.sasl_mechanisms)
        if self.state == SaslState.COMPLETE and self.session_expiry_ms is None:
            # no session to renew: KafkaApis.handleSaslHandshakeRequest answers, and the
            # connection goes on (KafkaChannel.maybeBeginServerReauthentication: false)
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]), False
        if self.state == SaslState.COMPLETE and version >= 1:
            self.reauthenticating = True
        elif self.state != SaslState.HANDSHAKE:  # Kafka's error answer: no mechanisms
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]), True
        if mechanism not in enabled or (self.reauthenticating and mechanism != self.mechanism):
            log.info("SASL handshake for mechanism %r refused (enabled: %s)", mechanism[:64],
                     ",".join(enabled))
            return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=enabled), True
        self.mechanism = mechanism
        self._server = authenticator(mechanism, self.security.plain_users, self._scram_lookup,
                                     self._oauth_validator)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled), False

    def authenticate(self, token: bytes, version: int | None) -> tuple[SaslAuthenticateResponse, bool]:
        """One token (version None: a raw v0 token). The answer and whether to close."""
        if self.state is SaslState.COMPLETE:  # KafkaApis.handleSaslAuthenticateRequest
            return SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received after successful authentication"), False
        if self._server is None or self.state not in (SaslState.AUTHENTICATE, SaslState.RAW):
            return SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received in an unexpected state"), True
        try:
            challenge = self._server.evaluate(token)
        except SaslFailure as e:
            log.info("SASL %s authentication failed: %s", self.mechanism, e)
            return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                            error_message=str(e)), True
        lifetime = 0
        if self._server.complete:
            principal = KafkaPrincipal("User", self._server.username or "")
            if self.reauthenticating and principal != self.principal:
                return SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                    error_message="Cannot change principals during re-authentication from "
                    f"{self.principal}: {principal}"), True
            self.principal = principal
            self.state = SaslState.COMPLETE
            self.reauthenticating = False
            session = _session_lifetime_ms(self.security.reauth_ms,
                                           self._server.credential_lifetime_ms)
            self._server = None
            self.session_expiry_ms = None
            if session is not None:
                self.session_expiry_ms = self._now_ms() + session
                lifetime = session if version is not None and version >= 1 else 0
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None,
                                        auth_bytes=challenge, session_lifetime_ms=lifetime), False


def _session_lifetime_ms(reauth_ms: int, credential_ms: int | None) -> int | None:
    """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the shorter of
    connections.max.reauth.ms (when > 0) and the credential's time left (never below 0);
    None when neither bounds the session."""
    if credential_ms is None:
        return reauth_ms if reauth_ms > 0 else None
    credential_ms = max(credential_ms, 0)
    return min(credential_ms, reauth_ms) if reauth_ms > 0 else credential_ms
