"""A follower's append walk: the two walks it made (validate_batches, then scan_segment)
against the one it makes now (validate_follower_batches), same run, same batches.

    python bench/bench_follower_append.py            # ~1 MiB fetched payloads, 9 rounds
    python bench/bench_follower_append.py --quick    # 3 rounds

A follower's Log.append_as_follower checks every fetched batch before it writes: the
frame, the CRC-32C, the record count, the records of an uncompressed batch, and the
offsets the leader assigned (increasing; leader epoch changes). It used to do that in
two walks, validate_batches(from_client=False) and scan_segment, computing each batch's
CRC-32C twice; validate_follower_batches does both in one walk, one CRC-32C a batch.

Cases: payloads of about 1 MiB (replica.fetch.max.bytes) in batches of about 16 KiB
before compression (a producer's batch.size), of 1 KiB and of 100 B records, each
uncompressed and lz4. Each round times both sides (alternating which goes first) over
the same payload, in CPU seconds of this thread (time.thread_time); per case it prints
the median CPU seconds per replicated GB of each side and their ratio old/new (the
machine is shared: read the ratios, not the times). Both sides' results are compared
before timing. Writes bench/results/follower_append.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kbroker._core.batch_validation import validate_batches, validate_follower_batches  # noqa: E402
from kbroker._core.segment_scan import scan_segment  # noqa: E402
from kbroker.records.builder import build_batch  # noqa: E402
from kbroker.records.compression import Codec  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "follower_append.json"
PAYLOAD_BYTES = 1 << 20
BATCH_BYTES = 16 * 1024
MAX_MESSAGE_BYTES = 1 << 20
BASE_TIMESTAMP = 1_700_000_000_000
# name -> (record value bytes, codec)
CASES = {
    "1KiB": (1024, Codec.NONE),
    "1KiB-lz4": (1024, Codec.LZ4),
    "100B": (100, Codec.NONE),
    "100B-lz4": (100, Codec.LZ4),
}


def payload(value_bytes: int, codec: int) -> tuple[bytes, int]:
    """Batches of ~BATCH_BYTES of records (before compression) up to ~PAYLOAD_BYTES on the
    wire, at increasing offsets, a new leader epoch every 20 batches; and the batch count."""
    per_batch = max(1, BATCH_BYTES // (value_bytes + 10))
    out = bytearray()
    offset = batches = 0
    while len(out) < PAYLOAD_BYTES:
        values = [(None, os.urandom(value_bytes // 2).hex().encode()[:value_bytes], i, [])
                  for i in range(per_batch)]
        out += build_batch(values, BASE_TIMESTAMP, codec=codec, base_offset=offset,
                           partition_leader_epoch=batches // 20)
        offset += per_batch
        batches += 1
    return bytes(out), batches


def two_walks(view: memoryview) -> tuple[int, int, list[tuple[int, int]]]:
    """The follower's append before: validate, then scan (Log._follower_offsets)."""
    info = validate_batches(view, MAX_MESSAGE_BYTES, now_ms=0, check_timestamps=False,
                            from_client=False, require_keys=False)
    scan = scan_segment(view, 0, 0, -1, 1 << 62)
    return info.record_count, scan.next_offset, scan.epoch_starts


def one_walk(view: memoryview) -> tuple[int, int, list[tuple[int, int]]]:
    """The follower's append now."""
    info = validate_follower_batches(view, MAX_MESSAGE_BYTES)
    return info.record_count, info.next_offset, info.epoch_starts


SIDES: dict[str, Callable[[memoryview], Any]] = {"old": two_walks, "new": one_walk}


def cpu_seconds(fn: Callable[[memoryview], Any], view: memoryview, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn(view)
    return (time.thread_time() - start) / calls


def calls_for(view: memoryview, seconds: float) -> int:
    """Calls of the slower side that take about `seconds` of CPU (doubling from one)."""
    calls = 1
    while cpu_seconds(two_walks, view, calls) * calls < seconds:
        calls *= 2
    return calls


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case, (value_bytes, codec) in CASES.items():
        data, batches = payload(value_bytes, codec)
        view = memoryview(data)
        assert two_walks(view) == one_walk(view), case  # the same answer before timing
        calls = calls_for(view, seconds)
        times: dict[str, list[float]] = {name: [] for name in SIDES}
        order = list(SIDES)
        for _ in range(rounds):
            for name in order:
                times[name].append(cpu_seconds(SIDES[name], view, calls))
            order.reverse()
        med = {name: statistics.median(t) for name, t in times.items()}
        out[case] = {
            "payload_bytes": len(data), "batches": batches, "batch_bytes": len(data) // batches,
            "calls_per_round": calls, "rounds": rounds,
            **{f"{name}_cpu_s_per_gb": med[name] * 1e9 / len(data) for name in SIDES},
            "old_over_new": med["old"] / med["new"],
            "ratios_per_round": [o / n for o, n in zip(times["old"], times["new"], strict=True)],
        }
    return out


def report(results: dict[str, Any]) -> None:
    print(f"{'case':9s} {'batch B':>8s} {'batches':>8s} {'old CPU s/GB':>13s} "
          f"{'new CPU s/GB':>13s} {'old/new':>8s}")
    for case, r in results.items():
        print(f"{case:9s} {r['batch_bytes']:8d} {r['batches']:8d} {r['old_cpu_s_per_gb']:13.4f} "
              f"{r['new_cpu_s_per_gb']:13.4f} {r['old_over_new']:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of ~0.05 s a side")
    args = parser.parse_args()
    rounds, seconds = (3, 0.05) if args.quick else (9, 0.2)
    results = measure(rounds, seconds)
    report(results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cases": results}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
