"""Every librdkafka client a test makes is gone when the test (or its fixture) ends.

A confluent-kafka Producer, Consumer or AdminClient that outlives its test keeps
reconnecting to its bootstrap address once that test's broker has stopped. The
address is a loopback port from the ephemeral range, so later in the run another
server can be listening there: in CI a leaked producer connected to the one-shot
socket Spark opens to hand a DataFrame's rows to pyspark, Spark took its
ApiVersions bytes for a failed authentication and closed the socket, and the test
that collected the DataFrame failed with "Connection refused".

This plugin makes the three client classes of `confluent_kafka` remember each
instance (weakly) with where it was made: in a test body or a function-scoped
fixture, or in a fixture of a wider scope. A client made
in a test must be unreachable once the test's teardown has finished; one made in a
module- or session-scoped fixture once that fixture is finalized. A client still
alive then (after a garbage collection) is purged and closed, so it cannot reach a
later test's server, and the test that made it errors, naming where it was made.
"""

from __future__ import annotations

import gc
import sys
import threading
import traceback
import weakref
from collections.abc import Generator
from typing import Any

import pytest

try:
    import confluent_kafka
    import confluent_kafka.admin
except ImportError:  # pragma: no cover - the test extra installs it
    confluent_kafka = None


class _Made:
    """Where one client was made: the owner (a test node id or a fixture) and the line."""

    __slots__ = ("owner", "where")

    def __init__(self, owner: object, where: str) -> None:
        self.owner = owner
        self.where = where


_live: weakref.WeakKeyDictionary[Any, _Made] = weakref.WeakKeyDictionary()
_owners: list[object] = []  # the fixture being set up, innermost last; else the test


def _made_here() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        if "site-packages" not in frame.filename and frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def _track(client: Any) -> None:
    _live[client] = _Made(_owners[-1] if _owners else None, _made_here())


def _tracked(base: type) -> type:
    """A subclass of one of the C client types that remembers its instances."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        _track(self)
    return type(base.__name__, (base,), {"__init__": __init__, "__module__": base.__module__})


def install() -> None:
    if confluent_kafka is None:
        return
    confluent_kafka.Producer = _tracked(confluent_kafka.Producer)
    confluent_kafka.Consumer = _tracked(confluent_kafka.Consumer)
    # AdminClient is a Python class whose __init__ names itself (super(AdminClient, self)):
    # wrap its __init__ in place rather than shadow it with a subclass
    admin = confluent_kafka.admin.AdminClient
    init = admin.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _track(self)
    admin.__init__ = __init__  # type: ignore[method-assign]


def _close(client: Any) -> None:
    """Stop a leaked client from reaching anything again, waiting at most 10 s (a
    consumer's close may wait for a group coordinator that is gone)."""
    def close() -> None:
        try:
            if hasattr(client, "purge"):
                client.purge()  # nothing left to flush: close() returns at once
            if hasattr(client, "close"):
                client.close()
        except RuntimeError:  # a consumer its test closed already
            pass
    closer = threading.Thread(target=close, name="close-leaked-client", daemon=True)
    closer.start()
    closer.join(10)


def _leaked_by(owner: object) -> list[str]:
    """Close the clients `owner` made that are still alive; say where each was made."""
    if not any(made.owner is owner for made in _live.values()):
        return []
    gc.collect()
    leaked = [(client, made) for client, made in list(_live.items()) if made.owner is owner]
    for client, _ in leaked:
        del _live[client]
        _close(client)
    return [f"{type(client).__name__} made at {made.where}" for client, made in leaked]


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any],
                         request: pytest.FixtureRequest) -> Generator[None, None, None]:
    wide = fixturedef.scope != "function"
    if wide:
        _owners.append(fixturedef)
    try:
        yield
    finally:
        if wide:
            _owners.pop()


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any],
                                  request: pytest.FixtureRequest) -> None:
    if fixturedef.scope == "function":
        return
    leaked = _leaked_by(fixturedef)
    if leaked:
        request.node.warn(pytest.PytestWarning(
            f"fixture {fixturedef.argname} left clients open: {'; '.join(leaked)}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield
    # pytest drops the test's fixture values (item.funcargs) only after this hook:
    # a client held there alone is not leaked
    if isinstance(item, pytest.Function):
        item.funcargs = {}
    # a test that failed is held by sys.last_traceback (pytest keeps it for a post-mortem),
    # and its frames hold the clients its finally blocks closed: its failure is the error
    # to report, not those clients
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    leaked = _leaked_by(None)
    if leaked:
        pytest.fail(f"{item.nodeid} left confluent-kafka clients open (closed now): "
                    + "; ".join(leaked), pytrace=False)
