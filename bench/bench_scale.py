"""Scale on one broker: many partitions, many connections, kbroker beside Tansu.

Partitions (N = 1k, 10k, and 100k with --full, in topics of at most 10,000):
    create_s        CreateTopics until answered
    metadata_s      a full Metadata (all topics) request until its last byte arrives
    produce_all_s   one record produced to every partition (confluent-kafka, acks=1)
    rss_mb, fds     the broker's resident memory and open descriptors afterwards
    stop_s          SIGTERM until the process exits (kbroker: a clean shutdown)
    restart_s       start until ApiVersions answers, on the same data (kbroker only:
                    Tansu's memory storage has nothing to restart on)
Connections (C = 1k, 10k idle clients, each answered one ApiVersions):
    rss_per_conn_kb the broker's RSS growth per connection
    all_answered_s  connect all and have each one's ApiVersions answered

    python bench/bench_scale.py                 # 1k and 10k, kbroker and tansu
    python bench/bench_scale.py --full          # also 100k partitions (minutes)
    python bench/bench_scale.py --brokers kbroker

Results go to bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import sys
import tempfile
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

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
PER_TOPIC = 10_000  # kbroker's partitions per topic: 100k partitions are 10 topics


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))) / 1024


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def full_metadata_s(port: int) -> float:
    """Metadata v9 for all topics over a raw socket; seconds until the last byte."""
    from kbroker.protocol.codec import Writer
    from kbroker.protocol.messages.metadata import MetadataRequest
    from kbroker.protocol.messages.request_header import RequestHeader

    w = Writer()
    RequestHeader(request_api_key=3, request_api_version=9, correlation_id=1,
                  client_id="bench").encode(w, 2)
    MetadataRequest(topics=None).encode(w, 9)
    body = w.to_bytes()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        start = time.perf_counter()
        s.sendall(len(body).to_bytes(4, "big") + body)
        _recv_exact(s, int.from_bytes(_recv_exact(s, 4), "big"))
        return time.perf_counter() - start


def partitions_run(spec: BrokerSpec, n: int, log_dir: Path) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = RunningBroker(spec, log_dir, partitions=1)
    out: dict[str, Any] = {"broker": spec.name, "partitions": n}
    try:
        broker.wait_ready()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        topics = {f"scale{i}": min(PER_TOPIC, n - i * PER_TOPIC) for i in range(-(-n // PER_TOPIC))}
        start = time.perf_counter()
        for f in admin.create_topics([NewTopic(t, count, 1) for t, count in topics.items()],
                                     operation_timeout=600).values():
            f.result(900)
        out["create_s"] = time.perf_counter() - start
        out["metadata_s"] = min(full_metadata_s(broker.port) for _ in range(3))
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "log_level": 0,
                             "enable.idempotence": False})
        start = time.perf_counter()
        for topic, count in topics.items():
            for p in range(count):
                producer.produce(topic, b"x", partition=p)
                producer.poll(0)
        if producer.flush(600):
            raise RuntimeError("not every record was delivered")
        out["produce_all_s"] = time.perf_counter() - start
        out["rss_mb"], out["fds"] = rss_mb(broker.pid), fds(broker.pid)
        if spec.name.startswith("kbroker"):
            start = time.perf_counter()
            os.kill(broker.pid, signal.SIGTERM)
            broker.process.wait(600)
            out["stop_s"] = time.perf_counter() - start
            again = _restart(broker)
            again.spec.ready_timeout_s = 900
            try:
                out["restart_s"] = again.wait_ready()
                out["restart_rss_mb"], out["restart_fds"] = rss_mb(again.pid), fds(again.pid)
                out["restart_metadata_s"] = min(full_metadata_s(again.port) for _ in range(3))
            finally:
                again.stop()
    finally:
        broker.stop()
    return out


def _restart(broker: RunningBroker) -> RunningBroker:
    """The same broker again, on the same data dir and port."""
    broker.keep_data()
    broker.stop()
    return RunningBroker(broker.spec, broker.log_path.parent, data_dir=broker.data_dir, port=broker.port)


def connections_run(spec: BrokerSpec, count: int, log_dir: Path) -> dict[str, Any]:
    broker = RunningBroker(spec, log_dir)
    socks: list[socket.socket] = []
    out: dict[str, Any] = {"broker": spec.name, "connections": count}
    try:
        broker.wait_ready()
        before = rss_mb(broker.pid)
        start = time.perf_counter()
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", broker.port), timeout=60)
            s.sendall(api_versions_v0_request(i))
            socks.append(s)
        for s in socks:
            _recv_exact(s, int.from_bytes(_recv_exact(s, 4), "big"))
        out["all_answered_s"] = time.perf_counter() - start
        out["rss_per_conn_kb"] = (rss_mb(broker.pid) - before) * 1024 / count
    finally:
        for s in socks:
            s.close()
        broker.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--brokers", default="kbroker,tansu")
    ap.add_argument("--full", action="store_true", help="also 100,000 partitions")
    ap.add_argument("--sizes", help="partition counts, comma-separated (instead of 1k,10k[,100k])")
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 10k client sockets
    specs = [resolve_spec(name) for name in args.brokers.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else (
        [1000, 10000] + ([100000] if args.full else []))
    rows: dict[str, list[dict[str, Any]]] = {"partitions": [], "connections": []}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-scale-") as tmp:
        for n in sizes:
            for spec in specs:
                try:
                    rows["partitions"].append(partitions_run(spec, n, Path(tmp)))
                except Exception as e:  # a broker that cannot do it: say so, go on
                    rows["partitions"].append({"broker": spec.name, "partitions": n, "error": str(e)[:200]})
                print(json.dumps(rows["partitions"][-1]), flush=True)
        for count in (1000, 10000):
            for spec in specs:
                try:
                    rows["connections"].append(connections_run(spec, count, Path(tmp)))
                except Exception as e:
                    rows["connections"].append({"broker": spec.name, "connections": count, "error": str(e)[:200]})
                print(json.dumps(rows["connections"][-1]), flush=True)
    print_tables(rows)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2))
    print(f"wrote {args.json}")
    return 0


def print_tables(rows: dict[str, list[dict[str, Any]]]) -> None:
    cols = ["create_s", "metadata_s", "produce_all_s", "rss_mb", "fds", "stop_s", "restart_s"]
    print(f"\n{'broker':10} {'partitions':>10} " + " ".join(f"{c:>13}" for c in cols))
    for r in rows["partitions"]:
        cells = [f"{r[c]:13.2f}" if isinstance(r.get(c), float) else f"{r.get(c, '-')!s:>13}" for c in cols]
        print(f"{r['broker']:10} {r['partitions']:>10} " + " ".join(cells) + (f"  {r['error']}" if "error" in r else ""))
    print(f"\n{'broker':10} {'connections':>11} {'rss_per_conn_kb':>16} {'all_answered_s':>15}")
    for r in rows["connections"]:
        if "error" in r:
            print(f"{r['broker']:10} {r['connections']:>11}  {r['error']}")
        else:
            print(f"{r['broker']:10} {r['connections']:>11} {r['rss_per_conn_kb']:16.1f} {r['all_answered_s']:15.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
