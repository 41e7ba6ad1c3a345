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

    produce    the produce path per GB: matrix cells (bench/matrix.py's settings: 2 producer
               processes, linger.ms 5, batch.size 1 MB, acks=1, no compression) on fresh
               brokers with the listener off and on, in shuffled turn: broker CPU s per GB
               of each and their ratio, and from the broker's own /metrics (on) the
               Produce requests and partitions per GB the cell makes. Those times the
               in-process cost of what the metrics add per request and per partition
               (`unit`) give the cost per GB the A/B ratio is too noisy to show on a shared
               machine: (requests/GB x us/request + partitions/GB x us/partition) / off CPU
    unit       in process, timeit on the broker's own code: what following one Produce
               request costs while the listener is on (LoggedRequest, the request log's
               measurement points, error_counts of a response of N partitions,
               RequestMetrics), and BrokerTopicStats' count of one partition (done with the
               listener off too)

    python bench/bench_ops.py                      # every section, 5 repeats
    python bench/bench_ops.py --sections unit,produce --repeats 7

Output: medians (and min..max) per config and figure, the on/off ratio; JSON with every
run to bench/results/ops-<UTC timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import timeit
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import brokers  # noqa: E402
from bench_request_log import PipelinedClient, frame, requests_phase  # noqa: E402

from kbroker.cluster.broker_topic_stats import BrokerTopicStats  # noqa: E402
from kbroker.common.error_code import ErrorCode  # noqa: E402
from kbroker.ops.listener import MIN_SCRAPE_INTERVAL_S  # noqa: E402
from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402
from kbroker.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kbroker.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kbroker.protocol.messages.produce import ProduceResponse  # noqa: E402
from kbroker.server.request_logger import RequestLog  # noqa: E402
from kbroker.server.request_metrics import RequestMetrics  # noqa: E402

RESULTS_DIR = BENCH_DIR / "results"
TOPIC_PARTITIONS = 1000
HTTP_CLIENTS = 4
LATENCY_REQUESTS = 5000
HTTP_PATHS = ("/metrics", "/api/topics", "/api/groups")
GB = 1024**3
SECTIONS = ("requests", "busy", "produce", "unit")
# matrix.py's cells and record counts (FULL_RECORDS), acks=1, no compression
PRODUCE_CELLS = ((1024, 1), (1024, 64), (100, 1), (100, 64))
PRODUCE_RECORDS = {1024: 500_000, 100: 3_000_000}
UNIT_PARTITIONS = (1, 8, 64)


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


# ---------------------------------------------------------------- produce per GB

