"""The installed `kbroker perf` command as a benchmark user drives it, against `kbroker serve`:
stopped by PID (SIGTERM) or Ctrl-C (SIGINT) it leaves no worker producing and prints what it
measured, marked partial; an address where nothing listens is one line; --repeats gives the
spread, the JSON its context, and `kbroker perf compare` gates on two such files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from kbroker.cluster.zookeeper_server import free_port
from kbroker.perf.admin import watermarks

from .conftest import ROOT, _die_with_parent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

KBROKER = Path(sys.executable).parent / "kbroker"


class Perf:
    """A `kbroker perf ...` process; its stderr lines are collected as they come."""

    def __init__(self, *argv: str) -> None:
        self.proc = subprocess.Popen([str(KBROKER), "perf", *argv], cwd=ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=_die_with_parent, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for_records(self, timeout: float = 60.0) -> None:
        """Until a progress line reports records acknowledged."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.split(" ", 1)[0].isdigit() and int(line.split(" ", 1)[0]) > 0
                   for line in self.lines):
                return
            assert self.proc.poll() is None, "".join(self.lines)
            time.sleep(0.05)
        raise AssertionError("no progress line with records:\n" + "".join(self.lines))

    def finish(self, timeout: float = 60.0) -> tuple[int, str, str]:
        self.proc.wait(timeout)
        assert self.proc.stdout is not None
        stdout = self.proc.stdout.read()
        self._reader.join(10)
        return self.proc.returncode, stdout, "".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def perf_processes() -> Iterator[list[Perf]]:
    made: list[Perf] = []
    yield made
    for perf in made:
        perf.kill()


