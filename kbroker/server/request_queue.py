"""RequestQueue: how many requests (and bytes of them) the broker holds at once.

Kafka's network threads stop reading from sockets while its request channel holds
`queued.max.requests` requests, or while the request memory pool of
`queued.max.request.bytes` (-1: unbounded) is used up. kbroker handles a request as
soon as it is read, so what it holds is each request read and not yet answered
(a parked long-poll Fetch, a Produce waiting for its fsync, a JoinGroup waiting
for the group, responses waiting behind them), counted from the frame being read to
its response leaving the connection's slot queue. While the queue is full no
connection reads another request; each is resumed when answers make room. A full
queue always drains: parked requests end by their own timeouts.

Lock: the event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class RequestQueue:
    def __init__(self, loop: asyncio.AbstractEventLoop, max_requests: int, max_bytes: int) -> None:
        self._loop = loop
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # <= 0: no bound, as Kafka's -1
        self.requests = 0
        self.bytes = 0
        self._waiting: dict[object, Callable[[], None]] = {}

    @property
    def full(self) -> bool:
        return self.requests >= self.max_requests or 0 < self.max_bytes <= self.bytes

    def add(self, size: int) -> None:
        self.requests += 1
        self.bytes += size

    def remove(self, size: int) -> None:
        self.requests -= 1
        self.bytes -= size
        if self._waiting and not self.full:
            waiting, self._waiting = self._waiting, {}
            for resume in waiting.values():
                self._loop.call_soon(resume)

    def wait(self, owner: object, resume: Callable[[], None]) -> None:
        """Call `resume` (soon) once the queue has room again."""
        self._waiting[owner] = resume

    def forget(self, owner: object) -> None:
        self._waiting.pop(owner, None)
