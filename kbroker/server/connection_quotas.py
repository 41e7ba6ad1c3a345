"""A connection's share of the client quotas (kbroker.security.quotas, Kafka's
ClientQuotaManager): what its requests are recorded as, and the throttle that follows.

ConnectionThrottle (a base of kbroker.server.connection.Connection) owns the channel's
muting (`_muted`, `_mute_timer`). Each request of the connection is recorded, while any
quota is set, against the entity of the connection's principal and the request's client
id (the ResponseSlot's `client_id`):

    request_percentage   the handler's time (kbroker.server.request_dispatcher)
    producer_byte_rate   a Produce request's frame size, as its response is ready
    consumer_byte_rate   a Fetch response's encoded size (encoded again when the
                         throttle it brings is longer than the one it carries)

The longest throttle a response brings is its throttle_time_ms, and the connection is
not read for that long (Kafka's channel muting, KIP-219); responses already queued
still go out.

Used from the event loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kbroker.security.principal import KafkaPrincipal
from kbroker.server.response_slots import ResponseSlot

if TYPE_CHECKING:
    from kbroker.security.quotas import ClientQuotas
    from kbroker.server.listener import SocketServer


class ConnectionThrottle:
    """The quota half of a Connection. The connection provides the rest (its reading
    state), declared here for the type checker."""

    server: SocketServer
    loop: asyncio.AbstractEventLoop
    closed: bool
    principal: KafkaPrincipal
    _inbuf: bytearray
    _reading: bool
    _overloaded: Callable[[], bool]
    _pause_reading: Callable[[], None]
    _resume_reading: Callable[[], None]
    _guarded_process_input: Callable[[], None]
    _muted: bool

    def _init_throttle(self) -> None:
        self.quotas: ClientQuotas = self.server.services.client_quotas
        self._muted = False  # a quota's throttle: not read until _unmute
        self._mute_timer: asyncio.TimerHandle | None = None

    def _close_throttle(self) -> None:
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None

    def recorded(self, quota: str, slot: ResponseSlot, value: float) -> int:
        """`value` recorded against `quota` for the slot's request: the throttle it brings
        in ms (0: none). Only while self.quotas.active."""
        return self.quotas.record(self.principal.name, slot.client_id, quota, value,
                                  self.server.services.time.milliseconds())

    def _mute(self, throttle_ms: int) -> None:
        """A quota was exceeded: read nothing more from this client for throttle_ms (Kafka's
        channel muting); responses already queued still go out."""
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._muted = True
        self._pause_reading()
        self._mute_timer = self.loop.call_later(throttle_ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self._mute_timer = None
        self._muted = False
        if not self.closed and not self._overloaded():
            self._resume_reading()
            if self._inbuf and self._reading:
                self._guarded_process_input()
