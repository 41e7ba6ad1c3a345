"""AppendNotifier: a wait is registered when asked for, and forgotten however it ends."""

from __future__ import annotations

import asyncio

from kbroker.broker import AppendNotifier


def test_a_wait_is_registered_before_it_is_awaited() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        parked = notifier.wait(["a", "b"], 60)
        notifier.notify("b")  # before anyone awaits
        await asyncio.wait_for(parked, 5)
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_wait_ends_after_its_timeout_and_is_forgotten() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        await notifier.wait(["a"], 0.01)
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_cancelled_waiter_is_forgotten() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        task = asyncio.ensure_future(notifier.wait(["a", "b"], 60))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        assert notifier._waiters == {}
        notifier.notify("a")  # nothing left to wake

    asyncio.run(scenario())
