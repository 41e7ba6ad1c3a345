"""What the operations listener costs the Kafka listener (operations.listener, kbroker.ops).

Two measurements, each on fresh `kbroker serve` processes of this tree (new process, new
temp data dir, killed by PID afterwards), repeated with the order shuffled per repeat:

    requests   per-request cost with the listener off (operations.listener empty) and
               on (which also follows every request for RequestMetrics): a raw client
               pipelining small Produce then Fetch requests (bench_request_log's
               workload): the broker's CPU microseconds per request and requests/s
    busy       Kafka request latency while the HTTP listener is idle, against while
               another process keeps it busy: HTTP_CLIENTS threads fetching /metrics and
               the console's /api/topics and /api/groups back to back, plus two open
               /api/live event streams, on a broker with TOPIC_PARTITIONS partitions (so
               a scrape is thousands of lines): one Metadata request at a time on one
               connection, LATENCY_REQUESTS of them, p50/p99/max in ms, and the HTTP
               requests the other process got answered per second

The produce path's CPU per GB with the listener on and off is bench/matrix.py's to
measure (its --a/--b take `cmd:` brokers; bench/README.md has the command).

    python bench/bench_ops.py                      # 5 repeats
    python bench/bench_ops.py --repeats 9 --requests 20000

Output: medians (and min..max) per config and figure, the on/off ratio; JSON with every
run to bench/results/ops-<UTC timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import brokers  # noqa: E402
from bench_request_log import PipelinedClient, frame, requests_phase  # noqa: E402

from kbroker.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kbroker.protocol.messages.metadata import MetadataRequest  # noqa: E402

RESULTS_DIR = BENCH_DIR / "results"
TOPIC_PARTITIONS = 1000
HTTP_CLIENTS = 4
LATENCY_REQUESTS = 5000
HTTP_PATHS = ("/metrics", "/api/topics", "/api/groups")


def spec(config: str, ops_port: int) -> brokers.BrokerSpec:
    base = brokers.kbroker_spec()
    listener = "" if config == "off" else f"127.0.0.1:{ops_port}"
    return replace(base, name=f"kbroker:{config}",
                   command=base.command + f" --override operations.listener={listener}")


# ---------------------------------------------------------------- HTTP load (another process)

def _http_load(base_url: str, stop: Any, counter: Any) -> None:
    def fetch_loop() -> None:
        i = 0
        while not stop.is_set():
            path = HTTP_PATHS[i % len(HTTP_PATHS)]
            i += 1
            try:
                with urllib.request.urlopen(base_url + path, timeout=30) as r:
                    r.read()
                with counter.get_lock():
                    counter.value += 1
            except OSError:
                time.sleep(0.01)

    def stream() -> None:
        try:
            with urllib.request.urlopen(base_url + "/api/live", timeout=30) as r:
                while not stop.is_set() and r.readline():
                    pass
        except OSError:
            pass

    threads = [threading.Thread(target=fetch_loop, daemon=True) for _ in range(HTTP_CLIENTS)]
    threads += [threading.Thread(target=stream, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    stop.wait()


def latency_phase(port: int, count: int) -> dict[str, float]:
    """One Metadata (all topics) at a time on one connection: round trips in ms."""
    client = PipelinedClient(port)
    request = frame(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    times = []
    try:
        for i in range(count):
            struct.pack_into(">i", request, 8, i)
            start = time.perf_counter()
            client.call(request)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        client.close()
    times.sort()
    return {"p50_ms": times[len(times) // 2], "p99_ms": times[int(len(times) * 0.99)],
            "max_ms": times[-1]}


def busy_run(ops_port: int, log_dir: Path, count: int) -> dict[str, Any]:
    broker = brokers.RunningBroker(spec("on", ops_port), log_dir)
    try:
        broker.wait_ready()
        client = PipelinedClient(broker.port)
        create = CreateTopicsRequest(timeout_ms=30000, topics=[CreateTopicsRequest.CreatableTopic(
            name="wide", num_partitions=TOPIC_PARTITIONS, replication_factor=1)])
        client.call(frame(create, 4))
        client.close()
        base_url = f"http://127.0.0.1:{ops_port}"
        with urllib.request.urlopen(base_url + "/metrics", timeout=30) as r:
            scrape_lines = r.read().count(b"\n")
        idle = latency_phase(broker.port, count)
        ctx = multiprocessing.get_context("spawn")
        stop, counter = ctx.Event(), ctx.Value("l", 0)
        load = ctx.Process(target=_http_load, args=(base_url, stop, counter), daemon=True)
        load.start()
        try:
            while counter.value < HTTP_CLIENTS:  # the load is under way
                time.sleep(0.05)
            before, started = counter.value, time.monotonic()
            busy = latency_phase(broker.port, count)
            http_per_s = (counter.value - before) / (time.monotonic() - started)
        finally:
            stop.set()
            load.join(30)
            if load.is_alive():
                load.kill()
        return {"idle": idle, "busy": busy, "http_requests_per_s": http_per_s,
                "scrape_lines": scrape_lines}
    finally:
        broker.stop()


# ---------------------------------------------------------------- main

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):10.3f}  ({min(values):.3f}..{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--requests", type=int, default=10000, help="per request phase")
    p.add_argument("--latency-requests", type=int, default=LATENCY_REQUESTS)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    log_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-ops-"))
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        order = ["off", "on", "busy"]
        rng.shuffle(order)
        for config in order:
            port = _free_port()
            if config == "busy":
                result = busy_run(port, log_dir, args.latency_requests)
            else:
                broker = brokers.RunningBroker(spec(config, port), log_dir)
                try:
                    broker.wait_ready()
                    result = requests_phase(broker, args.requests)
                finally:
                    broker.stop()
            runs.append({"config": config, "repeat": repeat, **result})
            print(f"repeat {repeat} {config}: {json.dumps(result)}", flush=True)
    print("\nper-request cost (median over repeats, min..max)")
    table: dict[str, Any] = {}
    for metric in ("produce_cpu_us_per_request", "fetch_cpu_us_per_request",
                   "produce_requests_per_s", "fetch_requests_per_s"):
        values = {c: [r[metric] for r in runs if r["config"] == c] for c in ("off", "on")}
        ratio = statistics.median(values["on"]) / statistics.median(values["off"])
        table[metric] = {"off": statistics.median(values["off"]),
                         "on": statistics.median(values["on"]), "on/off": ratio}
        print(f"  {metric:28s} off {_median_range(values['off'])}   on "
              f"{_median_range(values['on'])}   on/off {ratio:.3f}")
    busy_runs = [r for r in runs if r["config"] == "busy"]
    print(f"\nMetadata round trips, {TOPIC_PARTITIONS} partitions, HTTP listener idle vs busy "
          f"({HTTP_CLIENTS} clients on {', '.join(HTTP_PATHS)} + 2 event streams)")
    for name in ("p50_ms", "p99_ms", "max_ms"):
        idle = [r["idle"][name] for r in busy_runs]
        busy = [r["busy"][name] for r in busy_runs]
        table[f"metadata_{name}"] = {"idle": statistics.median(idle),
                                     "busy": statistics.median(busy)}
        print(f"  {name:8s} idle {_median_range(idle)}   busy {_median_range(busy)}")
    http = [r["http_requests_per_s"] for r in busy_runs]
    table["http_requests_per_s"] = statistics.median(http)
    print(f"  HTTP requests answered meanwhile: {statistics.median(http):.1f}/s; a scrape is "
          f"{busy_runs[0]['scrape_lines']} lines")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = RESULTS_DIR / f"ops-{stamp}.json"
    out.write_text(json.dumps({"tool": "bench/bench_ops.py", "settings": vars(args),
                               "summary": table, "runs": runs}, indent=1))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
