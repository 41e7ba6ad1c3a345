"""Listening sockets and the set of live connections.

Each configured listener (`PLAINTEXT://host:port`, port 0 = any free port) is a
non-blocking listening socket watched with `loop.add_reader`; accepted sockets
become Connections (TCP_NODELAY, non-blocking). `max.connections` and
`max.connections.per.ip` (with `max.connections.per.ip.overrides`) are enforced at
accept time, as Kafka's ConnectionQuotas do (the new socket is closed). A periodic sweep closes connections idle
for longer than `connections.max.idle.ms` (no request read, no response pending),
and, as Kafka's Selector does (its idle clock counts socket activity, reads or
writes), connections whose queued response has not moved for as long: a client
that stops reading cannot pin a response, and the files it slices, forever.

Start: `start(accepting=False)` binds the listeners (their ports are known, and
connections wait in the backlog) without accepting; `start_accepting()` then serves
them. A cluster broker does so once it is registered in ZooKeeper, as Kafka enables
request processing at the end of its startup: before, it knows nothing of the cluster.

Connections created and closed are counted per listener (Kafka's socket-server-metrics
connection-creation-total / connection-close-total), read by /metrics.

Graceful stop: `stop_accepting()`, then `drain(timeout)` lets each connection
finish and send the responses of requests it already read, then `close_all()`.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import socket
import ssl
from typing import TYPE_CHECKING

from kbroker.config import Listener, per_ip_overrides
from kbroker.security.oauth_validators import OAuthValidators
from kbroker.security.settings import ListenerSecurity
from kbroker.security.tls import server_context
from kbroker.server.connection import Connection
from kbroker.server.network_receive import RECV_CHUNK
from kbroker.server.request_dispatcher import RequestDispatcher
from kbroker.server.request_logger import RequestLog
from kbroker.server.request_queue import RequestQueue
from kbroker.server.tls_transport import TLS_RECV_CHUNK

if TYPE_CHECKING:
    from kbroker.server.protocol_trace import ProtocolTrace
    from kbroker.server.request_metrics import RequestMetrics
    from kbroker.server.request_services import RequestServices

log = logging.getLogger(__name__)

_BACKLOG = 1024
ACCEPT_BACKOFF_S = 0.1  # after EMFILE/ENFILE: retry accepting this much later
ACCEPT_LOG_INTERVAL_S = 10.0


class BindError(OSError):
    """A listener's address cannot be bound; the message is Kafka's ("Socket server failed
    to bind to 127.0.0.1:9092: Address already in use"), errno the cause's."""

    def __init__(self, listener: Listener, cause: OSError) -> None:
        host = listener.host or "0.0.0.0"
        self.url_host = f"[{host}]" if ":" in host else host
        super().__init__(f"Socket server failed to bind to {self.url_host}:{listener.port}: "
                         f"{cause.strerror or cause}")
        self.errno = cause.errno
        self.listener = listener


class BoundListener:
    def __init__(self, server: SocketServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        try:
            self.sock = _bind(listener.host, listener.port)
        except OSError as e:
            raise BindError(listener, e) from e
        self.port: int = self.sock.getsockname()[1]
        self.host = listener.host
        self.bound_host: str = self.sock.getsockname()[0]
        self._failed_accepts = 0
        self._last_accept_log = float("-inf")
        self._resume: asyncio.TimerHandle | None = None

    def start_accepting(self) -> None:
        self.server.loop.add_reader(self.sock.fileno(), self._on_acceptable)

    @property
    def name(self) -> str:
        return self.listener.name

    def _on_acceptable(self) -> None:
        for _ in range(64):
            try:
                sock, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._back_off(e)
                else:
                    log.warning("accept on %s failed: %s", self.listener, e)
                return
            self.server.accepted(sock, self.listener.name)

    def _back_off(self, error: OSError) -> None:
        """Out of descriptors or memory: stop accepting for ACCEPT_BACKOFF_S (the connections
        already open keep being served and may free some), then try again by itself. Logged
        once per ACCEPT_LOG_INTERVAL_S, with how many attempts failed meanwhile."""
        loop = self.server.loop
        loop.remove_reader(self.sock.fileno())
        self._failed_accepts += 1
        now = loop.time()
        if now - self._last_accept_log >= ACCEPT_LOG_INTERVAL_S:
            log.warning("accept on %s failed %d time(s): %s; pausing accepts (open connections: %d)",
                        self.listener, self._failed_accepts, error, len(self.server.connections))
            self._last_accept_log, self._failed_accepts = now, 0
        self._resume = loop.call_later(ACCEPT_BACKOFF_S, self._resume_accepting)

    def _resume_accepting(self) -> None:
        self._resume = None
        if self.sock.fileno() >= 0:
            self.server.loop.add_reader(self.sock.fileno(), self._on_acceptable)
            self._on_acceptable()

    def close(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        try:
            self.server.loop.remove_reader(self.sock.fileno())
        except (ValueError, OSError):
            pass
        self.sock.close()


def _bind(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    family, socktype, proto, _canon, addr = infos[0]
    sock = socket.socket(family, socktype, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class SocketServer:
    """Used from the event loop thread only."""

    def __init__(self, services: RequestServices, loop: asyncio.AbstractEventLoop,
                 trace: ProtocolTrace | None = None,
                 request_metrics: RequestMetrics | None = None) -> None:
        self.services = services
        self.loop = loop
        self.api_table = services.support.api_table()
        self.dispatch = RequestDispatcher(services, self.api_table)  # every connection's
        self.listeners: list[BoundListener] = []
        self.connections: set[Connection] = set()
        # Every connection's recv_into lands here (one socket read at a time on this loop),
        # then its bytes are copied to that connection's input: no buffer per connection.
        self.recv_view = memoryview(bytearray(RECV_CHUNK))
        self.tls_recv_view = memoryview(bytearray(TLS_RECV_CHUNK))  # TLS connections' ciphertext
        self._per_ip: dict[str, int] = {}  # open connections by peer address
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}  # max.connections.per.ip.overrides, resolved
        self.request_queue = RequestQueue(loop, services.config.queued_max_requests,
                                          services.config.queued_max_request_bytes)
        self._sweeper: asyncio.TimerHandle | None = None
        # kafka.request.logger, the protocol trace and the request metrics
        self.request_log = RequestLog(trace, request_metrics)
        self.connection_index = itertools.count()  # the last part of Kafka's connection ids
        # Kafka's socket-server-metrics per listener: connection-creation/close-total
        self.connections_created: dict[str, int] = {}
        self.connections_closed: dict[str, int] = {}
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        # OAUTHBEARER listeners' token validators; the broker runs oauth.start() (the
        # JWKS reads) off the loop before start()
        self.oauth = OAuthValidators({n: s.oauth for n, s in
                                      services.config.listener_security.items()})

    def listener_security(self, name: str) -> ListenerSecurity:
        return self.services.config.listener_security[name]

    def ssl_context(self, name: str) -> ssl.SSLContext:
        return self._ssl_contexts[name]

    def start(self, accepting: bool = True) -> None:
        """Load every TLS listener's key and trust stores (ConfigError naming the key
        when one cannot be used), then bind."""
        for name, security in self.services.config.listener_security.items():
            if security.ssl is not None:
                self._ssl_contexts[name] = server_context(security.ssl)
        try:
            for lst in self.services.config.listeners:
                self.listeners.append(BoundListener(self, lst))
        except OSError:
            self.stop_accepting()
            raise
        if accepting:
            self.start_accepting()

    def start_accepting(self) -> None:
        for lst in self.listeners:
            lst.start_accepting()
        self._schedule_sweep()

    def accepted(self, sock: socket.socket, listener_name: str) -> None:
        config = self.services.config
        if len(self.connections) >= config.max_connections:
            log.warning("max.connections=%d reached, refusing a connection",
                        config.max_connections)
            sock.close()
            return
        try:
            ip = sock.getpeername()[0]
        except OSError:  # gone already
            sock.close()
            return
        limit = self._per_ip_limit(ip)
        if self._per_ip.get(ip, 0) >= limit:
            log.info("Rejected connection from %s, address already has the configured "
                     "maximum of %d connections (max.connections.per.ip)", ip, limit)
            sock.close()
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self, sock, listener_name, self.dispatch)
        conn.ip = ip
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self.connections.add(conn)
        self.connections_created[listener_name] = self.connections_created.get(listener_name, 0) + 1

    def _per_ip_limit(self, ip: str) -> int:
        """max.connections.per.ip for this address, or its override (host names resolved
        when the overrides were last read: at start and when they change)."""
        config = self.services.config
        text = config.max_connections_per_ip_overrides
        if text != self._overrides_text:
            self._overrides = {}
            for host, count in per_ip_overrides(text).items():
                try:
                    addresses = {str(a[4][0]) for a in socket.getaddrinfo(host, None)}
                except OSError as e:
                    log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, e)
                    continue
                for address in addresses:
                    self._overrides[address] = count
            self._overrides_text = text
        return self._overrides.get(ip, config.max_connections_per_ip)

    def connection_closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.services.client_metrics_manager.connection_closed(conn.peer)
        if conn.ip is not None:
            left = self._per_ip.get(conn.ip, 1) - 1
            if left > 0:
                self._per_ip[conn.ip] = left
            else:
                self._per_ip.pop(conn.ip, None)
        name = conn.listener_name
        self.connections_closed[name] = self.connections_closed.get(name, 0) + 1

    # -- idle sweep

    def _schedule_sweep(self) -> None:
        idle_ms = self.services.config.connections_max_idle_ms
        if idle_ms < 0:
            return
        interval = max(0.05, min(idle_ms / 4000, 30.0))
        self._sweeper = self.loop.call_later(interval, self._sweep)

    def _sweep(self) -> None:
        now = self.services.time.monotonic_ms()
        limit = self.services.config.connections_max_idle_ms
        for conn in list(self.connections):
            if conn.idle:
                if now - conn.last_active_ms > limit:
                    log.debug("closing idle connection %s", conn.peer)
                    conn.close()
            elif conn.output_stalled(now, limit):
                log.info("closing connection %s: its client has read none of %d queued response "
                         "bytes for connections.max.idle.ms (%d ms)", conn.peer,
                         conn.writer.queued_bytes, limit)
                conn.abort()
        self._schedule_sweep()

    # -- shutdown

    def stop_accepting(self) -> None:
        for lst in self.listeners:
            lst.close()
        self.listeners.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    async def drain(self, timeout: float) -> None:
        for conn in list(self.connections):
            conn.stop_reading()
        deadline = self.loop.time() + timeout
        while self.loop.time() < deadline:
            if all(c.idle for c in self.connections):
                return
            await asyncio.sleep(0.01)
        log.warning("shutdown: %d connections still busy after %.1fs",
                    sum(not c.idle for c in self.connections), timeout)

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.close()
        self.oauth.close()
        self.request_log.close()
