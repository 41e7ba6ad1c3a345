"""kcat (librdkafka) consuming small records from the beginning, two brokers side by side.

Issue 17 measured 100 B records consumed by one kcat reading two partitions from the
beginning slower on kbroker than on Tansu (0.73x) while kbroker's broker used a tenth of
the CPU. The cause is librdkafka's fetch queue: when a Fetch response leaves a partition's
local queue at or above queued.min.messages (100000 records by default), librdkafka stops
fetching that partition for fetch.queue.backoff.ms (1 s; hard-wired before librdkafka
2.4). Asked for 16 MiB per partition, Kafka (and kbroker before
fetch.partition.response.max.records) answers ~160,000 records of 100 B per partition, so
every response costs the consumer a second; Tansu answers ~50,000.

This benchmark runs that case, one kcat consumer with librdkafka's defaults and with
throughput settings (large fetch.max.bytes / max.partition.fetch.bytes), on broker A and
broker B in the same run. The default B is kbroker answering as Kafka does
(fetch.partition.response.max.records=0): Debian's kcat (librdkafka 2.0.2) cannot talk to
Tansu 0.6 here (its ApiVersions answer ends early: "Read underflow"), use --b tansu with a
kcat that can.

    python bench/bench_kcat_consume.py                     # 3 repeats, 1M records of 100 B
    python bench/bench_kcat_consume.py --records 3000000 --b tansu

Each repeat starts each broker fresh, fills a 2-partition topic with two kcat producers
(one per partition, the same payload file), then times one kcat consumer reading every
record (`-e`: it exits at the end of the partitions) per consumer profile. Broker CPU
from /proc. Results (medians and A/B ratios) go to bench/results/kcat_consume.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import RunningBroker, resolve_spec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "kcat_consume.json"
PROFILES = {
    "defaults": [],
    "throughput": ["-X", "fetch.max.bytes=67108864", "-X", "max.partition.fetch.bytes=16777216"],
}


def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        raise SystemExit("kcat is not installed (apt-get install kcat)")
    return path


def produce(broker: RunningBroker, topic: str, payload: Path, producers: int) -> None:
    procs = [subprocess.Popen([kcat(), "-P", "-b", broker.bootstrap, "-t", topic, "-p", str(i % 2),
                               "-X", "linger.ms=5", "-X", "batch.size=1000000", "-l", str(payload)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(producers)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"kcat producer failed: {err.decode()[-500:]}")


def consume(broker: RunningBroker, topic: str, expected: int, profile: list[str]) -> dict[str, Any]:
    cpu0 = broker.cpu_seconds()
    began = time.monotonic()
    done = subprocess.run([kcat(), "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e",
                           "-q", "-f", "%o\n", *profile], capture_output=True, timeout=600)
    elapsed = time.monotonic() - began
    cpu = broker.cpu_seconds() - cpu0
    count = done.stdout.count(b"\n")
    if count != expected:
        raise RuntimeError(f"kcat read {count} records, expected {expected}: {done.stderr.decode()[-500:]}")
    return {"seconds": elapsed, "records_per_s": count / elapsed, "broker_cpu_s": cpu}


def run_broker(spec_text: str, args: argparse.Namespace, payload: Path, work: Path) -> dict[str, Any]:
    spec = resolve_spec(spec_text)
    broker = RunningBroker(spec, work, partitions=2)
    try:
        broker.wait_ready()
        topic = "kcat-consume"
        admin_create(broker.bootstrap, topic)
        produce(broker, topic, payload, args.producers)
        total = args.records_per_producer * args.producers
        return {name: consume(broker, topic, total, extra) for name, extra in PROFILES.items()}
    finally:
        broker.stop()


def admin_create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 2, 1)])
    try:
        futures[topic].result(30)
    except Exception as exc:  # an auto-created topic already exists
        if "already exists" not in str(exc).lower() and "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="kbroker")
    ap.add_argument("--b", default="kbroker-with:fetch.partition.response.max.records=0")
    ap.add_argument("--records", type=int, default=1_000_000, help="records in all")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    args.records_per_producer = args.records // args.producers
    work = Path(tempfile.mkdtemp(prefix="kbroker-bench-kcat-"))
    payload = work / "payload"
    line = b"x" * (args.record_size - 1)
    with open(payload, "wb") as f:
        for i in range(args.records_per_producer):
            f.write(b"%09d" % i + line[9:] + b"\n")
    runs: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeats):
            order = [args.a, args.b] if repeat % 2 == 0 else [args.b, args.a]
            for name in order:
                result = run_broker(name, args, payload, work)
                runs.append({"repeat": repeat, "broker": name, **result})
                print(f"repeat {repeat} {name:10s} " + "  ".join(
                    f"{p}: {r['records_per_s']:,.0f} rec/s broker {r['broker_cpu_s']:.2f} CPU-s"
                    for p, r in result.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary: dict[str, Any] = {}
    for profile in PROFILES:
        med = {name: statistics.median(r[profile]["records_per_s"] for r in runs if r["broker"] == name)
               for name in (args.a, args.b)}
        summary[profile] = {**{f"{n}_records_per_s": v for n, v in med.items()}, "ratio_a_b": med[args.a] / med[args.b]}
        print(f"{profile:10s} {args.a} {med[args.a]:,.0f} rec/s  {args.b} {med[args.b]:,.0f} rec/s  "
              f"{args.a}/{args.b} {med[args.a] / med[args.b]:.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs,
                                     "summary": summary}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
