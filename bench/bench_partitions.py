"""Many partitions with data: start-to-ready time and resident memory as data grows.

    python bench/bench_partitions.py [--partitions 1000] [--steps 3] [--step-mb 100]

One kbroker data dir, one topic of --partitions partitions:
  idle_rss_mb        VmRSS of a fresh broker once it answers ApiVersions
  rss_after_mb[i]    VmRSS after each of --steps rounds of --step-mb MB of 1 KiB
                     records spread over all partitions (`kbroker perf produce`)
                     and a read of all of them (`perf consume`): flat when the
                     page cache, not the heap, holds the data
  restart_ready_s    the broker stopped (SIGTERM, clean shutdown) and started again
                     on that dir: seconds from exec to the first ApiVersions answer,
                     median of --restarts starts
  restart_idle_rss_mb VmRSS after the restart
Issue 6's targets: ready <= 1 s with 1000 partitions, idle RSS <= 60 MB and flat.
The peer (Tansu, memory storage) cannot restart with data, so this one has no
B side; the matrix reports Tansu's ready time and idle RSS for one partition.
Writes bench/results/partitions.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from brokers import api_versions_ok, free_port, parse_status_kb  # noqa: E402

from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "partitions.json"


class Kbroker:
    """`python -m kbroker serve` on a given data dir and a free port."""

    def __init__(self, data_dir: str, partitions: int, log_path: Path) -> None:
        self.port = free_port()
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "kbroker", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--override", f"log.dirs={data_dir}", "--override", f"num.partitions={partitions}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.started = time.monotonic()
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 60.0) -> float:
        while time.monotonic() - self.started < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"kbroker exited with {self.process.returncode}")
            if api_versions_ok("127.0.0.1", self.port, timeout_s=0.5):
                return time.monotonic() - self.started
            time.sleep(0.01)
        raise TimeoutError("kbroker not ready")

    def rss_mb(self) -> float:
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        return (parse_status_kb(text, "VmRSS") or 0) / 1024

    def stop(self) -> None:
        """SIGTERM (clean shutdown), SIGKILL after 30 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if not self._log.closed:
            self._log.close()


def _load(broker: Kbroker, args: argparse.Namespace, step: int) -> None:
    records = args.step_mb * 1024 * 1024 // 1024
    options = PerfOptions(bootstrap_server=broker.bootstrap, topic="many",
                          num_records=records, record_size=1024, acks="1",
                          partitions=args.partitions, producers=2, report_interval_s=1e9,
                          timeout_s=300, quiet=True)
    run_mode(options, "produce")
    consume = PerfOptions(bootstrap_server=broker.bootstrap, topic="many",
                          num_records=records * (step + 1), record_size=1024,
                          partitions=args.partitions, report_interval_s=1e9,
                          timeout_s=300, quiet=True)
    run_mode(consume, "consume")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--step-mb", type=int, default=100)
    ap.add_argument("--restarts", type=int, default=3)
    args = ap.parse_args()
    data_dir = tempfile.mkdtemp(prefix="kbroker-bench-partitions-")
    log_path = Path(data_dir + ".log")
    result: dict[str, object] = {"partitions": args.partitions, "step_mb": args.step_mb}
    broker = None
    try:
        broker = Kbroker(data_dir, args.partitions, log_path)
        result["fresh_ready_s"] = broker.wait_ready()
        result["idle_rss_mb"] = broker.rss_mb()
        rss = []
        for step in range(args.steps):
            _load(broker, args, step)
            rss.append(broker.rss_mb())
            print(f"after {(step + 1) * args.step_mb} MB: RSS {rss[-1]:.1f} MB", flush=True)
        result["rss_after_mb"] = rss
        broker.stop()
        ready, idle = [], []
        for _ in range(args.restarts):
            broker = Kbroker(data_dir, args.partitions, log_path)
            ready.append(broker.wait_ready())
            idle.append(broker.rss_mb())
            broker.stop()
        result["restart_ready_s_all"] = ready
        result["restart_ready_s"] = statistics.median(ready)
        result["restart_idle_rss_mb"] = statistics.median(idle)
    finally:
        if broker is not None:
            broker.stop()
        subprocess.run(["rm", "-rf", "--", data_dir], check=False)
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
