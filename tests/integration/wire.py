"""A raw Kafka protocol client over a plain socket, for tests that need exact bytes.

It speaks the wire format itself (length prefix, request header, body encoded
with kbroker's generated codecs) so tests can pipeline, send garbage, or check
exactly what the broker answers.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kbroker.protocol.api_key import request_header_version, response_header_version
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages import RESPONSES
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader


def encode_request(request: Any, version: int, correlation_id: int, client_id: str = "wire") -> bytes:
    w = Writer()
    key = request.API_KEY
    RequestHeader(
        request_api_key=key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    ).encode(w, request_header_version(key, version))
    request.encode(w, version)
    body = w.to_bytes()
    return struct.pack(">i", len(body)) + body


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, rcvbuf: int | None = None,
                 ssl_context: Any = None) -> None:
        """`rcvbuf` sets SO_RCVBUF before the handshake (a small window: a slow reader);
        `ssl_context` (an ssl.SSLContext) speaks TLS."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self._next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_id(self) -> int:
        cid = self._next_id
        self._next_id += 1
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any, version: int, correlation_id: int | None = None) -> int:
        cid = self.next_id() if correlation_id is None else correlation_id
        self.send_raw(encode_request(request, version, cid))
        return cid

    def recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        return self.recv_exact(size)

    def recv(self, api_key: int, version: int) -> tuple[int, Any]:
        """(correlation_id, decoded response)."""
        r = Reader(self.recv_frame())
        header = ResponseHeader.decode(r, response_header_version(api_key, version))
        body = RESPONSES[api_key].decode(r, version)
        return header.correlation_id, body

    def call(self, request: Any, version: int) -> Any:
        cid = self.send(request, version)
        got, response = self.recv(request.API_KEY, version)
        assert got == cid
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker closes the connection (EOF or reset) within `timeout`."""
        return self.bytes_before_close(timeout) is not None

    def bytes_before_close(self, timeout: float = 5.0) -> bytes | None:
        """What the broker sends until it closes the connection (EOF or reset); None when
        it is still open after `timeout`."""
        deadline = time.monotonic() + timeout
        got = bytearray()
        self.sock.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    chunk = self.sock.recv(65536)
                except TimeoutError:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    return bytes(got)
                if chunk == b"":
                    return bytes(got)
                got += chunk
            return None
        finally:
            self.sock.settimeout(10.0)


def wait_until_ready(bootstrap: str, timeout: float = 30.0) -> None:
    """Poll until the broker answers ApiVersions v0."""
    from kbroker.protocol.messages.api_versions import ApiVersionsRequest

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with WireClient(bootstrap, timeout=2.0) as c:
                resp = c.call(ApiVersionsRequest(), 0)
                if resp.error_code == 0:
                    return
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise TimeoutError(f"broker at {bootstrap} not ready: {last}")
