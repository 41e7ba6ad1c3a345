"""ZooKeeperClient's session events reach every StateChangeHandler registered (Kafka's
registerStateChangeHandler), in the order registered; an event a handler leaves None
passes it by. No ZooKeeper: the events are the ones kazoo's listener and the probe raise."""

from __future__ import annotations

import asyncio

from kazoo.client import KazooState

from kbroker.cluster.zk_client import StateChangeHandler, ZooKeeperClient


async def handed_over(loop: asyncio.AbstractEventLoop) -> None:
    """Once the loop has run what kazoo's thread handed it (its callbacks run in order)."""
    done = loop.create_future()
    loop.call_soon_threadsafe(done.set_result, None)
    await done


async def session_events() -> list[tuple[str, object]]:
    heard: list[tuple[str, object]] = []
    zk = ZooKeeperClient("127.0.0.1:1", 6000, 1000, asyncio.get_running_loop())
    zk.register_state_change_handler(StateChangeHandler(
        "replicas", on_fenced=lambda fenced: heard.append(("replicas fenced", fenced)),
        on_session_expired=lambda: heard.append(("replicas expired", None))))
    zk.register_state_change_handler(StateChangeHandler(
        "registration", on_new_session=lambda: heard.append(("registration new session", None))))
    zk._state_changed(KazooState.LOST)  # kazoo's thread: the session is gone
    zk._state_changed(KazooState.CONNECTED)  # and a new one
    await handed_over(asyncio.get_running_loop())
    zk._set_fenced(False)  # the probe: ZooKeeper answers again
    return heard


def test_the_session_events_reach_every_handler() -> None:
    assert asyncio.run(session_events()) == [
        ("replicas fenced", True), ("replicas expired", None),
        ("registration new session", None), ("replicas fenced", False)]


def test_a_handler_of_the_same_name_replaces_the_first() -> None:
    async def run() -> list[str]:
        heard: list[str] = []
        zk = ZooKeeperClient("127.0.0.1:1", 6000, 1000, asyncio.get_running_loop())
        zk.register_state_change_handler(StateChangeHandler("a", on_fenced=lambda _f: heard.append("old")))
        zk.register_state_change_handler(StateChangeHandler("a", on_fenced=lambda _f: heard.append("new")))
        zk._set_fenced(True)
        return heard

    assert asyncio.run(run()) == ["new"]
