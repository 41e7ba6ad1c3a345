"""What the request log costs: off against the build before it, and on (DEBUG, TRACE, the
protocol trace), in the same run.

Each repeat starts every broker fresh, in turn (new process, new temp data dir, killed
by PID afterwards), and runs the same workload on it:

    requests   a raw client pipelining small requests (8 in flight) on one connection:
               Produce (acks=1, one 100-byte record) then Fetch (offset 0, 16 KiB):
               the broker's CPU microseconds per request (utime+stime from /proc, which
               other work on a shared machine disturbs far less than wall time) and
               requests/s: the per-request cost, where a per-request logger shows most
    perf       `kbroker perf produce` then `consume` (librdkafka, 1 KiB records,
               acks=1, 1 partition): records/s and broker CPU seconds per GB, the
               matrix's 1KiB/acks=1/none/p1 cell

Brokers (--configs picks some):

    before     kbroker-ref:<--before> (default main): the build without the request log
    before2    the same build again: the A/A pair that measures the noise band
    off        this tree (or kbroker-ref:<--this>), default levels (kafka.request.logger
               inherits INFO: off)
    debug      the same, --log-level kafka.request.logger=DEBUG (stderr to a file)
    trace      the same, --log-level kafka.request.logger=TRACE
    file       the same, --trace FILE (the protocol trace, JSON lines)

    python bench/bench_request_log.py                    # 7 repeats, every broker
    python bench/bench_request_log.py --repeats 15 --configs before,before2,off --perf-records 0
    python bench/bench_request_log.py --this HEAD        # both sides built alike from git refs
    python bench/bench_request_log.py --before-tree DIR --configs before,before2,off --perf-records 0
                                                         # the build before from a source tree

Output: per broker and metric the median over repeats, the min..max, and the ratio of
medians to `before`; the noise band is before2/before (the same build twice). The
order of the brokers is shuffled in each repeat (a seeded shuffle), so that a burst
of other work on the machine does not always land on the same one. JSON (every run's
figures too) goes to bench/results/request_log-<UTC timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import struct
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import brokers  # noqa: E402

from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402
from kbroker.protocol.api_key import request_header_version  # noqa: E402
from kbroker.protocol.codec import Writer  # noqa: E402
from kbroker.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kbroker.protocol.messages.fetch import FetchRequest  # noqa: E402
from kbroker.protocol.messages.produce import ProduceRequest  # noqa: E402
from kbroker.protocol.messages.request_header import RequestHeader  # noqa: E402
from kbroker.records.builder import build_batch  # noqa: E402

RESULTS_DIR = BENCH_DIR / "results"
CONFIGS = ("before", "before2", "off", "debug", "trace", "file")
EXTRA_ARGS = {
    "off": "",
    "debug": " --log-level kafka.request.logger=DEBUG",
    "trace": " --log-level kafka.request.logger=TRACE",
    "file": " --trace {data_dir}/protocol-trace.jsonl",
}
IN_FLIGHT = 8
METRICS = ("produce_cpu_us_per_request", "fetch_cpu_us_per_request", "produce_requests_per_s",
           "fetch_requests_per_s", "perf_produce_cpu_s_per_gb", "perf_consume_cpu_s_per_gb",
           "perf_produce_records_per_s", "perf_consume_records_per_s")
GB = 1024**3


# ---------------------------------------------------------------- the raw client

def frame(request: Any, version: int, client_id: str = "bench") -> bytearray:
    """A framed request with correlation id 0 (patched per send at offset 8)."""
    w = Writer()
    RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                  correlation_id=0, client_id=client_id).encode(
        w, request_header_version(request.API_KEY, version))
    request.encode(w, version)
    body = w.to_bytes()
    return bytearray(struct.pack(">i", len(body)) + body)


class PipelinedClient:
    """Sends one request over and over with IN_FLIGHT of them outstanding."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def call(self, request: bytearray) -> bytes:
        self.sock.sendall(request)
        return self._response()

    def run(self, request: bytearray, count: int) -> float:
        """Seconds for `count` requests, IN_FLIGHT at a time."""
        start = time.perf_counter()
        sent = done = 0
        while done < count:
            burst = bytearray()
            while sent < count and sent - done < IN_FLIGHT:
                struct.pack_into(">i", request, 8, sent)
                burst += request
                sent += 1
            if burst:
                self.sock.sendall(burst)
            self._response()
            done += 1
        return time.perf_counter() - start

    def _response(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + size:
                    body = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return body
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def requests_phase(broker: brokers.RunningBroker, count: int) -> dict[str, float]:
    client = PipelinedClient(broker.port)
    try:
        create = CreateTopicsRequest(timeout_ms=10000, topics=[CreateTopicsRequest.CreatableTopic(
            name="rl", num_partitions=1, replication_factor=1)])
        client.call(frame(create, 4))
        batch = build_batch([(None, b"r" * 100, 0, [])], int(time.time() * 1000))
        produce = ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name="rl", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                             topics=[FetchRequest.FetchTopic(topic="rl", partitions=[
                                 FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                             partition_max_bytes=16384)])])
        out = {}
        for name, request in (("produce", frame(produce, 9)), ("fetch", frame(fetch, 11))):
            cpu = broker.cpu_seconds()
            seconds = client.run(request, count)
            out[f"{name}_cpu_us_per_request"] = (broker.cpu_seconds() - cpu) / count * 1e6
            out[f"{name}_requests_per_s"] = count / seconds
    finally:
        client.close()
    return out


