"""Run a coroutine at once, as far as it goes without waiting: Python 3.12's eager tasks
(asyncio.eager_task_factory) for one coroutine, on 3.11.

A request handler that is a coroutine usually waits for nothing on a single broker (an
EndTxn's PrepareCommit, an AddPartitionsToTxn's Ongoing: appended, no follower to wait
for). Started in a Task it would run a loop turn later, behind whatever else that turn
holds, and its answer a turn after that. `start_eagerly` runs it in the caller's turn; only
a coroutine that really waits (a future not done yet, or a bare `yield` as asyncio.sleep(0)
makes) goes on in a Task, from where it stopped.

The Task drives the coroutine as asyncio's own Task would: it takes the future the
coroutine yielded (clearing its `_asyncio_future_blocking`, as Task.__step does), waits
for it and then resumes the coroutine (`send(None)`: the coroutine's await reads the
future's result or raises its exception). Cancelling the Task cancels that future, so the
coroutine sees CancelledError where it waits; while it only yielded a loop turn, the
CancelledError is thrown into it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

NOT_DONE: Any = object()  # start_eagerly's result while the coroutine goes on in a Task


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]
                  ) -> tuple[Any, asyncio.Task[Any] | None]:
    """(the coroutine's result, None) when it finished without waiting (an exception it
    raised is raised here), else (NOT_DONE, the Task that runs the rest)."""
    try:
        waited = coro.send(None)
    except StopIteration as e:
        return e.value, None
    return NOT_DONE, loop.create_task(_drive(coro, waited))


async def _drive(coro: Coroutine[Any, Any, Any], waited: Any) -> Any:
    while True:
        thrown: BaseException | None = None
        if waited is None:  # a bare yield: one loop turn
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as e:
                thrown = e
        else:
            # What asyncio's Task does with a future a coroutine yields: take over its
            # "blocking" flag (an await that finds it set refuses the future).
            waited._asyncio_future_blocking = False
            try:
                await waited
            except asyncio.CancelledError as e:
                if not waited.cancelled():  # this Task was cancelled, not what it waits on
                    thrown = e
            except Exception:  # the future's: the coroutine's own await raises it below
                pass
        try:
            waited = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as stop:
            return stop.value
