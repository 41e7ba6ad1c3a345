"""The log cleaner: cleaning throughput, and what a cleaning costs produce latency.

    python bench/bench_cleaner.py                    # every part, defaults below
    python bench/bench_cleaner.py --part throughput --mb 256 --duplicates 0.5,0.9
    python bench/bench_cleaner.py --part latency --repeats 3

throughput  In this process: a compacted log of --mb MB of dirty data (100 B and 1 KiB
            records, uncompressed and lz4, each record's key drawn so that the given
            fraction of records are older versions of a key written again later), cleaned
            once by LogCleaner.clean_once (the same code the broker's cleaner thread
            runs). MB/s of dirty log cleaned (wall and CPU), split into the offset map and
            the rewrite. The peer in the same run: a plain copy of the same segment files
            (copy_file_range, then fsync, as the cleaner writes its output), the disk and
            page cache's own rate. Issue 15's target: >= 100 MB/s for uncompressed 1 KiB
            records.
lag         In this process: how late an asyncio loop's 1 ms sleeps wake while a cleaning
            of --mb MB runs on a thread (as the broker runs it), against the same loop idle
            just before: what the cleaner thread costs the event loop itself.
latency     Two `kbroker serve` processes in turn on the same data (a compacted topic of
            2 MB segments with --dirty-mb MB of 1 KiB records over 20,000 keys, written
            with the cleaner off), one with log.cleaner.enable=true (it starts cleaning
            that topic at once), one with false; each restarted on a fresh copy of the
            data; the order alternates between repeats. While it runs, another process
            keeps writing keyed records to that topic (--dirty-rate-mb MB/s, so the
            cleaner keeps finding dirty segments; --dirty-ratio is the topic's
            min.cleanable.dirty.ratio: Kafka's 0.5, or 0.01 to clean after every roll), and a confluent-kafka producer sends
            1 KiB records at --rate per second (acks=1, linger.ms=0) to another topic for
            3 s of warm-up then --seconds; librdkafka reports each record's latency. The figure: p50/p99
            with and without the cleaner, their ratio (the issue's goal: p99 within 1.5x),
            and how long the cleaner was busy within the window (from its log lines).

Results: bench/results/cleaner.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from batches import Rec, make_batch  # noqa: E402
from brokers import RunningBroker, kbroker_spec  # noqa: E402

from kbroker.common.topic_partition import TopicPartition  # noqa: E402
from kbroker.records.compression import Codec  # noqa: E402
from kbroker.storage.log_cleaner import CleanerConfig  # noqa: E402
from kbroker.storage.log_config import LogConfig  # noqa: E402
from kbroker.storage.log_manager import LogManager  # noqa: E402
from kbroker.utils.time import MockTime  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "cleaner.json"
WARM_UP_S = 3.0  # the latency part: load running, nothing recorded yet
MB = 1024 * 1024
TP = TopicPartition("bench-compacted", 0)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------ throughput

def build_log(path: str, mb: int, record_size: int, codec: int, duplicates: float,
              seed: int = 1) -> LogManager:
    """A compacted log of about `mb` MB; a `duplicates` share of its records are
    superseded by a later record of the same key."""
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=64 * MB,
                    min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    m = LogManager([path], cfg, MockTime(), topic_configs={TP.topic: cfg},
                   cleaner_config=CleanerConfig(dedupe_buffer_size=256 * MB))
    m.startup()
    lg = m.get_or_create_log(TP, uuid.uuid4())
    total = mb * MB // (record_size + 20)
    keyspace = max(int(total * (1 - duplicates)), 1)
    rng = random.Random(seed)
    # the last `keyspace` records carry every key once: exactly `duplicates` are superseded
    keys = [rng.randrange(keyspace) for _ in range(total - keyspace)] + rng.sample(range(keyspace), keyspace)
    size = record_size - 12  # the value: random text, which lz4 shrinks about 2x, as JSON-ish data
    pool = os.urandom(MB).hex().encode()
    per_batch = max(16384 // record_size, 1) * (4 if codec else 1)
    for start in range(0, total, per_batch):
        recs = []
        for k in keys[start:start + per_batch]:
            at = rng.randrange(len(pool) - size)
            recs.append(Rec(pool[at:at + size], b"key-%010d" % k))
        lg.append_as_leader(make_batch(recs, codec=codec))
    lg.roll()
    lg.flush()
    return m


def plain_copy(src_dir: str, dst_dir: str) -> float:
    """Seconds to copy the .log files file to file and fsync them: the peer."""
    t0 = time.perf_counter()
    for name in sorted(os.listdir(src_dir)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(src_dir, name), "rb") as src, \
                open(os.path.join(dst_dir, name), "wb") as dst:
            size = os.fstat(src.fileno()).st_size
            done = 0
            while done < size:
                done += os.copy_file_range(src.fileno(), dst.fileno(), size - done, done, done)
            os.fsync(dst.fileno())
    return time.perf_counter() - t0


def throughput_case(mb: int, record_size: int, codec: int, duplicates: float) -> dict[str, Any]:
    path = tempfile.mkdtemp(prefix="kbroker-bench-cleaner-")
    try:
        m = build_log(path, mb, record_size, codec, duplicates)
        lg = m.get_log(TP)
        assert lg is not None and m.cleaner is not None
        dirty = sum(s.size for s in lg.segments)
        copy_dir = tempfile.mkdtemp(prefix="kbroker-bench-copy-", dir=path)
        copy_s = plain_copy(lg.dir, copy_dir)
        shutil.rmtree(copy_dir)
        t0, c0 = time.perf_counter(), cpu_seconds()
        result = m.cleaner.clean_once()
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        assert result is not None
        s = result.stats
        after = sum(seg.size for seg in lg.segments)
        m.shutdown()
        map_s = s.map_done - s.start
        row: dict[str, Any] = {
            "record_bytes": record_size, "codec": Codec(codec).name.lower(),
            "duplicates": duplicates, "dirty_mb": dirty / MB, "after_mb": after / MB,
            "records_read": s.messages_read, "records_kept": s.messages_written,
            "seconds": wall, "cpu_seconds": cpu, "mb_per_s": dirty / MB / wall,
            "record_mb_per_s": s.messages_read * record_size / MB / wall,
            "mb_per_cpu_s": dirty / MB / max(cpu, 1e-9),
            "map_mb_per_s": s.map_bytes_read / MB / max(map_s, 1e-9),
            "rewrite_mb_per_s": s.bytes_read / MB / max(wall - map_s, 1e-9),
            "copy_mb_per_s": dirty / MB / copy_s,
        }
        row["ratio_to_copy"] = (dirty / MB / wall) / (dirty / MB / copy_s)
        return row
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_throughput(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for record_size in (100, 1024):
        for codec in (Codec.NONE, Codec.LZ4):
            for dup in args.duplicates:
                row = throughput_case(args.mb, record_size, codec, dup)
                rows.append(row)
                print(f"{record_size:>5} B {row['codec']:5} dup {dup:.2f}: "
                      f"{row['mb_per_s']:7.1f} MB/s ({row['mb_per_cpu_s']:7.1f} MB per CPU-s; map "
                      f"{row['map_mb_per_s']:7.1f}, rewrite {row['rewrite_mb_per_s']:7.1f} MB/s), "
                      f"{row['record_mb_per_s']:7.1f} MB/s of records, "
                      f"{row['dirty_mb']:.0f} -> {row['after_mb']:.1f} MB; plain copy "
                      f"{row['copy_mb_per_s']:7.1f} MB/s (ratio {row['ratio_to_copy']:.2f})",
                      flush=True)
    return rows


# ------------------------------------------------------------------ loop lag

def run_lag(args: argparse.Namespace) -> dict[str, Any]:
    """In this process: an asyncio loop sleeping 1 ms in turn, its lateness measured while
    a cleaning runs on a thread (run_in_executor, as the broker runs it) against the same
    loop idle just before; 100 B and 1 KiB records, half superseded."""
    import asyncio

    rows = []
    for record_size in (100, 1024):
        path = tempfile.mkdtemp(prefix="kbroker-bench-cleaner-")
        try:
            m = build_log(path, args.mb, record_size, Codec.NONE, 0.5)
            assert m.cleaner is not None
            cleaner = m.cleaner

            async def measure_loop(cleaner: Any = cleaner) -> tuple[list[float], list[float], float]:
                loop = asyncio.get_running_loop()
                lags: list[float] = []
                busy = [True]

                async def ticker() -> None:
                    while busy[0]:
                        t = time.perf_counter()
                        await asyncio.sleep(0.001)
                        lags.append(time.perf_counter() - t - 0.001)

                task = asyncio.ensure_future(ticker())
                await asyncio.sleep(3.0)
                idle = list(lags)
                lags.clear()
                t0 = time.perf_counter()
                await loop.run_in_executor(None, cleaner.clean_once)
                elapsed = time.perf_counter() - t0
                busy[0] = False
                await task
                return idle, lags, elapsed

            idle, cleaning, elapsed = asyncio.run(measure_loop())
            m.shutdown()
        finally:
            shutil.rmtree(path, ignore_errors=True)

        def pct(xs: list[float], q: float) -> float:
            xs = sorted(xs)
            return 1000 * xs[min(int(len(xs) * q), len(xs) - 1)]

        row = {"record_bytes": record_size, "cleaning_s": elapsed,
               "idle_p50_ms": pct(idle, 0.5), "idle_p99_ms": pct(idle, 0.99),
               "idle_max_ms": pct(idle, 1.0), "cleaning_p50_ms": pct(cleaning, 0.5),
               "cleaning_p99_ms": pct(cleaning, 0.99), "cleaning_max_ms": pct(cleaning, 1.0)}
        rows.append(row)
        print(f"loop lag, {record_size} B records: idle p50 {row['idle_p50_ms']:.2f} p99 "
              f"{row['idle_p99_ms']:.2f} max {row['idle_max_ms']:.2f} ms; during a {elapsed:.2f} s "
              f"cleaning p50 {row['cleaning_p50_ms']:.2f} p99 {row['cleaning_p99_ms']:.2f} max "
              f"{row['cleaning_max_ms']:.2f} ms", flush=True)
    return {"rows": rows}


# ------------------------------------------------------------------ latency

def _admin_create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def preload(args: argparse.Namespace, log_dir: Path) -> Path:
    """A data dir holding the dirty topic, written with the cleaner off."""
    from confluent_kafka import Producer
    spec = kbroker_spec()
    spec.command += " --override log.cleaner.enable=false"
    data = Path(tempfile.mkdtemp(prefix="kbroker-bench-cleaner-data-"))
    b = RunningBroker(spec, log_dir, data_dir=data)
    b.keep_data()
    try:
        b.wait_ready()
        _admin_create(b.bootstrap, "dirty", {"cleanup.policy": "compact", "segment.bytes": str(2 * MB),
                                            "min.cleanable.dirty.ratio": str(args.dirty_ratio)})
        _admin_create(b.bootstrap, "live", {})
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
        value = os.urandom(512).hex().encode()
        for i in range(args.dirty_mb * MB // 1024):
            while True:
                try:
                    p.produce("dirty", key=b"key-%05d" % (i % 20000), value=value)
                    break
                except BufferError:
                    p.poll(0.05)
        assert p.flush(120) == 0
    finally:
        b.stop()  # SIGKILL: the restarts recover, as after any crash
    return data


def _dirty_load(bootstrap: str, mb_per_s: float, seconds: float) -> None:
    """In a child process: keyed 1 KiB records to the compacted topic at mb_per_s, so the
    cleaner keeps finding dirty segments (the same load runs with the cleaner off)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = os.urandom(506).hex().encode()
    rate = mb_per_s * MB / 1024
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        while sent < due:
            try:
                p.produce("dirty", key=b"key-%05d" % (sent % 20000), value=value)
                sent += 1
            except BufferError:
                break
        p.poll(0.005)
    p.flush(30)


