"""tests/tiers.py: each test's tier from its directory, fixtures and markers, the
highest one it qualifies for."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tiers import TESTS, tier_of


@dataclass
class FakeItem:
    """What tier_of reads of a pytest Item."""

    path: Path
    fixturenames: list[str] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)

    def iter_markers(self) -> list[pytest.MarkDecorator]:
        return [getattr(pytest.mark, name) for name in self.markers]


def tier(relative: str, fixtures: tuple[str, ...] = (), markers: tuple[str, ...] = ()) -> str:
    return tier_of(FakeItem(TESTS / relative, list(fixtures), list(markers)))  # type: ignore[arg-type]


def test_a_test_starting_nothing_is_a_unit_test() -> None:
    assert tier("core/test_records.py") == "unit"
    assert tier("server/test_append_notifier.py", ("tmp_path",)) == "unit"


def test_directories_give_their_tier() -> None:
    assert tier("integration/test_wire.py") == "integration"
    assert tier("cluster/test_controller_rules.py") == "cluster"
    assert tier("spark/test_options.py") == "spark"


def test_fixtures_and_markers_give_theirs_anywhere() -> None:
    assert tier("ops/test_metrics.py", markers=("integration",)) == "integration"
    assert tier("ops/test_x.py", ("kbroker_broker",)) == "integration"
    assert tier("perf/test_bench_cluster.py", markers=("cluster",)) == "cluster"
    assert tier("ops/test_x.py", ("tmp_path", "zookeeper")) == "cluster"
    assert tier("ops/test_console.py", markers=("integration", "browser")) == "browser"


def test_the_highest_tier_wins() -> None:
    assert tier("cluster/test_cluster_metrics.py", markers=("integration",)) == "cluster"
    assert tier("spark/test_security.py", ("secure_broker",), ("integration",)) == "spark"
    assert tier("integration/test_x.py", ("spark",)) == "spark"
