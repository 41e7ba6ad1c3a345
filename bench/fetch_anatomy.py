"""What librdkafka consumers see of each Fetch, broker by broker, counted not timed.

The matrix's consumer-tuned cells time consumers; on a shared machine those times swing.
This script counts instead, from librdkafka's own debug log (`debug=fetch,msg,protocol`,
so the same for every broker): per consumer process, the Fetch requests sent, the bytes of
each response and, per partition, the bytes and records it carried, librdkafka's round trip
per Fetch, and every time a partition was not fetched because its queue was "full"
(queued.min.messages / queued.max.messages.kbytes: librdkafka then waits
fetch.queue.backoff.ms, 1 s, before that partition's next Fetch).

    python bench/fetch_anatomy.py --brokers kbroker,tansu                # 100 B, p4, c2
    python bench/fetch_anatomy.py --record-size 1024 --records 500000 --partitions 8 --consumers 4
    python bench/fetch_anatomy.py -X queued.min.messages=1000000          # any consumer setting

Each broker is fresh (bench/brokers.py), the records come from `kbroker perf produce` as in
the matrix (2 producers, linger.ms 5, batch.size 1 MB, acks=1), then `--consumers`
processes each assign their share of the partitions from the beginning with
bench/matrix.py's TUNED_CONSUMER settings (or `--defaults`: librdkafka's) and read until
they have every record of them. Each consumer's stderr (librdkafka's log, one line per
event, written from its threads) is stamped on arrival by this process. Output: a table
per broker and consumer, and bench/results/fetch_anatomy-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import brokers  # noqa: E402
from matrix import TUNED_CONSUMER  # noqa: E402

from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# The consumer: one process per share of partitions, librdkafka's log to stderr.
CONSUMER = r"""
import json, resource, sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
config, topic, partitions, wanted = json.loads(sys.argv[1])
consumer = Consumer(config)
consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
records = 0
starved = 0.0  # seconds in calls that found nothing queued
start = time.monotonic()
last = start
while records < wanted and time.monotonic() - last < 20:
    messages = consumer.consume(10000, timeout=0)
    if not messages:
        before = time.monotonic()
        messages = consumer.consume(1, timeout=0.5)
        if records:
            starved += time.monotonic() - before
    if messages:
        last = time.monotonic()
        records += sum(1 for m in messages if m.error() is None)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"records": records, "seconds": last - start, "starved_s": starved,
                  "cpu_us_per_record": (usage.ru_utime + usage.ru_stime) * 1e6 / max(records, 1)}), flush=True)
