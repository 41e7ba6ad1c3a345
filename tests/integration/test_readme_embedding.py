"""The embedding snippets of README.md and of the manual (docs/**/*.md), run as they stand:
they work and print nothing (a librdkafka client that outlived its broker would log a
`Disconnected` line at exit; a record acks=all could not place would be left in the
producer's queue, which librdkafka reports when it is destroyed). A snippet that kills a
broker of its Cluster may print librdkafka's lines about that broker's connection, and
nothing else.

Which blocks run: every ```python block that is a whole program: one that starts its own
broker (`with Broker(` or `with Cluster(`), run with python, or a test module using the
pytest plugin's fixtures (a `def test_` taking `kbroker_broker`), run with pytest, whose
tests must pass. A block the same to the letter in several pages runs once. The other python blocks are fragments of a larger program (a
`Producer` given `bs`, a SparkSession's `spark`) and are left out by that rule, as a
long-running `kbroker serve` is left out by being a ```sh block.

One line is librdkafka's own and expected, its telemetry instance id
(tests/librdkafka_lines.py); `run_snippet` drops it."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.librdkafka_lines import without_telemetry_instance_ids

from .conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_STARTS_A_BROKER = re.compile(r"^with (Broker|Cluster)\(", re.M)
_TEST_MODULE = re.compile(r"^def test_\w+\(.*\bkbroker_broker\b", re.M)


@dataclass(frozen=True)
class Snippet:
    code: str
    kind: str  # Broker, Cluster or pytest
    places: tuple[str, ...]  # page:line of each copy


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def snippets() -> list[Snippet]:
    found: dict[str, tuple[str, list[str]]] = {}
    for page in pages():
        text = page.read_text()
        for block in _PYTHON_BLOCK.finditer(text):
            code = block.group(1)
            starts = _STARTS_A_BROKER.search(code)
            kind = starts.group(1) if starts else "pytest" if _TEST_MODULE.search(code) else None
            if kind is None:
                continue
            place = f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, block.start()) + 1}"
            found.setdefault(code, (kind, []))[1].append(place)
    return [Snippet(code, kind, tuple(places)) for code, (kind, places) in found.items()]


SNIPPETS = snippets()


def run_snippet(code: str, cwd: Path, timeout: float) -> str:
    """The snippet's stderr, less librdkafka's line of its telemetry instance id (see the
    module docstring); it printed nothing on stdout and exited 0."""
    # run outside the checkout: a user's script, with kbroker imported as installed
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    return without_telemetry_instance_ids(done.stderr)


def test_the_readme_and_the_manual_have_their_snippets() -> None:
    """The rule above finds the README's Broker and the manual's Cluster: a page that
    lost its example, or a rule that matches nothing, fails here."""
    assert any(p.startswith("README.md:") for s in SNIPPETS if s.kind == "Broker" for p in s.places)
    assert any(p.startswith("docs/cluster.md:") for s in SNIPPETS if s.kind == "Cluster"
               for p in s.places)
    assert any(p.startswith("README.md:") for s in SNIPPETS if s.kind == "pytest" for p in s.places)


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "Broker"],
                         ids=lambda s: s.places[0])
def test_a_broker_snippet_runs_silently(snippet: Snippet, tmp_path: Path) -> None:
    code = snippet.code.replace("/tmp/my-logs", str(tmp_path / "my-logs"))
    assert run_snippet(code, tmp_path, timeout=60) == "", snippet.places
    if "/tmp/my-logs" in snippet.code:  # its data went where it said
        assert any((tmp_path / "my-logs").iterdir())


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "Cluster"],
                         ids=lambda s: s.places[0])
def test_a_cluster_snippet_runs_silently(snippet: Snippet, tmp_path: Path) -> None:
    # the Cluster's data lives in a temporary directory of its own: put it in tmp_path
    code = snippet.code.replace("with Cluster(", f"with Cluster(directory={str(tmp_path / 'c')!r}, ")
    stderr = run_snippet(code, tmp_path, timeout=150)
    # librdkafka may log its connection to a broker the snippet kills (Disconnected,
    # Connection refused while it is down), and nothing else: no line for the others as
    # the cluster stops, no undelivered record
    killed = "|".join(re.findall(r"cluster\.kill\((\d+)\)", code)) or "none"
    for line in stderr.splitlines():
        assert re.match(rf"%\d\|[\d.]+\|FAIL\|rdkafka#producer-1\| \[thrd:[\d.:]+/({killed})\]",
                        line), stderr
    if '"orders"' in code:  # acks=all with min.insync.replicas=2 needed the replicas
        assert len(sorted((tmp_path / "c").glob("broker-*/**/orders-0"))) == 3


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.kind == "pytest"],
                         ids=lambda s: s.places[0])
def test_a_test_module_snippet_passes(snippet: Snippet, tmp_path: Path) -> None:
    """pytest finds the plugin's fixtures as any project with kbroker installed does (its
    entry point), in a directory of its own outside the checkout."""
    (tmp_path / "test_snippet.py").write_text(snippet.code)
    tests = len(re.findall(r"^def test_", snippet.code, re.M))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "test_snippet.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tests} passed" in done.stdout, done.stdout
