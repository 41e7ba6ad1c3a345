"""Produce latency with fsync on every message (flush.messages=1), build against build.

With `log.flush.interval.messages=1` every append is followed by an fsync before the
producer is answered. Where that fsync runs matters: on the event loop it stalls every
connection of the broker for the length of each fsync; on a flusher thread only the
Produce that waits for it is delayed. Each broker (kbroker from this tree, and
`kbroker-ref:<git ref>` for a build before a change) runs alone, fresh, with:

    4 confluent-kafka producers (acks=1, linger.ms=0) at a fixed total rate over
    8 partitions, 512-byte records; their delivery latency (p50/p99/p99.9), and
    a bystander connection sending ApiVersions every 5 ms: its round-trip p99
    shows how long the broker's loop stood still.

    python bench/bench_flush.py --brokers kbroker,kbroker-ref:HEAD~3 --repeats 3

Results go to bench/results/flush.json (medians over repeats in the table).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import (  # noqa: E402
    BrokerSpec,
    RunningBroker,
    _recv_exact,
    api_versions_v0_request,
    resolve_spec,
)

RESULTS = Path(__file__).resolve().parent / "results" / "flush.json"
FLUSH_OVERRIDES = " --override log.flush.interval.messages=1"


class Bystander:
    """ApiVersions round trips every 5 ms on one connection, in a thread."""

    def __init__(self, port: int) -> None:
        self.rtts_ms: list[float] = []
        self._stop = threading.Event()
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cid = 0
        while not self._stop.is_set():
            cid += 1
            start = time.perf_counter()
            self._sock.sendall(api_versions_v0_request(cid))
            size = int.from_bytes(_recv_exact(self._sock, 4), "big")
            _recv_exact(self._sock, size)
            self.rtts_ms.append((time.perf_counter() - start) * 1000)
            self._stop.wait(0.005)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(10)
        self._sock.close()
        return self.rtts_ms


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_once(spec: BrokerSpec, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    broker = RunningBroker(spec, log_dir, partitions=8)
    try:
        broker.wait_ready()
        out = log_dir / f"produce-{broker.port}.json"
        bystander = Bystander(broker.port)
        done = subprocess.run(
            [sys.executable, "-m", "kbroker.perf", "produce", "--bootstrap-server", broker.bootstrap,
             "--topic", "flush-bench", "--partitions", "8", "--num-records", str(args.records),
             "--record-size", "512", "--producers", "4", "--throughput", str(args.rate),
             "--linger-ms", "0", "--acks", "1", "--latency-sample-every", "1", "--quiet",
             "--timeout", "300", "--json", str(out)],
            capture_output=True, text=True, timeout=600)
        rtts = bystander.stop()
        if done.returncode != 0:
            raise RuntimeError(f"perf produce failed on {spec.name}:\n{done.stdout}\n{done.stderr}")
        result = json.loads(out.read_text())["result"]
        pct = result["latency"]["percentiles_ms"]
        return {"records": result["records"], "errors": result["errors"],
                "produce_p50_ms": pct["p50"], "produce_p99_ms": pct["p99"],
                "produce_p99_9_ms": pct["p99_9"],
                "bystander_p50_ms": percentile(rtts, 0.5), "bystander_p99_ms": percentile(rtts, 0.99),
                "bystander_max_ms": max(rtts) if rtts else float("nan")}
    finally:
        broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--brokers", default="kbroker", help="comma-separated: kbroker, kbroker-ref:<ref>")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--rate", type=int, default=2000, help="records/s over all producers")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    specs = [resolve_spec(name) for name in args.brokers.split(",")]
    for spec in specs:
        spec.command += FLUSH_OVERRIDES
        if spec.prepare:
            spec.prepare()
    runs: dict[str, list[dict[str, Any]]] = {spec.name: [] for spec in specs}
    try:
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-flush-") as tmp:
            for _ in range(args.repeats):  # alternate the builds: the machine's noise hits both
                for spec in specs:
                    runs[spec.name].append(run_once(spec, args, Path(tmp)))
    finally:
        for spec in specs:
            if spec.cleanup:
                spec.cleanup()
    keys = ["produce_p50_ms", "produce_p99_ms", "produce_p99_9_ms", "bystander_p99_ms", "bystander_max_ms"]
    summary = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}
    print(f"{'broker':36} " + " ".join(f"{k:>17}" for k in keys))
    for name, row in summary.items():
        print(f"{name:36} " + " ".join(f"{row[k]:17.2f}" for k in keys))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"records": args.records, "rate": args.rate, "repeats": args.repeats,
                                     "runs": runs, "median": summary}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