def perf_phase(broker: brokers.RunningBroker, records: int) -> dict[str, float]:
    options = PerfOptions(bootstrap_server=broker.bootstrap, topic="perf", num_records=records,
                          record_size=1024, acks="1", compression="none", producers=2,
                          consumers=1, partitions=1, report_interval_s=1e9, timeout_s=300.0,
                          quiet=True)
    out = {}
    for mode in ("produce", "consume"):
        cpu = broker.cpu_seconds()
        summary = run_mode(options, mode)
        if summary.records < records or summary.errors:
            raise RuntimeError(f"perf {mode}: {summary.records} of {records} records, "
                               f"{summary.errors} errors")
        out[f"perf_{mode}_cpu_s_per_gb"] = (broker.cpu_seconds() - cpu) / (summary.bytes / GB)
        out[f"perf_{mode}_records_per_s"] = summary.records_per_s
    return out


# ---------------------------------------------------------------- runs

def specs(configs: list[str], before: str, this: str | None,
          before_tree: Path | None = None) -> dict[str, brokers.BrokerSpec]:
    """One spec per config; the configs of one build share its worktree (prepared once)."""
    before_spec = (brokers.kbroker_spec(before_tree, name=f"kbroker-tree:{before_tree}")
                   if before_tree is not None else brokers.kbroker_ref_spec(before))
    this_spec = brokers.kbroker_ref_spec(this) if this else brokers.kbroker_spec()
    out: dict[str, brokers.BrokerSpec] = {}
    for name in configs:
        if name in ("before", "before2"):
            out[name] = before_spec
        else:
            out[name] = replace(this_spec, name=f"{this_spec.name}:{name}",
                                command=this_spec.command + EXTRA_ARGS[name])
    return out


def run_once(name: str, spec: brokers.BrokerSpec, repeat: int, args: argparse.Namespace,
             log_dir: Path) -> dict[str, Any]:
    record: dict[str, Any] = {"config": name, "broker": spec.name, "repeat": repeat}
    broker = brokers.RunningBroker(spec, log_dir)
    try:
        broker.wait_ready()
        record |= requests_phase(broker, args.requests)
        if args.perf_records:
            record |= perf_phase(broker, args.perf_records)
        record["log_bytes"] = broker.log_path.stat().st_size
    except Exception as exc:  # one failed run must not lose the others
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        broker.stop()
    return record


def summarize(runs: list[dict[str, Any]], configs: list[str]) -> list[dict[str, Any]]:
    rows = []
    for metric in METRICS:
        base = _median(runs, "before", metric)
        for name in configs:
            values = [r[metric] for r in runs if r["config"] == name and metric in r]
            if not values:
                continue
            median = statistics.median(values)
            rows.append({"metric": metric, "config": name, "median": median,
                         "min": min(values), "max": max(values), "values": values,
                         "vs_before": median / base if base else None})
    return rows


def _median(runs: list[dict[str, Any]], name: str, metric: str) -> float | None:
    values = [r[metric] for r in runs if r["config"] == name and metric in r]
    return statistics.median(values) if values else None


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'metric':28} {'broker':8} {'median':>10} {'min':>10} {'max':>10} {'/before':>8}")
    for row in rows:
        ratio = "-" if row["vs_before"] is None else f"{row['vs_before']:.3f}"
        digits = 1 if row["median"] < 1000 else 0
        print(f"{row['metric']:28} {row['config']:8} {row['median']:>10,.{digits}f} "
              f"{row['min']:>10,.{digits}f} {row['max']:>10,.{digits}f} {ratio:>8}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"brokers to run, from {', '.join(CONFIGS)}")
    p.add_argument("--before", default="main", help="git ref of the build before (default main)")
    p.add_argument("--before-tree", type=Path, metavar="DIR",
                   help="the build before from this source tree, built in place, instead of "
                        "--before (e.g. another worktree)")
    p.add_argument("--this", metavar="REF",
                   help="run off/debug/trace/file from a build of this git ref, made as the "
                        "before build is (default: this working tree)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=23, help="of the per-repeat shuffle")
    p.add_argument("--requests", type=int, default=20000, help="requests per loop")
    p.add_argument("--perf-records", type=int, default=200_000,
                   help="records of the perf produce/consume phases (0: skip them)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    unknown = set(args.configs) - set(CONFIGS)
    if unknown:
        p.error(f"unknown configs: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configured = specs(args.configs, args.before, args.this, args.before_tree)
    log_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-reqlog-"))
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    started = time.time()
    builds = {id(s.prepare): s for s in configured.values() if s.prepare is not None}.values()
    try:
        for spec in builds:
            if spec.prepare is not None:
                spec.prepare()
        shuffle = random.Random(args.seed)
        for repeat in range(args.repeats):
            order = list(configured.items())
            shuffle.shuffle(order)
            for name, spec in order:
                run = run_once(name, spec, repeat, args, log_dir)
                runs.append(run)
                shown = run.get("error") or ", ".join(
                    f"{m} {run[m]:,.0f}" for m in METRICS if m in run)
                print(f"[{time.strftime('%H:%M:%S')}] repeat {repeat} {name:8} {shown}",
                      file=sys.stderr, flush=True)
    finally:
        for spec in builds:
            if spec.cleanup is not None:
                spec.cleanup()
    rows = summarize(runs, args.configs)
    print_table(rows)
    document = {
        "tool": "bench/bench_request_log.py", "started": started,
        "elapsed_s": time.time() - started,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "brokers": {name: spec.command for name, spec in configured.items()},
        "runs": runs, "summary": rows, "broker_logs": str(log_dir),
    }
    path = args.out / f"request_log-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps(document, indent=1))
    print(f"\nresults: {path}")
    return 2 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
