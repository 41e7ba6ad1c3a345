"""The Quick start's first run, as a new user meets it: `scripts/serve` in a fresh copy of
the checkout (no .venv) makes the virtualenv with scripts/bootstrap, says what it does one
line per step on stderr (first of all how long it takes), prints nothing on stdout, and
starts the broker; the second `scripts/serve` installs nothing and prints no bootstrap
line. Marked `slow`: it installs from PyPI and compiles the core (30 s to two minutes on
2 cores)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import READY, ROOT, _die_with_parent
from .wire import wait_until_ready

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

STEPS = [
    r"bootstrap: first run in this checkout: about .+ \(later runs: a second or two\)",
    r"bootstrap: creating the virtualenv \.venv \(Python 3\.\d+\.\d+\)",
    r"bootstrap: installing pip, setuptools, wheel and Cython into \.venv",
    r"bootstrap: installing kbroker\[tools\] \(editable\) and its dependencies from PyPI",
    r"bootstrap: compiling kbroker's Cython/C core \(kbroker/_core, native/\) in place",
    r"bootstrap: done in \d+ s",
]


def fresh_copy(dest: Path) -> Path:
    """The committed and working-tree files git knows of, as a clone would have them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def serve(checkout: Path, log_dir: Path, stderr_path: Path) -> tuple[list[str], str]:
    """Run scripts/serve until its broker is ready, then SIGTERM it; its stderr lines
    before the ready line, and its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            ["scripts/serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={log_dir}"],
            cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=err,
            preexec_fn=_die_with_parent)
        try:
            deadline = time.monotonic() + 600
            while not READY.search(stderr_path.read_text()):
                assert proc.poll() is None, stderr_path.read_text()
                assert time.monotonic() < deadline, stderr_path.read_text()
                time.sleep(0.2)
            text = stderr_path.read_text()
            m = READY.search(text)
            assert m is not None
            wait_until_ready(f"{m.group(1)}:{m.group(2)}")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                raise
        assert proc.returncode == 0, stderr_path.read_text()
    before_ready = text[:m.start()].splitlines()
    return before_ready, out.decode()


def test_the_first_scripts_serve_says_what_it_does(tmp_path: Path) -> None:
    checkout = fresh_copy(tmp_path / "kbroker")
    lines, out = serve(checkout, tmp_path / "logs", tmp_path / "first.stderr")
    assert out == ""
    steps = [ln for ln in lines if ln.startswith("bootstrap:")]
    assert len(steps) == len(STEPS), lines
    for line, pattern in zip(steps, STEPS, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)
    # nothing from pip, setuptools or the compiler: the steps and the broker's own log
    others = [ln for ln in lines if not ln.startswith("bootstrap:")]
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ kbroker", ln)
               for ln in others), others
    assert (checkout / ".venv" / "bin" / "kbroker").is_file()

    lines, out = serve(checkout, tmp_path / "logs", tmp_path / "second.stderr")
    assert out == ""
    assert not [ln for ln in lines if ln.startswith("bootstrap:")], lines