def _scraped(ops_port: int, names: tuple[str, ...]) -> dict[str, float]:
    """The all-topics samples of /metrics, and those of Produce (its versions summed)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{ops_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names and (not sample.labels
                                         or sample.labels.get("request") == "Produce"):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


PRODUCE_FIGURES = ("kafka_network_requestmetrics_requests_total",
                   "kafka_server_brokertopicmetrics_totalproducerequests_total",
                   "kafka_server_brokertopicmetrics_bytesin_total")


def produce_run(config: str, size: int, partitions: int, log_dir: Path) -> dict[str, Any]:
    ops_port = _free_port()
    broker = brokers.RunningBroker(spec(config, ops_port), log_dir, partitions=partitions)
    try:
        broker.wait_ready()
        options = PerfOptions(
            bootstrap_server=broker.bootstrap, topic="bench", num_records=PRODUCE_RECORDS[size],
            record_size=size, acks="1", compression="none", producers=2, consumers=1,
            partitions=partitions, linger_ms=5.0, batch_size=1_000_000,
            report_interval_s=1e9, timeout_s=300.0, quiet=True)
        before = _scraped(ops_port, PRODUCE_FIGURES) if config == "on" else {}
        scraped_at = time.monotonic()
        cpu = broker.cpu_seconds()
        summary = run_mode(options, "produce")
        cpu = broker.cpu_seconds() - cpu
        if summary.records < options.num_records or summary.errors:
            raise RuntimeError(f"produce: {summary.records} records, {summary.errors} errors")
        gb = summary.bytes / GB
        out: dict[str, Any] = {"cpu_s_per_gb": cpu / gb, "records_per_s": summary.records_per_s}
        if config == "on":
            # /metrics renders at most once per MIN_SCRAPE_INTERVAL_S: wait for a fresh one
            time.sleep(max(0.0, scraped_at + MIN_SCRAPE_INTERVAL_S + 0.1 - time.monotonic()))
            after = _scraped(ops_port, PRODUCE_FIGURES)
            delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in PRODUCE_FIGURES}
            requests = delta["kafka_network_requestmetrics_requests_total"]
            out["produce_requests_per_gb"] = requests / gb
            out["partitions_per_request"] = (
                delta["kafka_server_brokertopicmetrics_totalproducerequests_total"] / requests)
            out["bytes_in_per_gb"] = delta["kafka_server_brokertopicmetrics_bytesin_total"] / gb
        return out
    finally:
        broker.stop()


# ---------------------------------------------------------------- unit costs (in process)

class _Connection:
    """What RequestLog.received keeps of a connection (nothing is read from it here)."""


def _produce_response(partitions: int) -> ProduceResponse:
    part = ProduceResponse.PartitionProduceResponse
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="bench", partition_responses=[part(index=i, error_code=ErrorCode.NONE, base_offset=i)
                                           for i in range(partitions)])])


def unit_costs(number: int = 20000, repeat: int = 7) -> dict[str, float]:
    """Microseconds: following one Produce request of N partitions with the listener on
    (what the connection does: a clock read per socket read, the LoggedRequest and its
    measurement points, the response's size, error_counts, RequestMetrics), and
    BrokerTopicStats' count of one partition of a Produce (listener on or off)."""
    out: dict[str, float] = {}
    log = RequestLog(metrics=RequestMetrics())
    conn, parts = _Connection(), [b"x" * 64, b"y" * 512]
    for partitions in UNIT_PARTITIONS:
        response = _produce_response(partitions)

        def follow(response: Any = response) -> None:
            received = time.monotonic_ns() if log.active() else 0
            entry = log.received(conn, None, None, 0, 9, 1, 1000, received)  # type: ignore[arg-type]
            entry.handler_returned()
            entry.response_ready(response)
            entry.dequeued(parts)
            log.completed(entry, time.monotonic_ns())

        best = min(timeit.repeat(follow, number=number, repeat=repeat))
        out[f"follow_request_us_{partitions}_partitions"] = best / number * 1e6
    stats = BrokerTopicStats()

    def count() -> None:
        topic = stats.topic("bench")
        topic.total_produce_requests += 1
        topic.messages_in += 100
        topic.bytes_in += 16384

    out["topic_stats_us_per_partition"] = min(timeit.repeat(count, number=number,
                                                            repeat=repeat)) / number * 1e6
    return out


def _follow_us(unit: dict[str, float], partitions: float) -> float:
    """us to follow a request of `partitions` partitions: linear between measured sizes."""
    sizes = sorted(UNIT_PARTITIONS)
    low = max([n for n in sizes if n <= partitions], default=sizes[0])
    high = min([n for n in sizes if n >= partitions], default=sizes[-1])
    a, b = unit[f"follow_request_us_{low}_partitions"], unit[f"follow_request_us_{high}_partitions"]
    return a if high == low else a + (b - a) * (partitions - low) / (high - low)


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
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated, of {', '.join(SECTIONS)}")
    p.add_argument("--requests", type=int, default=10000, help="per request phase")
    p.add_argument("--latency-requests", type=int, default=LATENCY_REQUESTS)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--summarize", type=Path, metavar="JSON",
                   help="print the summaries of an earlier run's JSON, run nothing")
    args = p.parse_args(argv)
    if args.summarize is not None:
        return _summarize(json.loads(args.summarize.read_text()))
    sections = [x for x in args.sections.split(",") if x]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}")
    rng = random.Random(args.seed)
    log_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-ops-"))
    runs: list[dict[str, Any]] = []
    table: dict[str, Any] = {}
    if "unit" in sections:
        table["unit"] = unit_costs()
        print("unit costs (us, in process):", json.dumps(
            {k: round(v, 3) for k, v in table["unit"].items()}), flush=True)
    for repeat in range(args.repeats):
        order = [c for c in ("off", "on") if "requests" in sections]
        order += ["busy"] if "busy" in sections else []
        order += [f"produce:{size}:{parts}:{config}" for size, parts in PRODUCE_CELLS
                  for config in ("off", "on")] if "produce" in sections else []
        rng.shuffle(order)
        for config in order:
            if config.startswith("produce:"):
                _, size, parts, side = config.split(":")
                result = produce_run(side, int(size), int(parts), log_dir)
            elif config == "busy":
                result = busy_run(_free_port(), log_dir, args.latency_requests)
            else:
                broker = brokers.RunningBroker(spec(config, _free_port()), log_dir)
                try:
                    broker.wait_ready()
                    result = requests_phase(broker, args.requests)
                finally:
                    broker.stop()
            runs.append({"config": config, "repeat": repeat, **result})
            print(f"repeat {repeat} {config}: {json.dumps(result)}", flush=True)
    if "requests" in sections:
        table.update(_requests_summary(runs))
    if "busy" in sections:
        table.update(_busy_summary(runs))
    if "produce" in sections:
        table["produce"] = _produce_summary(runs, table.get("unit"), table.get(
            "produce_cpu_us_per_request"))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = RESULTS_DIR / f"ops-{stamp}.json"
    out.write_text(json.dumps({"tool": "bench/bench_ops.py", "settings": vars(args),
                               "summary": table, "runs": runs}, indent=1))
    print(f"\nwrote {out}")
    return 0


