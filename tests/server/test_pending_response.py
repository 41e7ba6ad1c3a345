"""PendingResponse: an answer completed by a callback, told to the connection at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kbroker.server.request_context import PendingResponse


def test_the_attached_callback_gets_the_response_when_completed() -> None:
    pending = PendingResponse()
    got: list[Any] = []
    pending.attach(lambda response, error: got.append((response, error)))
    assert got == []
    pending.complete("answer")
    assert got == [("answer", None)] and pending.done
    pending.complete("again")  # once only
    pending.fail(RuntimeError("late"))
    assert got == [("answer", None)]


def test_attached_after_completion_it_is_called_at_once() -> None:
    pending = PendingResponse()
    error = RuntimeError("read failed")
    pending.fail(error)
    got: list[Any] = []
    pending.attach(lambda response, err: got.append((response, err)))
    assert got == [(None, error)]


def test_a_cancelled_response_calls_nothing() -> None:
    pending = PendingResponse()
    got: list[Any] = []
    pending.attach(lambda response, error: got.append(response))
    pending.cancel()
    assert pending.cancelled and pending.done
    pending.complete("answer")
    assert got == []


def test_awaiting_gives_the_response_or_raises() -> None:
    async def scenario() -> None:
        pending = PendingResponse()
        asyncio.get_running_loop().call_later(0.01, pending.complete, "answer")
        assert await pending == "answer"
        failed = PendingResponse()
        failed.fail(ValueError("bad"))
        with pytest.raises(ValueError):
            await failed

    asyncio.run(scenario())
