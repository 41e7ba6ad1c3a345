"""A connection's authentication gate, as Kafka's KafkaChannel runs its Authenticator:
TLS first, then SASL, before any other request is served.

AuthenticationGate (a base of kbroker.server.connection.Connection) owns who the client
is (`principal`: User:ANONYMOUS on PLAINTEXT, a certificate's mapped name on SSL, the SASL
identity on SASL_*), whether it is authenticated yet (`authenticated`), the listener's
TlsChannel and SaslAuthenticator (`tls`, `sasl`), the frame size limit that goes with
that state (`max_request_bytes`) and the authentication timer.

    SSL, SASL_SSL   the bytes go through TLS (kbroker.server.tls_transport): the
                    handshake first, then plaintext frames (kbroker.server.network_receive);
                    a TLS failure sends its alert and closes; the peer's close_notify is
                    answered with ours after the frames that came before it are handled
    SSL             authenticated once the handshake completes, as the client
                    certificate's subject mapped by ssl.principal.mapping.rules (no rule
                    that maps it: closed), ANONYMOUS without a certificate
    SASL_*          frames pass through the SaslAuthenticator (kbroker.server.authenticator)
                    until the client is authenticated: before that only one ApiVersions and
                    SASL frames are read, none larger than sasl.server.max.receive.size
                    (what else comes closes the connection, answered or not as Kafka's
                    SaslServerAuthenticator does: SaslAuthenticator.step);
                    once the session expires (connections.max.reauth.ms) any request but
                    SASL's closes the connection
    SSL, SASL_*     a connection not authenticated within AUTHENTICATION_TIMEOUT_S of
                    its accept is closed

Once authenticated the limit is socket.request.max.bytes. Used from the event loop
thread only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.codec import DecodeError
from kbroker.protocol.messages.api_versions import ApiVersionsResponse
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal, rfc2253
from kbroker.server.authenticator import SaslAuthenticator, SaslState, SaslStep
from kbroker.server.network_receive import PREFIX
from kbroker.server.request_frame import HEAD, api_name, decode_request
from kbroker.server.response_slots import ResponseSlot
from kbroker.server.tls_transport import TlsChannel, TlsResponseWriter

if TYPE_CHECKING:
    from kbroker.server.listener import SocketServer
    from kbroker.server.response_writer import ResponseWriter

log = logging.getLogger("kbroker.server.connection")

AUTHENTICATION_TIMEOUT_S = 10.0  # TLS handshake and SASL exchange, from accept
_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class AuthenticationGate:
    """The TLS and SASL half of a Connection. The connection provides the rest (its
    socket reads and framing, slots and close), declared here for the type checker."""

    server: SocketServer
    loop: asyncio.AbstractEventLoop
    listener_name: str
    peer: str
    closed: bool
    writer: ResponseWriter | TlsResponseWriter
    close: Callable[[], None]
    _receive: Callable[[memoryview], int]
    _take_from: Callable[[Callable[[memoryview], int], memoryview], int]
    _guarded_process_input: Callable[[], None]
    new_slot: Callable[..., ResponseSlot]
    complete: Callable[..., None]
    _answered_slot: Callable[[int, list[Any]], None]
    _send_ready: Callable[[], None]
    max_request_bytes: int

    def _init_gate(self) -> None:
        server = self.server
        security = server.listener_security(self.listener_name)
        self.security_protocol = security.protocol  # the listener's, as the request log says
        self.principal: KafkaPrincipal = ANONYMOUS
        self.sasl: SaslAuthenticator | None = None
        self.tls: TlsChannel | None = None
        if security.sasl:
            self.sasl = SaslAuthenticator(security, server.services.scram_credentials.get,
                                          server.services.time.monotonic_ms,
                                          server.oauth.get(self.listener_name))
        if security.tls:
            self.tls = TlsChannel(server.ssl_context(self.listener_name))
        self.authenticated = self.sasl is None and self.tls is None
        self.max_request_bytes = (security.sasl_max_receive_size if self.sasl is not None
                                  else server.services.config.socket_request_max_bytes)
        self._auth_timer: asyncio.TimerHandle | None = None
        if not self.authenticated:
            self._auth_timer = self.loop.call_later(AUTHENTICATION_TIMEOUT_S, self._auth_timeout)

    def _close_gate(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    # -- TLS

    def _on_readable_tls(self) -> None:
        """TLS: ciphertext into the channel, the handshake advanced, plaintext into the
        connection's input (or the large frame being received)."""
        tls, view = self.tls, self.server.tls_recv_view
        assert tls is not None
        n = self._receive(view)
        if not n:
            return
        tls.incoming.write(view[:n])
        try:
            if not tls.handshaken:
                done = tls.handshake()
                assert isinstance(self.writer, TlsResponseWriter)
                self.writer.push()
                if not done:
                    return
                self._tls_established()
                if self.closed:
                    return
            got = self._take_from(tls.read_into, self.server.recv_view)
        except ssl.SSLError as e:
            log.info("connection %s: closing, TLS failed: %s", self.peer, e.reason or e)
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.flush_now()  # the alert, if any
            self.close()
            return
        if tls.outgoing.pending:
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.push()
        if not self.closed:
            self._guarded_process_input()  # with what came before a close_notify (as Kafka)
        if got < 0 and not self.closed:  # the peer's close_notify: ours, then the close
            tls.close_notify()
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.flush_now()
            self.close()

    def _tls_established(self) -> None:
        """The TLS handshake completed: on SSL listeners the client is authenticated as its
        certificate's mapped name (or ANONYMOUS without one)."""
        assert self.tls is not None
        if self.sasl is not None:
            return
        security = self.server.listener_security(self.listener_name)
        cert = self.tls.peer_certificate()
        principal = ANONYMOUS
        if cert is not None and security.ssl is not None:
            dn = rfc2253(cert.get("subject", ()))
            name = security.ssl.principal_rules.map(dn)
            if name is None:
                log.info("connection %s: closing, no ssl.principal.mapping.rules rule maps %r",
                         self.peer, dn)
                self.close()
                return
            principal = KafkaPrincipal("User", name)
        self._authenticated(principal)

    def _authenticated(self, principal: KafkaPrincipal) -> None:
        self.principal = principal
        if not self.authenticated:
            self.authenticated = True
            self.max_request_bytes = self.server.services.config.socket_request_max_bytes
            self._close_gate()

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.authenticated and not self.closed:
            log.info("connection %s: closing, not authenticated within %.0f s", self.peer,
                     AUTHENTICATION_TIMEOUT_S)
            self.close()

    # -- SASL

    def _sasl_frame(self, frame: bytearray) -> bool:
        """SASL's part of a frame's handling on a SASL listener: True when it was handled
        here (a SASL request or raw token, or a request refused before authentication)."""
        sasl = self.sasl
        assert sasl is not None
        if sasl.state is SaslState.RAW:
            self._raw_token(frame)
            return True
        if len(frame) < HEAD.size:
            return False
        api_key, version, correlation_id = HEAD.unpack_from(frame, 0)
        if not sasl.authenticated:
            step = sasl.step(api_key)
            if step is SaslStep.CLOSE:
                log.info("connection %s: closing, unexpected %s request during the SASL handshake",
                         self.peer, api_name(api_key))
                self.close()
                return True
            if step is SaslStep.REFUSE and api_key not in _SASL_KEYS:
                self._illegal_sasl_state(frame, api_key, version, correlation_id)
                return True
            if api_key == ApiKey.API_VERSIONS:
                sasl.versions_answered = self._serves(api_key, version)  # else UNSUPPORTED_VERSION, again
                return False
        if api_key == ApiKey.SASL_HANDSHAKE:  # re-authentication (SocketServer.processCompletedReceives)
            self._sasl_request(frame, api_key, version, correlation_id)
            return True
        if sasl.expired() and not sasl.reauthenticating:
            log.info("connection %s: closing, its SASL session expired "
                     "(connections.max.reauth.ms)", self.peer)
            self.close()
            return True
        if api_key == ApiKey.SASL_AUTHENTICATE:
            self._sasl_request(frame, api_key, version, correlation_id)
            return True
        return False

    def _sasl_request(self, frame: bytearray, api_key: int, version: int,
                      correlation_id: int) -> None:
        sasl = self.sasl
        assert sasl is not None
        opened = self._open_slot(frame, api_key, version, correlation_id)
        if opened is None:
            return
        slot, request = opened
        response: Any
        if api_key == ApiKey.SASL_HANDSHAKE:
            response, close = sasl.handshake(request.mechanism, version)
        else:
            response, close = sasl.authenticate(request.auth_bytes, version)
        if sasl.principal is not None and not close:
            self._authenticated(sasl.principal)
        self.complete(slot, response, close_after=close)

    def _illegal_sasl_state(self, frame: bytearray, api_key: int, version: int,
                            correlation_id: int) -> None:
        """A request other than SaslAuthenticate after SaslHandshake v1: its error answer
        with ILLEGAL_SASL_STATE, then the close (an API without an error answer, or a version
        kbroker does not serve: just the close)."""
        spec = self.server.api_table.get(api_key)
        if spec is None or (spec.error_response is None and api_key != ApiKey.API_VERSIONS):
            log.info("connection %s: closing, unexpected %s request during SASL authentication",
                     self.peer, api_name(api_key))
            self.close()
            return
        opened = self._open_slot(frame, api_key, version, correlation_id)
        if opened is None:
            return
        slot, request = opened
        log.info("connection %s: %s during SASL authentication: ILLEGAL_SASL_STATE, closing",
                 self.peer, api_name(api_key))
        code = ErrorCode.ILLEGAL_SASL_STATE
        response = (ApiVersionsResponse(error_code=code) if spec.error_response is None
                    else spec.error_response(request, version, code))
        self.complete(slot, response, close_after=True)

    def _serves(self, api_key: int, version: int) -> bool:
        spec = self.server.api_table.get(api_key)
        return spec is not None and spec.min_version <= version <= spec.max_version

    def _open_slot(self, frame: bytearray, api_key: int, version: int,
                   correlation_id: int) -> tuple[ResponseSlot, Any] | None:
        """The response slot and request of a frame answered here; None (the connection
        closed) when kbroker does not serve its version or it does not decode."""
        if not self._serves(api_key, version):
            log.info("connection %s: closing, unsupported %s version %d", self.peer,
                     api_name(api_key), version)
            self.close()
            return None
        decoded = self._decode(frame, api_key, version)
        if decoded is None:
            return None
        header, request = decoded
        return self.new_slot(api_key, version, correlation_id, len(frame), header, request), request

    def _decode(self, frame: bytearray, api_key: int, version: int) -> tuple[RequestHeader, Any] | None:
        """The header and request of a frame; None (the connection closed) when undecodable."""
        try:
            return decode_request(frame, api_key, version)
        except (DecodeError, UnicodeDecodeError) as e:
            log.info("connection %s: closing, cannot decode %s v%d: %s",
                     self.peer, api_name(api_key), version, e)
            self.close()
            return None

    def _raw_token(self, frame: bytearray) -> None:
        """A bare SASL token after SaslHandshake v0: answered with a bare token."""
        sasl = self.sasl
        assert sasl is not None
        response, close = sasl.authenticate(bytes(frame), None)
        if close:
            self.close()  # Kafka closes without an answer to a failed v0 exchange
            return
        self._answered_slot(len(frame), [PREFIX.pack(len(response.auth_bytes)) + response.auth_bytes])
        if sasl.principal is not None:
            self._authenticated(sasl.principal)
        self._send_ready()