def _summarize(document: dict[str, Any]) -> int:
    runs, table = document["runs"], document["summary"]
    configs = {r["config"] for r in runs}
    if {"on", "off"} <= configs:
        table.update(_requests_summary(runs))
    if "busy" in configs:
        table.update(_busy_summary(runs))
    if any(c.startswith("produce:") for c in configs):
        _produce_summary(runs, table.get("unit"), table.get("produce_cpu_us_per_request"))
    return 0


def _requests_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
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
    return table


def _busy_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
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
    return table


def _produce_summary(runs: list[dict[str, Any]], unit: dict[str, float] | None,
                     per_request: dict[str, float] | None = None) -> dict[str, Any]:
    print("\nproduce per GB, listener off vs on (median over repeats, min..max); the cost "
          "computed from the broker's own counts and the unit costs")
    table: dict[str, Any] = {}
    for size, parts in PRODUCE_CELLS:
        key = f"{'1KiB' if size == 1024 else f'{size}B'}/acks=1/none/p{parts}"
        of = {side: [r for r in runs if r["config"] == f"produce:{size}:{parts}:{side}"]
              for side in ("off", "on")}
        cpu = {side: [r["cpu_s_per_gb"] for r in of[side]] for side in of}
        pairs = [math.log(a["cpu_s_per_gb"] / b["cpu_s_per_gb"])
                 for a, b in zip(of["on"], of["off"], strict=False)]
        row: dict[str, Any] = {
            "off_cpu_s_per_gb": statistics.median(cpu["off"]),
            "on_cpu_s_per_gb": statistics.median(cpu["on"]),
            "on/off": statistics.median(cpu["on"]) / statistics.median(cpu["off"]),
            "paired_on/off_geomean": math.exp(statistics.mean(pairs)) if pairs else None,
            "paired_log_stdev": statistics.stdev(pairs) if len(pairs) > 1 else None,
            "produce_requests_per_gb": statistics.median(r["produce_requests_per_gb"] for r in of["on"]),
            "partitions_per_request": statistics.median(r["partitions_per_request"] for r in of["on"]),
        }
        line = (f"  {key:22s} CPU s/GB off {_median_range(cpu['off'])}  on "
                f"{_median_range(cpu['on'])}  on/off {row['on/off']:.3f}; "
                f"{row['produce_requests_per_gb']:.0f} Produce requests/GB of "
                f"{row['partitions_per_request']:.1f} partitions")
        if unit is not None:
            follow_s = row["produce_requests_per_gb"] * _follow_us(
                unit, row["partitions_per_request"]) / 1e6
            stats_s = (row["produce_requests_per_gb"] * row["partitions_per_request"]
                       * unit["topic_stats_us_per_partition"] / 1e6)
            row["listener_on_cpu_s_per_gb"] = follow_s
            row["topic_stats_cpu_s_per_gb"] = stats_s
            row["cost_of_off_cpu"] = (follow_s + stats_s) / row["off_cpu_s_per_gb"]
            line += (f"; computed: {follow_s * 1000:.2f} ms/GB following requests + "
                     f"{stats_s * 1000:.2f} ms/GB topic counts = "
                     f"{row['cost_of_off_cpu'] * 100:.2f} % of the CPU per GB")
        if per_request is not None:
            # the same with what the listener added per small Produce end to end
            # (`requests`: on - off, broker CPU per request), which includes the
            # connection's share that the in-process unit leaves out
            added_us = max(per_request["on"] - per_request["off"], 0.0)
            row["cost_of_off_cpu_end_to_end"] = (
                row["produce_requests_per_gb"] * added_us / 1e6 / row["off_cpu_s_per_gb"])
            line += (f"; with the end-to-end {added_us:.1f} us/request: "
                     f"{row['cost_of_off_cpu_end_to_end'] * 100:.2f} %")
        table[key] = row
        print(line)
    return table


if __name__ == "__main__":
    sys.exit(main())
