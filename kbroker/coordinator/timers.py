"""Timers: delayed operations keyed to an injected clock (session and rebalance timeouts).

A heap of (deadline, seq, callback) read against `Time.monotonic_ms()`. With an
event loop attached, the earliest deadline is armed with `loop.call_later`; tests
use a MockTime and call `run_due()` after moving the clock, so no real time passes.

Lock: the broker's event-loop thread only. Invariant: a cancelled timer never fires.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable

from kbroker.utils.time import Time

log = logging.getLogger(__name__)


class Timer:
    __slots__ = ("deadline_ms", "callback", "cancelled")

    def __init__(self, deadline_ms: int, callback: Callable[[], None]) -> None:
        self.deadline_ms = deadline_ms
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    def __init__(self, time: Time, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.time = time
        self.loop = loop
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None
        self._running = False

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> Timer:
        timer = Timer(self.time.monotonic_ms() + max(delay_ms, 0), callback)
        heapq.heappush(self._heap, (timer.deadline_ms, next(self._seq), timer))
        self._arm()
        return timer

    def run_due(self) -> int:
        """Fire every timer whose deadline has passed; returns how many fired."""
        fired = 0
        self._running = True
        try:
            while self._heap:
                deadline, _, timer = self._heap[0]
                if deadline > self.time.monotonic_ms():
                    break
                heapq.heappop(self._heap)
                if timer.cancelled:
                    continue
                timer.cancelled = True
                fired += 1
                try:
                    timer.callback()
                except Exception:
                    log.exception("timer callback failed")
        finally:
            self._running = False
        self._arm()
        return fired

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._heap.clear()
        self.loop = None

    def __len__(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def _arm(self) -> None:
        if self.loop is None or self._running:
            return
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        if not self._heap:
            return
        deadline = self._heap[0][0]
        if self._handle is not None and self._armed_for is not None and self._armed_for <= deadline:
            return
        if self._handle is not None:
            self._handle.cancel()
        delay = max(deadline - self.time.monotonic_ms(), 0) / 1000
        self._armed_for = deadline
        self._handle = self.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        self.run_due()
