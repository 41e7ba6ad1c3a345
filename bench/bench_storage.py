"""Storage engine benchmarks: append, index lookups, read latency, recovery.

    python bench/bench_storage.py [--dir /path] [--log-gib 2] [--quick]

Figures (issue 3's targets in brackets):
  append_1mib        1 MiB batches into the page cache: GB/s [>= 1.5] and CPU-s/GB,
                     side by side with the peer: plain os.write of the same bytes
                     (alternating 256 MiB rounds into fresh files, median)
  build_log          writing the --log-gib log for the recovery runs (disk-bound)
  append_small       100-record batches of 100 B records: batches/s, records/s
  index_lookups      OffsetIndex / TimeIndex lookups per second (full 10 MiB indexes)
  read_latency       Log.read() of random offsets: median and p99 microseconds
  recovery_clean     LogManager.startup() of a clean log of --log-gib GiB [< 0.2 s]
  recovery_unclean   the same after a simulated kill (no marker, recovery point 0):
                     scan GB/s [>= 1 GB/s]; page cache warm (the data was just written)
  recovery_small     the same for the log of 100-record batches (11 KB each)
Writes everything to bench/results/storage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from batches import Rec, make_batch  # noqa: E402

from kbroker.common.topic_partition import TopicPartition  # noqa: E402
from kbroker.storage.checkpoints import OffsetCheckpointFile  # noqa: E402
from kbroker.storage.log_config import LogConfig  # noqa: E402
from kbroker.storage.log_manager import LogManager  # noqa: E402
from kbroker.storage.offset_index import OffsetIndex  # noqa: E402
from kbroker.storage.time_index import TimeIndex  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "storage.json"
GB = 1e9
TP = TopicPartition("bench", 0)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def batch_of(n_records: int, record_size: int) -> bytes:
    value = os.urandom(record_size // 2).hex().encode()[:record_size]
    return make_batch([Rec(value, timestamp_delta=i) for i in range(n_records)],
                      base_timestamp=int(time.time() * 1000))


def manager(path: str, cfg: LogConfig) -> LogManager:
    m = LogManager([path], cfg)
    m.startup()
    return m


def _append_round(path: str, batch: bytes, n: int) -> tuple[float, float]:
    m = manager(path, LogConfig())
    log = m.get_or_create_log(TP, uuid.uuid4())
    t0, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(n):
        log.append_as_leader(batch)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    m.abandon()
    return wall, cpu


def _peer_round(path: str, batch: bytes, n: int) -> tuple[float, float]:
    os.makedirs(path, exist_ok=True)
    fd = os.open(os.path.join(path, "peer.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(n):
        os.write(fd, batch)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    os.close(fd)
    return wall, cpu


def bench_append_1mib(path: str, rounds: int, round_bytes: int) -> dict[str, float]:
    """Alternating rounds (A/B, B/A) of 1 MiB appends and of plain os.write of the same
    bytes, each into a fresh file deleted afterwards, so dirty page-cache limits and
    writeback hit both sides alike."""
    batch = batch_of(1024, 1000)  # ~1 MiB
    n = max(round_bytes // len(batch), 1)
    size = n * len(batch)
    ours, peer = [], []
    for r in range(rounds):
        sides = [("ours", _append_round, ours), ("peer", _peer_round, peer)]
        for name, fn, out in (sides if r % 2 == 0 else sides[::-1]):
            d = os.path.join(path, f"{name}-{r}")
            out.append(fn(d, batch, n))
            shutil.rmtree(d, ignore_errors=True)
    gbps = sorted(size / w / GB for w, _ in ours)
    pgbps = sorted(size / w / GB for w, _ in peer)
    return {
        "batch_bytes": len(batch), "round_bytes": size, "rounds": rounds,
        "gb_per_s": statistics.median(gbps), "gb_per_s_best": gbps[-1],
        "cpu_s_per_gb": statistics.median(c / (size / GB) for _, c in ours),
        "peer_os_write_gb_per_s": statistics.median(pgbps),
        "peer_cpu_s_per_gb": statistics.median(c / (size / GB) for _, c in peer),
    }


def build_log(path: str, total_bytes: int) -> dict[str, float]:
    """Write the log that the recovery benchmarks open (sustained append, disk-bound)."""
    batch = batch_of(1024, 1000)
    n = max(total_bytes // len(batch), 1)
    m = manager(path, LogConfig())
    log = m.get_or_create_log(TP, uuid.uuid4())
    t0 = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(batch)
    wall = time.perf_counter() - t0
    m.shutdown()
    return {"bytes": n * len(batch), "sustained_gb_per_s": n * len(batch) / wall / GB}


def bench_append_small(path: str, batches: int) -> dict[str, float]:
    batch = batch_of(100, 100)
    m = manager(path, LogConfig())
    log = m.get_or_create_log(TopicPartition("small", 0), uuid.uuid4())
    t0, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(batches):
        log.append_as_leader(batch)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    m.shutdown()
    return {"batch_bytes": len(batch), "batches": batches, "batches_per_s": batches / wall,
            "records_per_s": batches * 100 / wall, "mb_per_s": batches * len(batch) / wall / 1e6,
            "cpu_us_per_batch": cpu / batches * 1e6}


def bench_index_lookups(path: str, lookups: int) -> dict[str, float]:
    size = 10 * 1024 * 1024
    oi = OffsetIndex(os.path.join(path, "00000000000000000000.index"), 0, size)
    ti = TimeIndex(os.path.join(path, "00000000000000000000.timeindex"), 0, size)
    for i in range(oi.max_entries):
        oi.append(i * 10, i * 1000)
    for i in range(ti.max_entries):
        ti.maybe_append(1_000_000 + i * 7, i * 10)
    rng = random.Random(1)
    targets = [rng.randrange(oi.max_entries * 10) for _ in range(lookups)]
    t0 = time.perf_counter()
    for t in targets:
        oi.lookup(t)
    o_rate = lookups / (time.perf_counter() - t0)
    ts_targets = [1_000_000 + rng.randrange(ti.max_entries * 7) for _ in range(lookups)]
    t0 = time.perf_counter()
    for t in ts_targets:
        ti.lookup(t)
    t_rate = lookups / (time.perf_counter() - t0)
    entries = (oi.entries, ti.entries)
    oi.close()
    ti.close()
    return {"offset_index_entries": entries[0], "time_index_entries": entries[1],
            "offset_lookups_per_s": o_rate, "time_lookups_per_s": t_rate}


def bench_read_latency(path: str, reads: int) -> dict[str, float]:
    m = manager(path, LogConfig(segment_bytes=64 * 1024 * 1024))
    log = m.get_or_create_log(TopicPartition("read", 0), uuid.uuid4())
    batch = batch_of(10, 100)
    for _ in range(100_000):
        log.append_as_leader(batch)
    rng = random.Random(2)
    lat = []
    for _ in range(reads):
        off = rng.randrange(log.log_end_offset)
        t0 = time.perf_counter()
        log.read(off, 1024 * 1024)
        lat.append(time.perf_counter() - t0)
    m.shutdown()
    lat.sort()
    return {"log_records": 1_000_000, "segments_of_bytes": 64 * 1024 * 1024,
            "median_us": statistics.median(lat) * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6}


def bench_recovery(path: str, tp: TopicPartition = TP) -> dict[str, float]:
    """Open a log written before: clean, then after a simulated kill."""
    size = sum(os.path.getsize(os.path.join(path, tp.dir_name, f))
               for f in os.listdir(os.path.join(path, tp.dir_name)) if f.endswith(".log"))
    t0 = time.perf_counter()
    m = LogManager([path], LogConfig())
    m.startup()
    clean = time.perf_counter() - t0
    assert m.last_load_recovered == []
    leo = m.get_log(tp).log_end_offset  # type: ignore[union-attr]
    m.abandon()  # no marker: the next start recovers
    OffsetCheckpointFile(os.path.join(path, "recovery-point-offset-checkpoint")).write({tp: 0})
    t0 = time.perf_counter()
    m = LogManager([path], LogConfig())
    m.startup()
    unclean = time.perf_counter() - t0
    assert m.last_load_recovered == [tp]
    assert m.get_log(tp).log_end_offset == leo  # type: ignore[union-attr]
    m.shutdown()
    return {"log_bytes": size, "clean_open_s": clean, "unclean_open_s": unclean,
            "unclean_scan_gb_per_s": size / unclean / GB}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir under /tmp)")
    ap.add_argument("--log-gib", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="kb-bench-storage-", dir=args.dir)
    total = int((0.1 if args.quick else args.log_gib) * 1024**3)
    results: dict[str, object] = {"python": platform.python_version(), "machine": platform.machine(),
                                  "cpus": os.cpu_count()}
    try:
        runs = [
            ("append_1mib", lambda: bench_append_1mib(os.path.join(base, "ab"), 3 if args.quick else 7,
                                                      (64 if args.quick else 256) * 1024**2)),
            ("build_log", lambda: build_log(os.path.join(base, "big"), total)),
            ("recovery", lambda: bench_recovery(os.path.join(base, "big"))),
            ("append_small", lambda: bench_append_small(os.path.join(base, "small"),
                                                        2000 if args.quick else 20000)),
            ("recovery_small", lambda: bench_recovery(os.path.join(base, "small"),
                                                      TopicPartition("small", 0))),
            ("index_lookups", lambda: bench_index_lookups(base, 20_000 if args.quick else 200_000)),
            ("read_latency", lambda: bench_read_latency(os.path.join(base, "read"),
                                                        2000 if args.quick else 20000)),
        ]
        for name, fn in runs:
            res = fn()
            results[name] = res
            print(f"{name:14s} " + "  ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in res.items()))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
