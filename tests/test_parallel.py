"""tests/parallel.py: the xdist group each test is given, its module's above the unit
tier, none for a unit test, and a group a test marks itself kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import parallel
from tests.parallel import group_of, longest_first, module_seconds
from tests.tiers import TESTS


@dataclass
class FakeItem:
    """What group_of (and tier_of) read of a pytest Item."""

    path: Path
    fixturenames: list[str] = field(default_factory=list)
    markers: list[pytest.MarkDecorator] = field(default_factory=list)

    def iter_markers(self) -> list[pytest.Mark]:
        return [m.mark for m in self.markers]

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in self.iter_markers() if m.name == name), None)


def group(relative: str, fixtures: tuple[str, ...] = (),
          markers: tuple[pytest.MarkDecorator, ...] = ()) -> str | None:
    return group_of(FakeItem(TESTS / relative, list(fixtures), list(markers)))  # type: ignore[arg-type]


def test_a_unit_test_is_spread_on_its_own() -> None:
    assert group("core/test_records.py") is None
    assert group("storage/test_log.py", ("tmp_path",)) is None


def test_a_test_above_the_unit_tier_runs_with_its_module() -> None:
    assert group("integration/test_wire.py") == "integration/test_wire.py"
    assert group("ops/test_metrics.py", ("kbroker_broker",)) == "ops/test_metrics.py"
    assert group("cluster/test_replication.py") == "cluster/test_replication.py"
    assert group("ops/test_x.py", markers=(pytest.mark.integration,)) == "ops/test_x.py"


def test_a_group_of_its_own_is_kept() -> None:
    own = (pytest.mark.xdist_group("together"),)
    assert group("integration/test_wire.py", markers=own) is None
    assert group("core/test_records.py", markers=own) is None


def test_the_longest_modules_come_first_and_the_rest_keeps_its_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "MODULE_SECONDS", {"test_lint.py": 40.0,
                                                     "test_fuzz_targets.py": 90.0})
    names = ["core/test_records.py", "test_lint.py", "storage/test_log.py",
             "test_fuzz_targets.py", "core/test_records.py", "test_fuzz_targets.py"]
    items = [FakeItem(TESTS / name) for name in names]
    got = longest_first(items)  # type: ignore[arg-type]
    assert [str(i.path.relative_to(TESTS)) for i in got] == [
        "test_fuzz_targets.py", "test_fuzz_targets.py", "test_lint.py",
        "core/test_records.py", "storage/test_log.py", "core/test_records.py"]
    assert got[0] is items[3] and got[1] is items[5]


def test_the_table_is_made_from_a_durations_report() -> None:
    report = """============ slowest durations ============
40.02s call     tests/test_fuzz_targets.py::test_target[produce]
30.50s call     tests/test_fuzz_targets.py::test_target[fetch]
12.00s setup    tests/cluster/test_replication.py::test_a
9.00s teardown tests/cluster/test_replication.py::test_a
3.00s call     tests/cluster/test_replication.py::test_b
2.00s call     tests/core/test_records.py::test_c
(1200 durations < 0.005s hidden.)
"""
    assert module_seconds(report.splitlines(), at_least=10) == {
        "test_fuzz_targets.py": 71, "cluster/test_replication.py": 24}


def test_every_module_in_the_table_exists() -> None:
    assert [m for m in parallel.MODULE_SECONDS if not (TESTS / m).is_file()] == []
