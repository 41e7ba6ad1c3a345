"""AppendNotifier: a wait is registered when asked for, and forgotten however it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kbroker.server.append_notifier import AppendNotifier


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


def test_a_parked_callback_runs_inside_notify_once_and_is_forgotten() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[str] = []
        notifier.park(["a", "b"], 60, lambda: calls.append("woken"))
        notifier.notify("a")
        assert calls == ["woken"]  # in the notify, not on a later loop turn
        notifier.notify("b")
        notifier.notify("a")
        assert calls == ["woken"]
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_parked_callback_runs_at_its_timeout() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        woken = asyncio.Event()
        notifier.park(["a"], 0.01, woken.set)
        await asyncio.wait_for(woken.wait(), 5)
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_callback_that_parks_again_waits_for_the_next_notify() -> None:
    """A Fetch woken with still too little to answer parks again from its callback."""
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[int] = []

        def woken() -> None:
            calls.append(len(calls))
            if len(calls) < 2:
                notifier.park(["a"], 60, woken)
        notifier.park(["a"], 60, woken)
        notifier.notify("a")
        assert calls == [0] and set(notifier._waiters) == {"a"}
        notifier.notify("a")
        assert calls == [0, 1] and notifier._waiters == {}

    asyncio.run(scenario())


def test_notifications_wait_for_the_outermost_hold() -> None:
    """A Produce of several partitions wakes a Fetch once, after all its appends."""
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[str] = []
        notifier.park(["a", "b"], 60, lambda: calls.append("ab"))
        notifier.park(["b"], 60, lambda: calls.append("b"))
        with notifier.held():
            notifier.notify("a")
            with notifier.held():
                notifier.notify("b")
            assert calls == []
        assert sorted(calls) == ["ab", "b"]
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_cancelled_park_is_not_called() -> None:
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[str] = []
        parked = notifier.park(["a"], 0.01, lambda: calls.append("woken"))
        parked.cancel()
        assert notifier._waiters == {}
        notifier.notify("a")
        # a witness parked after it, with a later deadline: once it fires at its deadline,
        # the cancelled one's has passed too
        expired = asyncio.get_running_loop().create_future()
        notifier.park(["b"], 0.02, lambda: expired.set_result(None))
        await asyncio.wait_for(expired, 10)
        assert calls == []

    asyncio.run(scenario())


def test_parked_callbacks_time_out_in_deadline_order_whatever_was_woken_or_cancelled() -> None:
    """One timer serves every deadline: a later park with an earlier deadline is called
    first, and a woken or cancelled one does not hold back the others."""
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[str] = []
        done = asyncio.Event()

        def call(name: str) -> Callable[[], None]:
            def callback() -> None:
                calls.append(name)
                if len(calls) == 4:
                    done.set()
            return callback
        notifier.park(["a"], 0.2, call("late"))
        notifier.park(["b"], 0.01, call("early"))
        notifier.park(["c"], 0.005, call("woken"))
        notifier.park(["d"], 0.001, call("cancelled")).cancel()
        notifier.park(["e"], 0.05, call("middle"))
        notifier.notify("c")
        await asyncio.wait_for(done.wait(), 5)
        assert calls == ["woken", "early", "middle", "late"]
        assert notifier._waiters == {}

    asyncio.run(scenario())


def test_a_held_notification_wakes_only_the_requests_parked_before_it() -> None:
    """A follower's Fetch that moved the high watermark (a notification, held until the
    end of its read) and then parked is not woken by its own move; a later one wakes it."""
    async def scenario() -> None:
        notifier = AppendNotifier()
        calls: list[str] = []
        notifier.park(["a"], 60, lambda: calls.append("before"))
        with notifier.held():
            notifier.notify("a")
            notifier.park(["a"], 60, lambda: calls.append("after"))
        assert calls == ["before"] and set(notifier._waiters) == {"a"}
        with notifier.held():
            notifier.notify("a")
        assert calls == ["before", "after"] and notifier._waiters == {}

    asyncio.run(scenario())
