"""Parked Fetches (waiting for min_bytes or their max wait) and what wakes them: new
data or a moved high watermark on one of their partitions, as the ReplicaManager
reports (`on_change`). BrokerState owns the one AppendNotifier of a broker; Fetch parks
in it, and Produce, Fetch and each read from a connection hold its notifications."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)


class AppendNotifier:
    """Wakes parked Fetch requests when a partition they wait on gets new data (or a moved
    high watermark).

    A parked request is a callback (`park`), called once: inside the `notify` of one of
    its partitions, or at its deadline (one loop timer serves every deadline). Kafka's
    DelayedFetch is completed in the thread that appended the same way, with no hand-over
    to another task. While `held` (the requests of one read from a connection: a
    producer's pipelined Produces; a Fetch's read), notifications are gathered and
    delivered when the outermost hold ends, as Kafka's ActionQueue completes delayed
    requests after a request's appends: a Fetch woken by Produces of several partitions,
    or by several pipelined Produces, reads them all at once. A gathered notification
    wakes only the requests parked before it: a follower's Fetch that moved the high
    watermark and then parked is not woken by its own move. Event-loop thread only."""

    def __init__(self) -> None:
        self._waiters: dict[Any, dict[_Parked, None]] = {}
        self._holds = 0
        self._held: dict[Any, int] = {}  # partition -> sequence of its last notification
        self._hold = _Hold(self)
        # The parked requests' deadlines, earliest first, and one loop timer for the
        # earliest live one: a loop timer per park cost more than the rest of parking
        # (asyncio orders its timers with a Python __lt__, cancelled ones included).
        # Entries of requests woken or cancelled go when they reach the top.
        self._deadlines: list[tuple[float, int, _Parked]] = []
        self._sequence = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def notify(self, tp: Any) -> None:
        if self._holds:
            self._held[tp] = next(self._sequence)
            return
        for parked in self._waiters.pop(tp, ()):
            parked.fire()

    def notify_all(self) -> None:
        for tp in list(self._waiters):
            self.notify(tp)

    def held(self) -> _Hold:
        """A context (reentrant) during which notifications wait for its end."""
        return self._hold

    def _release(self) -> None:
        self._holds -= 1
        if not self._holds and self._held:
            held, self._held = self._held, {}
            for tp, sequence in held.items():
                waiters = self._waiters.get(tp)
                if waiters:
                    for parked in [p for p in waiters if p.sequence < sequence]:
                        parked.fire()

    def park(self, tps: Iterable[Any], timeout_s: float, callback: Callable[[], None]) -> _Parked:
        """Call `callback()` once: after any of `tps` is notified, or after `timeout_s`.
        The registration goes when it fires or is cancelled."""
        parked = _Parked(self, list(tps), callback, next(self._sequence))
        for tp in parked.keys:
            self._waiters.setdefault(tp, {})[parked] = None
        loop = asyncio.get_running_loop()
        heapq.heappush(self._deadlines, (loop.time() + timeout_s, parked.sequence, parked))
        self._arm(loop)
        return parked

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer at the earliest deadline of a request still parked."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][2].callback is None:
            heapq.heappop(deadlines)
        if not deadlines:
            return
        deadline = deadlines[0][0]
        timer = self._timer
        if timer is None or deadline < timer.when():
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """The timer: the requests whose deadline passed are called (they answer)."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            heapq.heappop(deadlines)[2].fire()
        self._arm(loop)

    def wait(self, tps: Iterable[Any], timeout_s: float) -> asyncio.Future[None]:
        """A future done after any of `tps` is notified, or after `timeout_s`.

        Registered by this call, not when first awaited: an append before the future is
        awaited still wakes it. The registration goes when the future is done, cancelled
        (its awaiting task was) or not."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        parked = self.park(tps, timeout_s, lambda: _wake(fut))
        fut.add_done_callback(lambda _f: parked.cancel())
        return fut

    def _forget(self, parked: _Parked) -> None:
        for tp in parked.keys:
            waiters = self._waiters.get(tp)
            if waiters is not None:
                waiters.pop(parked, None)
                if not waiters:
                    del self._waiters[tp]


class _Hold:
    """AppendNotifier.held's context (a class: a generator-based one cost more than the
    appends it wraps)."""

    __slots__ = ("notifier",)

    def __init__(self, notifier: AppendNotifier) -> None:
        self.notifier = notifier

    def __enter__(self) -> None:
        self.notifier._holds += 1

    def __exit__(self, *exc: object) -> None:
        self.notifier._release()


class _Parked:
    """One parked request in the AppendNotifier."""

    __slots__ = ("notifier", "keys", "callback", "sequence")

    def __init__(self, notifier: AppendNotifier, keys: list[Any], callback: Callable[[], None],
                 sequence: int) -> None:
        self.notifier = notifier
        self.keys = keys
        self.callback: Callable[[], None] | None = callback
        self.sequence = sequence  # parked after the notifications numbered below it

    def fire(self) -> None:
        callback = self.callback
        if callback is None:
            return
        self.cancel()
        try:
            callback()
        except Exception:  # as the loop does for a callback: the other parked still wake
            log.exception("waking a parked request failed")

    def cancel(self) -> None:
        if self.callback is None:
            return
        self.callback = None
        self.notifier._forget(self)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
