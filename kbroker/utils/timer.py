"""The clock and timer that delayed operations wait on (Kafka's server.util.timer.Timer).

A parked request waits in real time: a Fetch's max_wait_ms and a Produce's timeout_ms are
network time, not the broker's injected wall clock (`utils/time.py`, which tests may
freeze). `LoopTimer` is the event loop's monotonic clock and its `call_at`; `MockTimer`
is a clock that moves only when a test advances it, running what fell due in deadline
order, as Kafka's MockTimer does for its purgatory tests.

Both speak seconds, the loop's unit. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...

    def when(self) -> float: ...


class Timer(Protocol):
    def time(self) -> float:
        """Now, in seconds of this timer's monotonic clock."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback()` once at `when` (this timer's clock), unless cancelled."""
        ...


class LoopTimer:
    """The running event loop's clock and timers."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_at(when, callback)


class _MockHandle:
    __slots__ = ("_when", "callback")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self._when = when
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self.callback = None

    def when(self) -> float:
        return self._when


class MockTimer:
    """A clock that moves only by `advance`; due callbacks run inside it, earliest first."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._due: list[tuple[float, int, _MockHandle]] = []
        self._sequence = itertools.count()

    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        handle = _MockHandle(when, callback)
        heapq.heappush(self._due, (when, next(self._sequence), handle))
        return handle

    def advance(self, seconds: float) -> None:
        """Move the clock on, running every callback due by the new time (including those
        the callbacks schedule within it)."""
        target = self._now + seconds
        while self._due and self._due[0][0] <= target:
            when, _seq, handle = heapq.heappop(self._due)
            self._now = max(self._now, when)
            callback, handle.callback = handle.callback, None
            if callback is not None:
                callback()
        self._now = target

    @property
    def pending(self) -> int:
        """Callbacks scheduled and not yet run or cancelled."""
        return sum(1 for _w, _s, h in self._due if h.callback is not None)
