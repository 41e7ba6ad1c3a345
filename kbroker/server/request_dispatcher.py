"""One request's way from its frame to its response, as Kafka's RequestChannel hands it
to KafkaApis.handle: the one dispatcher of the broker's Kafka API, for its connections
(kbroker.server.connection) and for the web console's requests to this broker
(kbroker.ops.console_admin).

A request frame (after its int32 size prefix, kbroker.server.network_receive):

    int16 api_key | int16 api_version | int32 correlation_id | rest of the header | body

RequestDispatcher(services, api_table) is the callable a RequestChannel is given:
`dispatch(channel, frame)`, per request, does in this order

    header decode    an undecodable header or body, an unknown API key, an unsupported
                     version of any API but ApiVersions close the channel (FrameError);
                     ApiVersions of a version too new answers UNSUPPORTED_VERSION in
                     v0's format (KIP-511)
    slot             channel.new_slot: the request's place in the channel's response
                     order (kbroker.server.response_slots)
    forwarding       a cluster broker that is not the controller sends an admin request
                     only the controller answers to it, unauthorized and unhandled here
                     (kbroker.server.forwarding, KIP-590), and answers with its answer
    authorization    with an authorizer: a request refused as a whole gets its API's error
                     answer (kbroker.server.authorization.request_refusal), or the channel
                     closes when the API has none
    handler          the API table's handler with a RequestContext (the channel's
                     principal, listener and peer); its answer is the response, a
                     coroutine (run at once as far as it goes without waiting, then as a
                     task the channel holds: kbroker.utils.eager) or a PendingResponse
                     (completed by the callback that wakes it: a parked Fetch, an acks=all
                     Produce; the channel holds it until then), each handed to
                     channel.complete when there. A handler that raises is logged; the
                     client gets UNKNOWN_SERVER_ERROR where the API has per-item error
                     codes, else the channel closes. CLOSE_CONNECTION is handed on as is.
    quota            while a client quota is set, the handler's time is recorded as
                     request_percentage (channel.recorded), its throttle on the slot

The channel encodes the response (request_frame.encode_response) when complete is called. Holds no
state of its own besides the services and its API table. Used from the event loop thread
only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.security.principal import KafkaPrincipal
from kbroker.security.quotas import REQUEST as REQUEST_QUOTA
from kbroker.server import forwarding
from kbroker.server.api_spec import ApiSpec, Handler
from kbroker.server.apis import api_versions
from kbroker.server.authorization import request_refusal
from kbroker.server.forwarding import FORWARDED
from kbroker.server.network_receive import FrameError
from kbroker.server.request_context import PendingResponse, RequestContext
from kbroker.server.request_frame import api_name, parse_frame
from kbroker.server.response_slots import ResponseSlot
from kbroker.utils.eager import start_eagerly

if TYPE_CHECKING:
    from kbroker.server.request_services import RequestServices

log = logging.getLogger("kbroker.server.connection")

class Quotas(Protocol):
    @property
    def active(self) -> bool: ...


class RequestChannel(Protocol):
    """What the dispatcher needs of the side a request came from."""

    loop: asyncio.AbstractEventLoop
    peer: str
    listener_name: str
    principal: KafkaPrincipal
    client_software: str | None
    tasks: set[asyncio.Task[Any]]  # the handlers' tasks, cancelled when the channel closes
    deferred: set[PendingResponse]  # likewise

    @property
    def quotas(self) -> Quotas: ...

    def new_slot(self, api_key: int, version: int, correlation_id: int, size: int,
                 header: RequestHeader | None = None, request: Any = None) -> ResponseSlot: ...

    def complete(self, slot: ResponseSlot, response: Any, close_after: bool = False) -> None: ...

    def recorded(self, quota: str, slot: ResponseSlot, value: float) -> int: ...

    def close(self) -> None: ...


class RequestDispatcher:
    """KafkaApis.handle over one API table; see the module docstring."""

    __slots__ = ("services", "api_table")

    def __init__(self, services: RequestServices, api_table: dict[int, ApiSpec]) -> None:
        self.services = services
        self.api_table = api_table

    def __call__(self, channel: RequestChannel, frame: bytearray) -> None:
        try:
            parsed = parse_frame(frame, self.api_table)
        except FrameError as e:
            log.info("connection %s: closing, %s", channel.peer, e)
            channel.close()
            return
        api_key, version, correlation_id, spec = parsed.api_key, parsed.version, \
            parsed.correlation_id, parsed.spec
        if parsed.request is None:  # KIP-511: ApiVersions too new, answered in v0's format
            slot = channel.new_slot(api_key, 0, correlation_id, len(frame))
            channel.complete(slot, api_versions.unsupported_version_response(spec))
            return
        header, request = parsed.header, parsed.request
        assert header is not None
        if parsed.client_software is not None:
            channel.client_software = parsed.client_software
        services = self.services
        ctx = RequestContext(
            services=services,
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
            client_id=header.client_id,
            listener_name=channel.listener_name,
            peer=channel.peer,
            principal=channel.principal,
            client_software=channel.client_software,
        )
        slot = channel.new_slot(api_key, version, correlation_id, len(frame), header, request)
        slot.client_id = header.client_id or ""
        if api_key in FORWARDED and services.support.forwarding():
            # KafkaApis.maybeForwardToController: the controller authorizes and answers
            data = bytes(frame)
            self._handle(channel, slot, spec, ctx, request,
                         lambda c, r: forwarding.forward(c, r, spec, data))
            return
        if services.authorizer is not None:
            refused = request_refusal(ctx, request)
            if refused is not None:
                self._refuse(channel, slot, spec, request, refused)
                return
        self._handle(channel, slot, spec, ctx, request)

    def _handle(self, channel: RequestChannel, slot: ResponseSlot, spec: ApiSpec,
                ctx: RequestContext, request: Any, handler: Handler | None = None) -> None:
        started = time.perf_counter_ns() if channel.quotas.active else 0
        awaited = False
        try:
            result = (handler or spec.handler)(ctx, request)
            if type(result) is not PendingResponse and hasattr(type(result), "__await__"):
                # A coroutine (inspect.isawaitable costs more): it runs now as far as it
                # goes without waiting, and answers now if it never waits (kbroker.utils.eager).
                awaited = True
                _, task = start_eagerly(channel.loop,
                                        self._await(channel, slot, spec, request, result))
                if task is not None:
                    channel.tasks.add(task)
                    task.add_done_callback(channel.tasks.discard)
        except Exception:
            log.exception("%s v%d from %s failed", api_name(ctx.api_key), ctx.api_version,
                          channel.peer)
            self._fail(channel, slot, spec, request)
            return
        finally:
            if slot.logged is not None:
                slot.logged.handler_returned()
            if started:
                slot.throttle_ms = channel.recorded(REQUEST_QUOTA, slot,
                                                    (time.perf_counter_ns() - started) / 1e6)
        if awaited:
            return  # answered by _await, now or in its task
        if type(result) is PendingResponse:
            channel.deferred.add(result)
            result.attach(lambda response, error: self._deferred_done(
                channel, slot, spec, request, result, response, error))
        else:
            channel.complete(slot, result)

    async def _await(self, channel: RequestChannel, slot: ResponseSlot, spec: ApiSpec,
                     request: Any, result: Any) -> None:
        try:
            response = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s v%d from %s failed", api_name(slot.api_key), slot.version,
                          channel.peer)
            self._fail(channel, slot, spec, request)
            return
        channel.complete(slot, response)

    def _deferred_done(self, channel: RequestChannel, slot: ResponseSlot, spec: ApiSpec,
                       request: Any, pending: PendingResponse, response: Any,
                       error: BaseException | None) -> None:
        """A PendingResponse was completed (inside the callback that completed it)."""
        channel.deferred.discard(pending)
        if error is not None:
            log.error("%s v%d from %s failed", api_name(slot.api_key), slot.version,
                      channel.peer, exc_info=error)
            self._fail(channel, slot, spec, request)
            return
        channel.complete(slot, response)

    def _refuse(self, channel: RequestChannel, slot: ResponseSlot, spec: ApiSpec, request: Any,
                code: int) -> None:
        """Not authorized as a whole: the API's error answer with `code`."""
        log.info("%s v%d from %s (%s) refused: %s", api_name(slot.api_key), slot.version,
                 channel.peer, channel.principal, ErrorCode(code).name)
        if spec.error_response is None:
            channel.close()
            return
        channel.complete(slot, spec.error_response(request, slot.version, code))

    def _fail(self, channel: RequestChannel, slot: ResponseSlot, spec: ApiSpec,
              request: Any) -> None:
        if spec.error_response is None:
            channel.close()
            return
        try:
            response = spec.error_response(request, slot.version, ErrorCode.UNKNOWN_SERVER_ERROR)
        except Exception:
            log.exception("building the error response failed")
            channel.close()
            return
        channel.complete(slot, response)
