"""What a request handler sees besides the request: who asked, how, and the services it
may use (RequestServices: the broker's collaborators, never the broker itself)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbroker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kbroker.server.request_services import RequestServices


class _CloseConnection:
    def __repr__(self) -> str:
        return "CLOSE_CONNECTION"


# A handler's answer meaning: no response; close the connection once the
# responses of earlier requests are sent.
CLOSE_CONNECTION = _CloseConnection()

# What a PendingResponse's connection is told: the response, or the error that ended it.
OnDone = Callable[[Any, BaseException | None], None]


class PendingResponse:
    """A handler's answer that comes later, from a callback: a parked Fetch re-read when
    an append wakes it, an acks=all Produce when the high watermark passes its batches.

    The connection attaches to it and completes the request's slot inside the callback
    that calls `complete` (no task, no extra loop turn; the response still leaves in
    request order). `cancel` (the connection closed) tells the callback's owner to stop
    re-reading; `complete` and `fail` after it, or a second time, do nothing. Awaiting it
    (the console's handler calls) gives the response or raises the error.

    Event-loop thread only."""

    __slots__ = ("_on_done", "done", "cancelled", "_response", "_error")

    def __init__(self) -> None:
        self._on_done: OnDone | None = None
        self.done = False
        self.cancelled = False
        self._response: Any = None
        self._error: BaseException | None = None

    def attach(self, on_done: OnDone) -> None:
        """Call `on_done(response, error)` when the answer is there (at once if it is)."""
        if self.done:
            if not self.cancelled:
                on_done(self._response, self._error)
        else:
            self._on_done = on_done

    def complete(self, response: Any) -> None:
        self._finish(response, None)

    def fail(self, error: BaseException) -> None:
        self._finish(None, error)

    def cancel(self) -> None:
        if not self.done:
            self.done = self.cancelled = True
            self._on_done = None

    def _finish(self, response: Any, error: BaseException | None) -> None:
        if self.done:
            return
        self.done, self._response, self._error = True, response, error
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(response, error)

    def __await__(self) -> Generator[Any, None, Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(response: Any, error: BaseException | None) -> None:
            if not fut.done():
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(response)
        self.attach(done)
        return fut.__await__()


@dataclass(frozen=True, slots=True)
class RequestContext:
    services: RequestServices
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener_name: str
    peer: str
    principal: KafkaPrincipal = ANONYMOUS  # who the connection authenticated as
    client_software: str | None = None  # NAME/VERSION, from the connection's ApiVersions v3+

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        return self.peer.rsplit(":", 1)[0]
