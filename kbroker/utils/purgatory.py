"""Delayed operations and the purgatory they wait in (Kafka's DelayedOperation and
DelayedOperationPurgatory).

A delayed operation is a request that cannot be answered yet: an acks=all Produce waiting
for its followers (DelayedProduce), a Fetch waiting for min_bytes (DelayedFetch). It
waits on keys (the partitions it depends on) and a deadline. Whoever changes a key's
state calls `check_and_complete(key)`: each operation watching it is tried again
(`try_complete`) inside that call, with no hand-over to another task, as Kafka completes
a DelayedFetch in the thread that appended. At its deadline an operation is completed
anyway (`force_complete`, then `on_expiration`). One timer serves every deadline of a
purgatory: a loop timer per operation cost more than the rest of parking.

While `held` (the requests of one read from a connection, a Fetch's read) checks are
gathered and run when the outermost hold ends, as Kafka's ActionQueue completes delayed
requests after a request's appends: a Fetch woken by Produces of several partitions, or
by several pipelined Produces, reads them all at once. A gathered check tries only the
operations watching since before it: an operation is not woken by what its own try did
(a follower's Fetch that moved the high watermark and then parked again).

Time comes from the injected Timer (`utils/timer.py`): the loop's clock in a broker, a
MockTimer in unit tests. Event-loop thread only.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Hashable, Iterable

from kbroker.utils.timer import Timer, TimerHandle

log = logging.getLogger(__name__)


class DelayedOperation:
    """An operation completed once: by `try_complete` (when its condition holds), by
    `force_complete` (its owner gives up on it), or at its deadline (the purgatory forces
    it, then calls `on_expiration`). Subclasses implement `try_complete` (call
    `force_complete` and return its result when the condition holds, else return False)
    and `on_complete` (answer)."""

    __slots__ = ("deadline", "completed", "sequence", "_purgatory", "_keys")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # on the purgatory's timer clock, seconds
        self.completed = False
        self.sequence = -1  # watching since the check numbered just below it
        self._purgatory: DelayedOperationPurgatory | None = None
        self._keys: list[Hashable] = []

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """After an expiry's `on_complete` (Kafka counts expirations here)."""

    def force_complete(self) -> bool:
        """Complete now, once: True for the call that completed it."""
        if self.completed:
            return False
        self.completed = True
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._forget(self)
        self.on_complete()
        return True


class DelayedOperationPurgatory:
    """See the module docstring."""

    def __init__(self, name: str, timer: Timer) -> None:
        self.name = name
        self.timer = timer
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._holds = 0
        self._held: dict[Hashable, int] = {}  # key -> the sequence of its last gathered check
        self._hold = _Hold(self)
        # Deadlines of watched operations, earliest first; completed ones go when they
        # reach the top. One timer, at the earliest deadline still watched.
        self._deadlines: list[tuple[float, int, DelayedOperation]] = []
        self._sequence = itertools.count()
        self._timer_handle: TimerHandle | None = None

    # -- watching ------------------------------------------------------------------------
    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Try `op` now; if it cannot complete, watch it on `keys` until its deadline.
        Returns whether it completed now."""
        if op.try_complete():
            return True
        if not op.completed:
            self.watch(op, keys)
        return op.completed

    def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Watch `op` (just tried by its owner) on `keys` until its deadline."""
        op._purgatory = self
        op._keys = list(keys)
        op.sequence = next(self._sequence)
        for key in op._keys:
            self._watchers.setdefault(key, {})[op] = None
        heapq.heappush(self._deadlines, (op.deadline, op.sequence, op))
        self._arm()

    @property
    def watched(self) -> int:
        """Operations watched and not completed (Kafka's purgatory size)."""
        return len({op for ops in self._watchers.values() for op in ops})

    # -- checks ----------------------------------------------------------------------------
    def check_and_complete(self, key: Hashable) -> None:
        """`key` changed: try each operation watching it (later, if held)."""
        if self._holds:
            self._held[key] = next(self._sequence)
            return
        watchers = self._watchers.get(key)
        if watchers:
            for op in list(watchers):
                self._attempt(op)

    def check_and_complete_all(self) -> None:
        for key in list(self._watchers):
            self.check_and_complete(key)

    def held(self) -> _Hold:
        """A context (reentrant) during which checks wait for its end."""
        return self._hold

    def _release(self) -> None:
        self._holds -= 1
        if not self._holds and self._held:
            held, self._held = self._held, {}
            for key, sequence in held.items():
                watchers = self._watchers.get(key)
                if watchers:
                    for op in [op for op in watchers if op.sequence < sequence]:
                        self._attempt(op)

    def _attempt(self, op: DelayedOperation) -> None:
        if op.completed:
            return
        self._holds += 1  # what its try changes is checked after it, not inside it
        try:
            if not op.try_complete() and not op.completed:
                op.sequence = next(self._sequence)
        except Exception:  # as the loop does for a callback: the other operations still run
            log.exception("%s: trying a delayed operation failed", self.name)
        finally:
            self._release()

    def _forget(self, op: DelayedOperation) -> None:
        for key in op._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(op, None)
                if not watchers:
                    del self._watchers[key]
        op._keys = []

    # -- deadlines -------------------------------------------------------------------------
    def _arm(self) -> None:
        deadlines = self._deadlines
        while deadlines and deadlines[0][2].completed:
            heapq.heappop(deadlines)
        if not deadlines:
            return
        deadline = deadlines[0][0]
        handle = self._timer_handle
        if handle is None or deadline < handle.when():
            if handle is not None:
                handle.cancel()
            self._timer_handle = self.timer.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer_handle = None
        now = self.timer.time()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            op = heapq.heappop(deadlines)[2]
            try:
                if op.force_complete():
                    op.on_expiration()
            except Exception:
                log.exception("%s: expiring a delayed operation failed", self.name)
        self._arm()


class _Hold:
    """DelayedOperationPurgatory.held's context (a class: a generator-based one cost more
    than the appends it wraps)."""

    __slots__ = ("purgatory",)

    def __init__(self, purgatory: DelayedOperationPurgatory) -> None:
        self.purgatory = purgatory

    def __enter__(self) -> None:
        self.purgatory._holds += 1

    def __exit__(self, *exc: object) -> None:
        self.purgatory._release()