def workers_of(pid: int) -> list[int]:
    """The multiprocessing workers (spawned python processes) whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def log_end_offset(bootstrap: str, topic: str) -> int:
    return sum(high for _low, high in watermarks(bootstrap, topic, [0, 1]).values())


def wait_for_workers(pid: int, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = workers_of(pid)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{count} workers of {pid} did not appear")


@pytest.mark.parametrize(("mode", "sig"), [("produce", signal.SIGTERM), ("produce", signal.SIGINT),
                                         ("e2e", signal.SIGTERM)])
def test_a_signal_stops_the_workers_and_prints_a_partial_summary(
        broker_process: Any, perf_processes: list[Perf], tmp_path: Path, mode: str,
        sig: int) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"perf-stop-{mode}-{sig}"
    out = tmp_path / "partial.json"
    processes = ["--producers", "2"] if mode == "produce" else []  # e2e: one consumer process
    perf = Perf(mode, "--bootstrap-server", bs, "--topic", topic, "--partitions", "2",
                "--num-records", "100000000", "--record-size", "100", "--throughput", "20000",
                *processes, "--json", str(out))
    perf_processes.append(perf)
    workers = wait_for_workers(perf.proc.pid, 2 if mode == "produce" else 1)
    perf.wait_for_records()
    if sig == signal.SIGINT:  # Ctrl-C: the terminal signals the whole process group
        os.killpg(perf.proc.pid, sig)
    else:  # a script or CI job stopping perf by PID
        os.kill(perf.proc.pid, sig)
    code, stdout, stderr = perf.finish()
    assert code == 128 + sig, stdout + stderr
    assert not [pid for pid in workers if alive(pid)]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert f"{mode} PARTIAL ({signal.Signals(sig).name})" in stdout
    document = json.loads(out.read_text())
    assert document["partial"] and document["runs"][0]["partial"]
    assert document["runs"][0]["records"] > 0
    # Nothing produces any more: the log end offsets stand still.
    first = log_end_offset(bs, topic)
    assert first > 0
    time.sleep(1.5)  # an observation window, not a synchronisation
    assert log_end_offset(bs, topic) == first


def test_nothing_listening_is_one_line(perf_processes: list[Perf]) -> None:
    address = f"127.0.0.1:{free_port()}"
    perf = Perf("produce", "--bootstrap-server", address, "--topic", "t", "--num-records", "10")
    perf_processes.append(perf)
    code, stdout, stderr = perf.finish()
    assert code == 1
    assert stdout == ""
    assert stderr.count("\n") == 1 and address in stderr, stderr
    assert stderr.startswith(f"kbroker perf: cannot connect to {address}: Connection refused")


def test_an_error_in_a_worker_is_one_line(broker_process: Any, perf_processes: list[Perf],
                                         tmp_path: Path) -> None:
    missing = tmp_path / "no-payloads.txt"
    perf = Perf("produce", "--bootstrap-server", broker_process.bootstrap_servers,
                "--topic", "perf-error", "--partitions", "1", "--num-records", "10",
                "--payload-file", str(missing))
    perf_processes.append(perf)
    workers: set[int] = set()
    while perf.proc.poll() is None:  # every worker seen while it ran
        workers.update(workers_of(perf.proc.pid))
        time.sleep(0.02)
    code, _stdout, stderr = perf.finish()
    assert code == 1
    assert stderr.startswith("kbroker perf: perf worker") and str(missing) in stderr, stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not [pid for pid in workers if alive(pid)]


def run_perf(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KBROKER), "perf", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


def test_repeats_json_context_progress_and_compare(broker_process: Any, tmp_path: Path) -> None:
    bs = broker_process.bootstrap_servers
    paths = []
    for name in ("baseline", "new"):
        path = tmp_path / f"{name}.json"
        done = run_perf("produce", "--bootstrap-server", bs, "--topic", "perf-repeats",
                        "--partitions", "1", "--num-records", "3000", "--record-size", "100",
                        "--throughput", "2000", "--repeats", "2", "--json", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        paths.append(path)
    assert "run 1/2: produce: 3000 records" in done.stdout
    assert "over 2 runs (min / median / max):" in done.stdout
    # 1.5 s a run at 2000 records/s, a progress line every second
    progress = [line for line in done.stderr.splitlines() if "records/s" in line]
    assert len(progress) >= 2, done.stderr
    document = json.loads(paths[1].read_text())
    assert len(document["runs"]) == 2
    records_per_s = document["figures"]["records_per_s"]
    assert records_per_s["min"] <= records_per_s["median"] <= records_per_s["max"]
    assert len(records_per_s["values"]) == 2
    assert "latency_p99_ms" in document["figures"]
    context = document["context"]
    for key in ("kbroker_version", "kbroker_commit", "confluent_kafka_version",
                "librdkafka_version", "cpu_model", "cpu_count", "load_average", "time"):
        assert key in context, key
    assert context["cpu_count"] >= 1 and len(context["load_average"]) == 3
    assert context["settings"]["repeats"] == 2 and context["settings"]["throughput"] == 2000.0
    assert context["settings"]["mode"] == "produce"

    # Two real runs at the same fixed rate: no regression, every figure with its ratio.
    compared = subprocess.run([str(KBROKER), "perf", "compare", *map(str, paths)],
                              capture_output=True, text=True, timeout=60)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    for figure in ("records_per_s", "mb_per_s", "latency_p99_ms"):
        assert figure in compared.stdout
    assert "noise band" in compared.stdout

    # Crafted from the tool's own file: the new run at half the throughput.
    slower = json.loads(paths[0].read_text())
    for name in ("records_per_s", "mb_per_s"):
        slower["figures"][name] = {k: (v * 0.5 if k != "values" else [x * 0.5 for x in v])
                                   for k, v in slower["figures"][name].items()}
    crafted = tmp_path / "slower.json"
    crafted.write_text(json.dumps(slower))
    regressed = subprocess.run([str(KBROKER), "perf", "compare", str(paths[0]), str(crafted)],
                               capture_output=True, text=True, timeout=60)
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    assert "REGRESSION" in regressed.stdout and "records_per_s 0.500" in regressed.stderr
    tolerant = subprocess.run([str(KBROKER), "perf", "compare", str(paths[0]), str(crafted),
                               "--threshold", "0.6"], capture_output=True, text=True, timeout=60)
    assert tolerant.returncode == 0, tolerant.stdout + tolerant.stderr


def test_workers_die_with_a_killed_parent(broker_process: Any, perf_processes: list[Perf]) -> None:
    """SIGKILL leaves the parent no clean-up: the kernel ends the workers (PR_SET_PDEATHSIG)."""
    perf = Perf("produce", "--bootstrap-server", broker_process.bootstrap_servers,
                "--topic", "perf-kill", "--partitions", "1", "--num-records", "100000000",
                "--record-size", "100", "--throughput", "20000", "--producers", "2")
    perf_processes.append(perf)
    workers = wait_for_workers(perf.proc.pid, 2)
    perf.wait_for_records()
    os.kill(perf.proc.pid, signal.SIGKILL)
    perf.proc.wait(30)
    deadline = time.monotonic() + 30
    while [pid for pid in workers if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if alive(pid)]