consumer.close()
"""

SENT = re.compile(r"Sent FetchRequest \(v(\d+), (\d+) bytes @ \d+, CorrId (\d+)\)")
RECEIVED = re.compile(r"Received FetchResponse \(v(\d+), (\d+) bytes, CorrId (\d+), rtt ([\d.]+)ms\)")
MSGSET = re.compile(r"Topic \S+ \[(\d+)\] MessageSet size (\d+), error \"([^\"]*)\"")
ENQUEUE = re.compile(r"Enqueue (\d+) message\(s\) \((\d+) bytes, (\d+) ops\) on \S+ \[(\d+)\] fetch queue "
                     r"\(qlen (\d+)")
NOT_FETCHABLE = re.compile(r"\[(\d+)\] in state \S+ at .*\((\d+)/\d+ msgs, (\d+)/\d+ kb queued.*not fetchable: "
                           r"(.*)$")
BACKOFF = re.compile(r"\[(\d+)\]: Fetch backoff for (\d+)ms(?:: (.*))?$")


def start_consumer(bootstrap: str, topic: str, partitions: list[int], wanted: int,
                   settings: dict[str, str]) -> tuple[subprocess.Popen[bytes], list[tuple[float, str]],
                                                     threading.Thread]:
    config = {
        "bootstrap.servers": bootstrap, "group.id": f"anatomy-{time.monotonic_ns()}",
        "enable.auto.commit": "false", "enable.auto.offset.store": "false",
        "auto.offset.reset": "earliest", "enable.partition.eof": "false",
        **({} if settings.pop("_no_debug", None) else {"debug": "fetch,msg,protocol"}), **settings,
    }
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER, json.dumps([config, topic, partitions, wanted])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []

    def pump() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return proc, lines, reader


def analyse(lines: list[tuple[float, str]]) -> dict[str, Any]:
    """Counts per consumer from its librdkafka log."""
    fetches: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    not_fetchable: dict[str, int] = {}
    backoffs: list[float] = []  # when a partition was backed off for a full queue
    gaps: list[float] = []  # response received -> next request sent, ms (stamped here)
    last_received: float | None = None
    for stamp, line in lines:
        # A response's records are handled before the next Fetch is sent (one in flight per
        # broker), so what lies between two "Sent" lines belongs to the first one's answer
        # (librdkafka's "Received" line is missing now and then).
        if m := SENT.search(line):
            if last_received is not None:
                gaps.append((stamp - last_received) * 1000)
                last_received = None
            current = {"bytes": 0, "rtt_ms": None, "partitions": {}}
            fetches.append(current)
        elif (m := RECEIVED.search(line)) and current is not None:
            current["bytes"], current["rtt_ms"] = int(m[2]), float(m[4])
            last_received = stamp
        elif (m := MSGSET.search(line)) and current is not None:
            current["partitions"].setdefault(int(m[1]), {"bytes": 0, "records": 0})["bytes"] += int(m[2])
        elif (m := ENQUEUE.search(line)) and current is not None:
            part = current["partitions"].setdefault(int(m[4]), {"bytes": 0, "records": 0})
            part["records"] += int(m[1])
            part["qlen_before"] = int(m[5])
        elif m := NOT_FETCHABLE.search(line):
            reason = m[4].strip()
            not_fetchable[reason] = not_fetchable.get(reason, 0) + 1
        elif (m := BACKOFF.search(line)) and "Queue full" in (m[3] or ""):
            backoffs.append(stamp)
    with_data = [f for f in fetches if any(p["bytes"] for p in f["partitions"].values())]
    per_partition = [p for f in with_data for p in f["partitions"].values() if p["bytes"]]

    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return {
        "fetches": len(fetches),
        "fetches_with_data": len(with_data),
        "response_bytes_median": med([sum(p["bytes"] for p in f["partitions"].values()) for f in with_data]),
        "response_records_median": med([sum(p["records"] for p in f["partitions"].values()) for f in with_data]),
        "partitions_with_data_per_response_median": med([sum(1 for p in f["partitions"].values() if p["bytes"])
                                                         for f in with_data]),
        "partition_bytes_median": med([p["bytes"] for p in per_partition]),
        "partition_records_median": med([p["records"] for p in per_partition]),
        "partition_records_max": max((p["records"] for p in per_partition), default=None),
        "queued_before_enqueue_max": max((p.get("qlen_before", 0) for p in per_partition), default=None),
        "rtt_ms_median": med([f["rtt_ms"] for f in with_data if f["rtt_ms"] is not None]),
        "rtt_ms_max": max((f["rtt_ms"] for f in fetches if f["rtt_ms"] is not None), default=None),
        "gap_ms_median": med(gaps),
        "gap_ms_max": max(gaps, default=None),
        "queue_full_backoffs": len(backoffs),  # partitions backed off, one by one
        # Decisions: the partitions backed off together after one response count once.
        "queue_full_stalls": sum(1 for i, t in enumerate(backoffs) if i == 0 or t - backoffs[i - 1] > 0.05),
        "not_fetchable": not_fetchable,
    }


def run_broker(name: str, args: argparse.Namespace, settings: dict[str, str], log_dir: Path) -> dict[str, Any]:
    spec = brokers.resolve_spec(name)
    if spec.prepare:
        spec.prepare()
    broker = brokers.RunningBroker(spec, log_dir, partitions=args.partitions)
    try:
        broker.wait_ready()
        options = PerfOptions(bootstrap_server=broker.bootstrap, topic="bench", num_records=args.records,
                              record_size=args.record_size, acks="1", compression="none", producers=2,
                              consumers=args.consumers, partitions=args.partitions, linger_ms=5.0,
                              batch_size=1_000_000, report_interval_s=1e9, timeout_s=600, quiet=True)
        produced = run_mode(options, "produce")
        # Each consumer reads its partitions to their ends: ask the broker how many each has.
        from confluent_kafka import Consumer, TopicPartition
        probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "anatomy-probe"})
        ends = {}
        for p in range(args.partitions):
            low, high = probe.get_watermark_offsets(TopicPartition("bench", p), timeout=10)
            ends[p] = high - low
        probe.close()
        shares = [list(range(args.partitions))[i::args.consumers] for i in range(args.consumers)]
        cpu0 = broker.cpu_seconds()
        extra = {"_no_debug": "1"} if args.no_debug else {}
        started = [start_consumer(broker.bootstrap, "bench", share, sum(ends[p] for p in share),
                                  {**settings, **extra})
                   for share in shares]
        consumers = []
        for share, (proc, lines, reader) in zip(shares, started, strict=True):
            out, _ = proc.communicate(timeout=600)
            reader.join(10)
            summary = json.loads(out.decode().strip().splitlines()[-1])
            consumers.append({"partitions": share, **summary, **analyse(lines)})
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                log_name = f"{brokers._slug(name)}-c{len(consumers) - 1}.log"
                t0 = lines[0][0] if lines else 0.0
                (args.keep_logs / log_name).write_text("".join(f"{t - t0:10.4f} {line}\n" for t, line in lines))
        return {"broker": name, "produced_records": produced.records, "records_per_partition": ends,
                "consume_broker_cpu_s": broker.cpu_seconds() - cpu0, "consumers": consumers}
    finally:
        broker.stop()
        if spec.cleanup:
            spec.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="kbroker,tansu", help="comma-separated, as matrix.py's --a/--b")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--defaults", action="store_true", help="librdkafka's consumer defaults, not TUNED_CONSUMER")
    parser.add_argument("--no-debug", action="store_true",
                        help="no librdkafka debug log (timings and CPU only, no counts)")
    parser.add_argument("--keep-logs", type=Path, help="write each consumer's stamped librdkafka log here")
    parser.add_argument("-X", dest="extra", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    settings = {} if args.defaults else dict(TUNED_CONSUMER)
    settings.update(kv.split("=", 1) for kv in args.extra)
    log_dir = Path(tempfile.mkdtemp(prefix="fetch-anatomy-"))
    runs = [run_broker(name, args, settings, log_dir) for name in args.brokers.split(",")]
    keys = ["records", "seconds", "starved_s", "cpu_us_per_record", "fetches", "fetches_with_data", "response_bytes_median",
            "response_records_median", "partitions_with_data_per_response_median", "partition_bytes_median",
            "partition_records_median", "partition_records_max", "queued_before_enqueue_max", "rtt_ms_median", "rtt_ms_max",
            "gap_ms_median", "gap_ms_max", "queue_full_backoffs", "queue_full_stalls", "not_fetchable"]
    for run in runs:
        print(f"== {run['broker']}  consume broker CPU {run['consume_broker_cpu_s']:.2f} s")
        for i, c in enumerate(run["consumers"]):
            print(f"  consumer {i} partitions {c['partitions']}")
            for k in keys:
                v = c.get(k)
                print(f"    {k:44} {round(v, 2) if isinstance(v, float) else v}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"fetch_anatomy-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "settings": settings, "runs": runs}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
