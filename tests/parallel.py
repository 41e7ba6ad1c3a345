"""The suite on pytest-xdist workers. scripts/test runs the unit, integration and cluster
tiers with `-n 2 --dist loadfile`, so that one worker runs a whole module and a
module-scoped fixture (a broker, a PKI, a client suite's download) is made once, not once
per worker. For runs by hand with `--dist loadgroup`, each test above the unit tier is
put in its module's xdist_group (seen on 2026-12-02 with pytest-xdist 3.8: a module's
tests still went to both workers, which is why scripts/test uses loadfile). A module or
test that marks its own pytest.mark.xdist_group keeps it. On a worker, the modules of the longest tests
(LONGEST_FIRST: a minute or more each on a loaded machine) are collected first, so that
they start first and the run does not end waiting on one of them while the other worker
idles; the order of everything else is unchanged.

What makes a test safe on a worker beside another: servers bind ports from free_port() or
0, files go under tmp_path, nothing is named after a fixed path in /tmp, and a bounded
run is bounded by its work (a number of executions, seeds or examples), never by a
wall-clock budget that two runs at once overrun.

Owns: nothing beyond the markers it adds at collection.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tiers import tier_of

TESTS = Path(__file__).parent
LONGEST_FIRST = ("test_fuzz_targets.py", "test_lint.py", "perf/test_micro_benchmarks.py",
                 "test_layering.py", "core/test_batch_encode.py")


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with those of the LONGEST_FIRST modules first, in that order (a stable sort:
    each module's own order kept, and everything else's)."""
    rank = {TESTS / name: i for i, name in enumerate(LONGEST_FIRST)}
    return sorted(items, key=lambda item: rank.get(Path(str(item.path)), len(rank)))


def group_of(item: pytest.Item) -> str | None:
    """The xdist_group `item` is given: its module's path under tests/ when it is above
    the unit tier and has none of its own, else None."""
    if item.get_closest_marker("xdist_group") is not None or tier_of(item) == "unit":
        return None
    path = Path(str(item.path))
    return str(path.relative_to(TESTS)) if TESTS in path.parents else str(path)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # on a worker: the longest first
        items[:] = longest_first(items)
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
