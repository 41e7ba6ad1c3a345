"""The suite on pytest-xdist workers. scripts/test runs the unit, integration and cluster
tiers with `-n 2 --dist loadfile`, so that one worker runs a whole module and a
module-scoped fixture (a broker, a PKI, a client suite's download) is made once, not once
per worker. For runs by hand with `--dist loadgroup`, each test above the unit tier is
put in its module's xdist_group (seen on 2026-12-02 with pytest-xdist 3.8: a module's
tests still went to both workers, which is why scripts/test uses loadfile). A module or
test that marks its own pytest.mark.xdist_group keeps it.

The order modules are handed out in: pytest-xdist's loadfile gives a worker a module
whenever it has two tests or fewer left, taking the next one from the collection's order
(scripts/test passes --no-loadscope-reorder: by default pytest-xdist orders modules by
their number of tests, which put a long module of few tests last, the other worker idle
while it ran). On a worker, the modules are collected longest first by MODULE_SECONDS (what
each took in a run of scripts/test, measured: `python -m tests.parallel DURATIONS` makes
the table from the `--durations=0` lines of a run), so that the run ends on short modules;
a module the table does not know comes after those it knows, in its own order.

What makes a test safe on a worker beside another: servers bind ports from free_port() or
0, files go under tmp_path, nothing is named after a fixed path in /tmp, and a bounded
run is bounded by its work (a number of executions, seeds or examples), never by a
wall-clock budget that two runs at once overrun.

Owns: nothing beyond the markers it adds at collection.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.tiers import tier_of

TESTS = Path(__file__).parent
# Seconds of setup, call and teardown per module, from `--durations=0` of one run of the
# main tiers on 2 workers (2026-12-02, a machine loaded by other runs: about twice the
# quiet figures; every module of 15 s or more). Remade with
# `python -m tests.parallel DURATIONS`; only the order matters.
MODULE_SECONDS: dict[str, float] = {
    "test_fuzz_targets.py": 269,
    "protocol/test_roundtrip.py": 192,
    "cluster/test_replication.py": 177,
    "integration/test_compaction.py": 152,
    "protocol/test_crosscheck.py": 121,
    "cluster/test_cluster_cli.py": 107,
    "integration/test_groups_migration.py": 106,  # measured alone, 2026-12-02 (not in the 2-worker run)
    "integration/test_groups_kip848.py": 66,
    "perf/test_bench_cluster.py": 65,
    "integration/test_lifecycle.py": 58,
    "integration/test_idempotence.py": 54,
    "integration/test_groups_confluent.py": 53,
    "cluster/test_shutdown_without_zookeeper.py": 50,
    "integration/test_kafka_python_suite.py": 37,
    "cluster/test_random_faults.py": 37,
    "cluster/test_cluster_acls.py": 34,
    "cluster/test_fetch_sessions.py": 34,
    "integration/test_alike.py": 34,
    "storage/test_model.py": 33,
    "integration/test_transactions_recovery.py": 33,
    "core/test_crc32c.py": 32,
    "integration/test_request_log.py": 31,
    "cluster/test_transactions.py": 30,
    "cluster/test_network_partitions.py": 30,
    "storage/test_cleaner_model.py": 27,
    "integration/test_log_dir_lock.py": 27,
    "integration/test_admin_confluent.py": 26,
    "integration/test_oauthbearer.py": 26,
    "integration/test_fetch_sizes.py": 24,
    "integration/test_confluent_kafka.py": 22,
    "integration/test_descriptor_budget.py": 22,
    "integration/test_frame_prefix_memory.py": 19,
    "integration/test_node_client.py": 19,
    "integration/test_acls.py": 19,
    "integration/test_log_dir_failure.py": 19,
    "cluster/test_registration.py": 18,
    "integration/test_async_connection.py": 17,
    "integration/test_admin_cli.py": 16,
    "integration/test_security_failures.py": 16,
    "core/test_batch_encode.py": 16,
}


def module_of(item: pytest.Item) -> str:
    """`item`'s module as MODULE_SECONDS names it: its path under tests/."""
    path = Path(str(item.path))
    return str(path.relative_to(TESTS)) if TESTS in path.parents else str(path)


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with the modules MODULE_SECONDS knows first, longest first, then the rest (a
    stable sort: each module's own order kept, and that of the modules it does not know)."""
    return sorted(items, key=lambda item: -MODULE_SECONDS.get(module_of(item), 0.0))


# a line of pytest's --durations table
DURATION = re.compile(r"(?P<seconds>\d+(\.\d+)?)s (setup|call|teardown) +(?P<path>[^:\s]+)::")


def module_seconds(lines: Iterable[str], at_least: float = 15.0) -> dict[str, float]:
    """Seconds per module (at least `at_least`), longest first, from pytest's
    `--durations=0` lines ("1.23s call     tests/a/test_b.py::test_c[x]")."""
    total: dict[str, float] = {}
    for line in lines:
        match = DURATION.match(line.strip())
        if match:
            module = match["path"].removeprefix("tests/")
            total[module] = total.get(module, 0.0) + float(match["seconds"])
    return {m: round(s) for m, s in sorted(total.items(), key=lambda kv: -kv[1])
            if s >= at_least}


def group_of(item: pytest.Item) -> str | None:
    """The xdist_group `item` is given: its module's path under tests/ when it is above
    the unit tier and has none of its own, else None."""
    if item.get_closest_marker("xdist_group") is not None or tier_of(item) == "unit":
        return None
    return module_of(item)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # on a worker: the longest first
        items[:] = longest_first(items)
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


if __name__ == "__main__":  # python -m tests.parallel DURATIONS: a new MODULE_SECONDS
    with open(sys.argv[1]) as durations:
        table = module_seconds(durations)
    print("MODULE_SECONDS: dict[str, float] = {")
    for module, seconds in table.items():
        print(f'    "{module}": {seconds},')
    print("}")
