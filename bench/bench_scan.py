"""Segment scanning: scan_segment beside validate_batches, and against another build.

    python bench/bench_scan.py                  # this tree: scan_segment beside validate_batches
    python bench/bench_scan.py --ref main       # ... and beside the build of a git ref (before/after)
    python bench/bench_scan.py --ref main --quick

scan_segment is what recovery (LogLoader, through LogSegment.recover) runs over a
segment's bytes: CRC-32C of every batch, offset order, the sparse offset and time index
entries, leader epoch starts (a follower's append does its accounting inside
validate_follower_batches; bench/bench_follower_append.py measures that).
validate_batches is the peer in the same process: it checks a Produce payload's
batches (CRC-32C too, and walks every record of an uncompressed batch).

Cases (segment bytes held in memory, index.interval.bytes 4096 as Kafka's default):
  tiny    1-record batches of 100 B records (~170 B a batch)
  small   10-record batches of 100 B records (~1.2 KB a batch)
  large   1000-record batches of 1 KiB records (~1 MiB a batch)

Each tree runs in a worker process of its own (`--ref` builds the ref in a
detached git worktree in a temp dir, removed at the end); the same segment files
are handed to both. Rounds alternate which tree goes first (A/B, B/A, ...). Per
case it prints the median GB/s and batches/s of each call in each tree, the ratio
scan_segment / validate_batches per tree, and (with --ref) this tree's
scan_segment over the ref's: the after/before ratio. Both trees' scan results
are compared before timing (they must be equal). Writes bench/results/scan.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "scan.json"
CASES = {  # name -> (records per batch, record bytes, segment bytes)
    "tiny": (1, 100, 8 << 20),
    "small": (10, 100, 16 << 20),
    "large": (1000, 1024, 64 << 20),
}
INDEX_INTERVAL_BYTES = 4096
CALLS = ("scan", "validate", "scan_2_threads")


# -- the worker: one tree's core, timing calls over the segment files --------------------

def worker(tree: str, data_dir: str) -> None:
    """Answer one JSON line per request line read from stdin."""
    sys.path.insert(0, tree)
    records = core_of(tree)
    segments = {name: (Path(data_dir) / f"{name}.log").read_bytes() for name in CASES}
    for line in sys.stdin:
        req = json.loads(line)
        data = segments[req["case"]]
        if req["op"] == "check":
            out: dict[str, Any] = {"scan": describe(records.scan_segment(
                data, 0, index_interval_bytes=INDEX_INTERVAL_BYTES))}
        else:
            names = CALLS if req["first"] == "scan" else CALLS[::-1]
            out = {name: time_calls(records, name, data, req["calls"]) for name in names}
        print(json.dumps(out), flush=True)


def core_of(tree: str) -> Any:
    """scan_segment and validate_batches of a tree's core: from kbroker._core.records in a
    tree before the record core's split, from segment_scan and batch_validation after."""
    from types import SimpleNamespace

    try:
        from kbroker._core import batch_validation, segment_scan
    except ImportError:
        from kbroker._core import records as old

        assert old.__file__ is not None and old.__file__.startswith(tree), old.__file__
        return old
    assert segment_scan.__file__ is not None and segment_scan.__file__.startswith(tree), segment_scan.__file__
    return SimpleNamespace(scan_segment=segment_scan.scan_segment,
                           validate_batches=batch_validation.validate_batches)


def describe(scan: Any) -> dict[str, Any]:
    return {
        "valid_bytes": scan.valid_bytes, "batch_count": scan.batch_count,
        "next_offset": scan.next_offset, "max_timestamp": scan.max_timestamp,
        "offset_of_max_timestamp": scan.offset_of_max_timestamp,
        "bytes_since_last_index_entry": scan.bytes_since_last_index_entry,
        "offset_index_sha256": hashlib.sha256(bytes(scan.offset_index_entries)).hexdigest(),
        "time_index_sha256": hashlib.sha256(bytes(scan.time_index_entries)).hexdigest(),
        "epoch_starts": [list(e) for e in scan.epoch_starts], "error": scan.error,
    }


