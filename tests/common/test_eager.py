"""kbroker.utils.eager: a coroutine runs at once as far as it goes without waiting; the
rest runs in a Task that resumes it as asyncio's Task would (results, exceptions,
cancellation where it waits)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kbroker.utils.eager import NOT_DONE, start_eagerly


def run(body: Any) -> Any:
    return asyncio.run(asyncio.wait_for(body(), 10))


def in_task(handler: Any) -> tuple[asyncio.Future[int], asyncio.Task[Any]]:
    """A pending future, and the Task `handler(future)` went on in after its eager start."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    result, task = start_eagerly(loop, handler(fut))
    assert result is NOT_DONE and task is not None
    return fut, task


def test_a_coroutine_that_never_waits_finishes_in_the_call() -> None:
    steps: list[str] = []

    async def handler() -> int:
        steps.append("ran")
        return 7

    async def body() -> None:
        loop = asyncio.get_running_loop()
        result, task = start_eagerly(loop, handler())
        assert (result, task, steps) == (7, None, ["ran"])
    run(body)


def test_an_exception_raised_before_waiting_is_raised_by_the_call() -> None:
    async def handler() -> None:
        raise ValueError("refused")

    async def body() -> None:
        with pytest.raises(ValueError, match="refused"):
            start_eagerly(asyncio.get_running_loop(), handler())
    run(body)


def test_a_waiting_coroutine_goes_on_in_a_task_from_where_it_stopped() -> None:
    steps: list[str] = []

    async def handler(fut: asyncio.Future[int]) -> int:
        steps.append("before")
        value = await fut
        steps.append("after")
        await asyncio.sleep(0)  # a bare yield: one more loop turn
        return value + 1

    async def body() -> None:
        fut, task = in_task(handler)
        assert steps == ["before"]  # ran at once, up to its wait
        asyncio.get_running_loop().call_later(0.01, fut.set_result, 41)
        assert await task == 42
        assert steps == ["before", "after"]
    run(body)


def test_the_awaited_futures_exception_is_raised_where_the_coroutine_waits() -> None:
    async def handler(fut: asyncio.Future[int]) -> str:
        try:
            await fut
        except KeyError as e:
            return f"caught {e}"
        return "not raised"

    async def body() -> None:
        fut, task = in_task(handler)
        fut.set_exception(KeyError("k"))
        assert await task == "caught 'k'"
    run(body)


@pytest.mark.parametrize("bare_yield", [False, True])
def test_cancelling_the_task_cancels_the_coroutine_where_it_waits(bare_yield: bool) -> None:
    seen: list[str] = []

    async def handler(fut: asyncio.Future[int]) -> None:
        try:
            if bare_yield:
                while True:
                    await asyncio.sleep(0)
            await fut
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def body() -> None:
        fut, task = in_task(handler)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["cancelled"]
        assert fut.cancelled() != bare_yield  # what it waited on was cancelled with it
    run(body)


def test_a_cancel_that_comes_after_the_future_finished_still_reaches_the_coroutine() -> None:
    """The future is done but the Task has not resumed yet when it is cancelled: asyncio
    then throws CancelledError into the Task, which must not be lost."""
    seen: list[str] = []

    async def handler(fut: asyncio.Future[int]) -> None:
        try:
            await fut
            seen.append("resumed")
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def body() -> None:
        fut, task = in_task(handler)
        await asyncio.sleep(0)  # the Task waits on fut now
        fut.set_result(1)
        task.cancel()  # before the Task's wake-up ran
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["cancelled"]
    run(body)