def measure(args: argparse.Namespace, data: Path, log_dir: Path, cleaner: bool) -> dict[str, Any]:
    from confluent_kafka import Producer
    copy = Path(tempfile.mkdtemp(prefix="kbroker-bench-cleaner-run-"))
    shutil.rmtree(copy)
    shutil.copytree(data, copy)
    spec = kbroker_spec()
    spec.command += (f" --override log.cleaner.enable={'true' if cleaner else 'false'}"
                     " --override log.cleaner.backoff.ms=100")
    b = RunningBroker(spec, log_dir, data_dir=copy)
    try:
        b.wait_ready()
        latencies: list[float] = []
        errors: list[Any] = []

        def done(err: Any, msg: Any) -> None:
            if err:
                errors.append(err)
            else:
                latencies.append(msg.latency())

        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 1})
        value = os.urandom(512).hex().encode()
        p.produce("live", value=value)  # connect and fetch metadata first
        p.flush(30)
        latencies.clear()
        dirtier = multiprocessing.get_context("spawn").Process(
            target=_dirty_load, args=(b.bootstrap, args.dirty_rate_mb, WARM_UP_S + args.seconds + 1))
        dirtier.start()
        t0 = time.monotonic()
        sent = 0
        cpu0 = None
        while time.monotonic() - t0 < WARM_UP_S + args.seconds:
            if cpu0 is None and time.monotonic() - t0 >= WARM_UP_S:  # the window starts
                p.flush(30)
                latencies.clear()
                cpu0 = b.cpu_seconds()
            due = int((time.monotonic() - t0) * args.rate)
            while sent < due:
                p.produce("live", key=b"k%d" % (sent % 1000), value=value, on_delivery=done)
                sent += 1
            p.poll(0.001)
        p.flush(30)
        assert cpu0 is not None
        cpu = b.cpu_seconds() - cpu0
        dirtier.join(60)
        text = b.log_path.read_text(errors="replace")
        cleaned = [float(x) for x in re.findall(r"cleaned \S+ offsets \[\d+, \d+\) in ([\d.]+) s", text)]
        latencies.sort()
        return {
            "cleaner": cleaner, "records": len(latencies), "errors": len(errors),
            "p50_ms": 1000 * latencies[len(latencies) // 2],
            "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
            "max_ms": 1000 * latencies[-1], "broker_cpu_s": cpu,
            "cleanings": len(cleaned), "cleaning_seconds": sum(cleaned),
        }
    finally:
        b.stop()


def run_latency(args: argparse.Namespace) -> dict[str, Any]:
    log_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-cleaner-logs-"))
    data = preload(args, log_dir)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    try:
        for r in range(args.repeats):
            order = [False, True] if r % 2 == 0 else [True, False]
            for cleaner in order:
                row = measure(args, data, log_dir, cleaner)
                runs["on" if cleaner else "off"].append(row)
                print(f"cleaner {'on ' if cleaner else 'off'}: p50 {row['p50_ms']:.2f} ms "
                      f"p99 {row['p99_ms']:.2f} ms max {row['max_ms']:.1f} ms over {row['records']} "
                      f"records; cleaner busy {row['cleaning_seconds']:.1f} s in "
                      f"{row['cleanings']} cleanings; broker CPU {row['broker_cpu_s']:.1f} s",
                      flush=True)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    median = {k: {f: statistics.median(r[f] for r in rs) for f in ("p50_ms", "p99_ms", "max_ms",
                                                                   "cleaning_seconds")}
              for k, rs in runs.items()}
    ratio = median["on"]["p99_ms"] / median["off"]["p99_ms"]
    print(f"produce p99 with the cleaner / without: {ratio:.2f} (goal <= 1.5)")
    return {"runs": runs, "median": median, "p99_ratio": ratio}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--part", choices=("throughput", "lag", "latency", "all"), default="all")
    ap.add_argument("--mb", type=int, default=256, help="dirty MB per throughput case")
    ap.add_argument("--duplicates", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.5, 0.9], help="fractions of superseded records")
    ap.add_argument("--dirty-mb", type=int, default=200, help="the latency part's dirty topic")
    ap.add_argument("--dirty-rate-mb", type=float, default=4.0,
                    help="MB/s of keyed records written to it while measuring (cleaner on or off)")
    ap.add_argument("--dirty-ratio", type=float, default=0.5,
                    help="min.cleanable.dirty.ratio of that topic (0.01: a cleaning after every "
                         "segment roll, the clean part rewritten each time)")
    ap.add_argument("--rate", type=int, default=2000, help="records/s produced while measuring")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    out: dict[str, Any] = {"options": {k: v for k, v in vars(args).items() if k != "json"},
                           "load_average": os.getloadavg()}
    if args.part in ("throughput", "all"):
        out["throughput"] = run_throughput(args)
    if args.part in ("lag", "all"):
        out["lag"] = run_lag(args)
    if args.part in ("latency", "all"):
        out["latency"] = run_latency(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2, default=str))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
