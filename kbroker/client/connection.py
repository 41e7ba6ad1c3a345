"""One blocking TCP connection to one Kafka broker, framed as the protocol says.

Frames (both directions):

    size int32 (bytes that follow) | header | body

A request header is RequestHeader v1 or v2 (flexible versions), a response header
ResponseHeader v0 or v1 (ApiVersions responses always use v0); the versions come
from kbroker.protocol.api_key. Bodies are the generated codecs of
kbroker.protocol.messages.

On connect the connection does what its ConnectionSecurity (kbroker.client.sasl)
says: a TLS handshake (SSL, SASL_SSL), then ApiVersions, then SaslHandshake v1 and
SaslAuthenticate (SASL_PLAINTEXT, SASL_SSL), as Kafka's clients do. A certificate the
client does not trust, a TLS alert or a SASL failure raise AuthenticationError (Kafka's
AuthenticationException: not retriable), with the broker's message when it sent one.

After that the connection sends ApiVersions (v3, falling back to v0 when the broker
answers UNSUPPORTED_VERSION, as KIP-511 prescribes) and keeps the broker's ranges;
`version_for()` picks the highest version both sides speak. Requests may be
pipelined: `send()` several, then `receive()` their responses in order.

A response body is read into one bytearray; `records` fields of the decoded
response are memoryviews into it, so fetched record batches are never copied.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kbroker.client.sasl import ConnectionSecurity, SaslClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey, request_header_version, response_header_version
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages import RESPONSES
from kbroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

__all__ = ["AuthenticationError", "BrokerConnection", "KafkaClientError",
           "UnsupportedVersionError", "encode_request"]

_SIZE = struct.Struct(">i")
_MAX_IOV = 512  # parts per sendmsg (IOV_MAX is 1024 on Linux)
MAX_FRAME_BYTES = 1 << 30


class KafkaClientError(Exception):
    """A broker answered with an error, or the connection failed."""

    def __init__(self, message: str, error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


class AuthenticationError(KafkaClientError):
    """TLS or SASL authentication failed (Kafka's AuthenticationException): retrying with the
    same settings cannot help, so callers raise it at once."""

    def __init__(self, message: str,
                 error_code: int = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message, error_code)


class UnsupportedVersionError(KafkaClientError):
    """No version of an API is spoken by both the client and the broker."""


class BrokerConnection:
    """A blocking connection with ApiVersions negotiation; one user at a time."""

    def __init__(self, host: str, port: int, client_id: str = "kbroker-client",
                 timeout_s: float = 30.0, security: ConnectionSecurity | None = None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._next_correlation_id = 0
        self._pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise KafkaClientError(f"cannot connect to {host}:{port}: {e}",
                                   ErrorCode.NETWORK_EXCEPTION) from e
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.api_versions: dict[int, tuple[int, int]] = {}
        try:
            self._secure(security)
        except BaseException:
            self.close()
            raise

    def _secure(self, security: ConnectionSecurity | None) -> None:
        try:
            if security is not None and security.uses_tls:
                assert security.ssl_context is not None
                self._sock = security.ssl_context.wrap_socket(self._sock,
                                                              server_hostname=self.host)
            self._negotiate()
            if security is not None and security.uses_sasl:
                self._authenticate(security)
        except ssl.SSLError as e:
            raise AuthenticationError(f"SSL handshake with {self.host}:{self.port} failed: "
                                      f"{e.reason or e}") from None
        except AuthenticationError:
            raise
        except KafkaClientError as e:
            # TLS 1.3: a broker refusing the client's certificate says so (an alert, or a
            # closed connection) only when the client first reads
            if security is not None and security.uses_tls:
                raise AuthenticationError(f"SSL handshake with {self.host}:{self.port} failed: "
                                          f"{e} (is a client certificate required, or not "
                                          "trusted?)") from None
            raise

    def _authenticate(self, security: ConnectionSecurity) -> None:
        mechanism = security.sasl_mechanism
        handshake = self.request(SaslHandshakeRequest(mechanism=mechanism),
                                 self.version_for(ApiKey.SASL_HANDSHAKE, 1, 1))
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationError(
                f"{self.host}:{self.port} does not enable SASL mechanism {mechanism} "
                f"(enabled: {', '.join(handshake.mechanisms or []) or 'none'}; "
                f"{ErrorCode(handshake.error_code).name})", handshake.error_code)
        version = self.version_for(ApiKey.SASL_AUTHENTICATE, 0, 2)
        client = security.sasl_client()
        try:
            token = client.step(None)
            while token is not None:
                response = self.request(SaslAuthenticateRequest(auth_bytes=token), version)
                if response.error_code != ErrorCode.NONE:
                    raise AuthenticationError(
                        f"SASL {mechanism} authentication of {security.username!r} with "
                        f"{self.host}:{self.port} failed: "
                        f"{response.error_message or ErrorCode(response.error_code).name}",
                        response.error_code)
                token = client.step(bytes(response.auth_bytes or b""))
        except SaslClientError as e:
            raise AuthenticationError(f"SASL {mechanism} with {self.host}:{self.port}: {e}") \
                from None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _negotiate(self) -> None:
        response = self.request(ApiVersionsRequest(client_software_name="kbroker",
                                                   client_software_version="0.1.0"), 3)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = self.request(ApiVersionsRequest(), 0)
        if response.error_code != ErrorCode.NONE:
            raise KafkaClientError(f"ApiVersions failed: {ErrorCode(response.error_code).name}",
                                   response.error_code)
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, api_key: int, lowest: int, highest: int) -> int:
        """The highest version in [lowest, highest] that the broker also speaks."""
        broker = self.api_versions.get(api_key)
        if broker is not None:
            version = min(highest, broker[1])
            if version >= max(lowest, broker[0]):
                return version
        raise UnsupportedVersionError(
            f"{ApiKey(api_key).name}: client speaks {lowest}-{highest}, broker {broker}",
            ErrorCode.UNSUPPORTED_VERSION)

    def send(self, request: Any, version: int, expect_response: bool = True) -> None:
        """Send one request; its response is read by a later receive() (in order).
        expect_response=False for the one request that has none (Produce with acks=0)."""
        api_key = request.API_KEY
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        parts = encode_request_parts(request, version, correlation_id, self.client_id)
        try:
            if len(parts) == 1:
                self._sock.sendall(parts[0])
            elif isinstance(self._sock, ssl.SSLSocket):  # no sendmsg over TLS
                self._sock.sendall(b"".join(parts))
            else:
                _send_parts(self._sock, parts)
        except OSError as e:
            raise KafkaClientError(f"send to {self.host}:{self.port} failed: {e}",
                                   ErrorCode.NETWORK_EXCEPTION) from e
        if expect_response:
            self._pending.append((correlation_id, api_key, version))

    def receive(self) -> Any:
        """The response to the oldest request sent and not yet received."""
        correlation_id, api_key, version = self._pending.pop(0)
        (size,) = _SIZE.unpack(self._read_exactly(4))
        if not 0 < size <= MAX_FRAME_BYTES:
            raise KafkaClientError(f"bad response size {size}", ErrorCode.CORRUPT_MESSAGE)
        r = Reader(self._read_exactly(size))
        header = ResponseHeader.decode(r, response_header_version(api_key, version))
        if header.correlation_id != correlation_id:
            raise KafkaClientError(
                f"correlation id {header.correlation_id}, expected {correlation_id}",
                ErrorCode.CORRUPT_MESSAGE)
        if api_key == ApiKey.API_VERSIONS:
            return _decode_api_versions(r, version)
        return RESPONSES[api_key].decode(r, version)

    def request(self, request: Any, version: int) -> Any:
        self.send(request, version)
        return self.receive()

    def _read_exactly(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = self._sock.recv_into(view[got:])
            except OSError as e:
                raise KafkaClientError(f"receive from {self.host}:{self.port} failed: {e}",
                                       ErrorCode.NETWORK_EXCEPTION) from e
            if k == 0:
                raise KafkaClientError(f"{self.host}:{self.port} closed the connection",
                                       ErrorCode.NETWORK_EXCEPTION)
            got += k
        return buf


def encode_request(request: Any, version: int, correlation_id: int, client_id: str) -> bytearray:
    """One request frame: size, header (v1 or v2 by the API's flexible versions), body."""
    frame = bytearray()
    for part in encode_request_parts(request, version, correlation_id, client_id):
        frame += part
    return frame


def encode_request_parts(request: Any, version: int, correlation_id: int,
                         client_id: str) -> list[bytes | bytearray]:
    """The frame of encode_request in parts, in order: large records are the caller's own
    bytes objects, not copies (Writer.parts()), for one gathering sendmsg."""
    api_key = request.API_KEY
    w = Writer()
    w.raw(b"\0\0\0\0")  # the size, patched below
    RequestHeader(request_api_key=api_key, request_api_version=version,
                  correlation_id=correlation_id, client_id=client_id,
                  ).encode(w, request_header_version(api_key, version))
    request.encode(w, version)
    parts: list[bytes | bytearray] = w.parts()  # type: ignore[assignment]  # no file slices
    first = parts[0] = bytearray(parts[0])
    _SIZE.pack_into(first, 0, len(w) - 4)
    return parts


def _send_parts(sock: socket.socket, parts: list[bytes | bytearray]) -> None:
    """sendall() of the parts one after another, gathered (sendmsg, on partial writes again
    from where it stopped)."""
    views = [memoryview(p) for p in parts]
    while views:
        sent = sock.sendmsg(views[:_MAX_IOV])
        while views and sent >= len(views[0]):
            sent -= len(views.pop(0))
        if sent:
            views[0] = views[0][sent:]


def _decode_api_versions(r: Reader, version: int) -> ApiVersionsResponse:
    """A broker that does not speak `version` answers in v0 (KIP-511)."""
    start = r.pos
    try:
        return ApiVersionsResponse.decode(r, version)
    except Exception:
        r.pos = start
        return ApiVersionsResponse.decode(r, 0)