def time_calls(records: Any, name: str, data: bytes, calls: int) -> float:
    """Seconds per call (for scan_2_threads: wall seconds over both threads' calls)."""
    def scans() -> None:
        for _ in range(calls):
            records.scan_segment(data, 0, index_interval_bytes=INDEX_INTERVAL_BYTES)

    start = time.perf_counter()
    if name == "scan":
        scans()
    elif name == "validate":
        for _ in range(calls):
            records.validate_batches(data)
    else:  # two recovery threads scanning at once (LogManager's recovery_threads)
        threads = [threading.Thread(target=scans) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (time.perf_counter() - start) / (2 * calls)
    return (time.perf_counter() - start) / calls


# -- the parent: segment files, trees, rounds ---------------------------------------------

def write_segments(data_dir: Path, quick: bool) -> dict[str, dict[str, int]]:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    from batches import Rec, make_batch

    info = {}
    for name, (per_batch, record_bytes, total) in CASES.items():
        total = total // 4 if quick else total
        value = os.urandom(record_bytes // 2).hex().encode()[:record_bytes]
        out = bytearray()
        offset = batches = 0
        while len(out) < total:  # a new leader epoch every 1000 batches
            out += make_batch([Rec(value, timestamp_delta=i) for i in range(per_batch)],
                              base_offset=offset, partition_leader_epoch=batches // 1000)
            offset += per_batch
            batches += 1
        (data_dir / f"{name}.log").write_bytes(out)
        info[name] = {"bytes": len(out), "batches": batches, "batch_bytes": len(out) // batches}
    return info


class Tree:
    """A worker process over one source tree."""

    def __init__(self, label: str, tree: Path, data_dir: Path) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(tree), str(data_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(tree),
        )

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} worker died (exit {self.proc.wait()})")
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def build_ref(ref: str, work: Path) -> Path:
    tree = work / "ref"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
                   check=True, capture_output=True, timeout=120)
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree,
                           capture_output=True, text=True, timeout=1800)
    if build.returncode != 0:
        raise RuntimeError(f"building {ref} failed:\n{build.stdout[-2000:]}{build.stderr[-4000:]}")
    return tree


def calls_for(tree: Tree, case: str, seconds: float) -> int:
    """Calls of the slower call that fill about `seconds` (doubling from one)."""
    calls = 1
    while True:
        t = tree.ask(op="time", case=case, calls=calls, first="scan")
        if max(t.values()) * calls >= seconds / 4:
            return calls * 4
        calls *= 2


def measure(trees: list[Tree], info: dict[str, dict[str, int]], rounds: int,
            seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case, meta in info.items():
        calls = calls_for(trees[0], case, seconds)
        times: dict[str, dict[str, list[float]]] = {t.label: {n: [] for n in CALLS} for t in trees}
        order = list(trees)
        for r in range(rounds):
            for tree in order:
                got = tree.ask(op="time", case=case, calls=calls, first="scan" if r % 2 else "validate")
                for name, secs in got.items():
                    times[tree.label][name].append(secs)
            order.reverse()
        out[case] = summarise(case, meta, calls, times)
    return out


def summarise(case: str, meta: dict[str, int], calls: int,
              times: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    res: dict[str, Any] = {**meta, "calls_per_round": calls, "sides": {}}
    for label, by_call in times.items():
        med = {name: statistics.median(v) for name, v in by_call.items()}
        res["sides"][label] = {
            f"{name}_{unit}": value
            for name, m in med.items()
            for unit, value in (("gb_per_s", meta["bytes"] / m / 1e9),
                                ("batches_per_s", meta["batches"] / m))
        } | {"scan_over_validate": med["validate"] / med["scan"]}
    labels = list(times)
    if len(labels) == 2:
        for name in ("scan", "scan_2_threads"):
            after, before = (statistics.median(times[label][name]) for label in labels)
            res[f"{name}_after_over_before"] = before / after
    return res


def report(results: dict[str, Any]) -> None:
    print(f"{'case':6s} {'tree':10s} {'batch B':>8s} {'scan GB/s':>10s} {'scan Mbatch/s':>14s} "
          f"{'validate GB/s':>14s} {'scan/validate':>14s} {'2 threads GB/s':>15s}")
    for case, res in results.items():
        for label, side in res["sides"].items():
            print(f"{case:6s} {label:10s} {res['batch_bytes']:8d} {side['scan_gb_per_s']:10.2f} "
                  f"{side['scan_batches_per_s'] / 1e6:14.2f} {side['validate_gb_per_s']:14.2f} "
                  f"{side['scan_over_validate']:14.2f} {side['scan_2_threads_gb_per_s']:15.2f}")
        if "scan_after_over_before" in res:
            print(f"{case:6s} after/before: scan_segment {res['scan_after_over_before']:.2f}x, "
                  f"two threads {res['scan_2_threads_after_over_before']:.2f}x")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", help="also time the build of this git ref (before/after)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.3, help="per call, per round and side")
    ap.add_argument("--quick", action="store_true", help="smaller segments and 3 rounds")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kb-bench-scan-"))
    trees: list[Tree] = []
    try:
        info = write_segments(work, args.quick)
        trees.append(Tree("this", ROOT, work))
        if args.ref:
            trees.append(Tree(args.ref, build_ref(args.ref, work), work))
            for case in CASES:
                a, b = (t.ask(op="check", case=case) for t in trees)
                if a != b:
                    raise SystemExit(f"{case}: scan results differ:\n this: {a}\n {args.ref}: {b}")
        results = measure(trees, info, 3 if args.quick else args.rounds,
                          args.seconds / 3 if args.quick else args.seconds)
    finally:
        for t in trees:
            t.close()
        if args.ref:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "ref")],
                           check=False, capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    report(results)
    out = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
           "ref": args.ref, "index_interval_bytes": INDEX_INTERVAL_BYTES, "cases": results}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
