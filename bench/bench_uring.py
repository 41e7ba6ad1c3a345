"""io_uring for the append path, measured before it is adopted (issue 17).

bench/uring/append_uring.c appends the same batches to PARTITIONS files two ways: one
pwrite(2) per batch (what LogSegment.append does) and one io_uring submission per
Produce request (a write SQE per partition, submit-and-wait, reap the CQEs). Request
shapes: 1 partition x 1 MiB, 64 x 16 KiB, 64 x 1 KiB, 1 x 1 KiB. Each shape runs
--repeats times in each order (which mode goes first alternates: the second run of a
pair finds the page cache warmer). Needs liburing (Debian: liburing-dev) and gcc.

    python bench/bench_uring.py

Medians of CPU seconds per GiB (getrusage, the process and its io-wq workers) and the
ratio uring / pwrite per shape go to stdout and bench/results/uring.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results" / "uring.json"
SHAPES = [(1, 1 << 20, 1024), (64, 16 << 10, 1024), (64, 1024, 8192), (1, 1024, 200_000)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    if not Path("/usr/include/liburing.h").exists():
        raise SystemExit("liburing is not installed (apt-get install liburing-dev)")
    work = Path(tempfile.mkdtemp(prefix="kbroker-bench-uring-"))
    runs: list[dict[str, Any]] = []
    try:
        binary = work / "append_uring"
        subprocess.run(["gcc", "-O2", "-o", str(binary), str(BENCH / "uring" / "append_uring.c"), "-luring"],
                       check=True)
        for repeat in range(args.repeats):
            for partitions, batch, rounds in SHAPES:
                for order in ("", "uring-first"):
                    done = subprocess.run([str(binary), str(work), str(partitions), str(batch), str(rounds),
                                           *([order] if order else [])],
                                          capture_output=True, text=True, timeout=600, check=True)
                    runs += [{"repeat": repeat, **json.loads(line)} for line in done.stdout.splitlines()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = []
    print(f"{'shape':>18}  {'pwrite CPU-s/GiB':>16}  {'uring CPU-s/GiB':>15}  uring/pwrite")
    for partitions, batch, _ in SHAPES:
        med = {mode: statistics.median(r["cpu_s_per_gib"] for r in runs if r["mode"] == mode
                                       and r["partitions"] == partitions and r["batch"] == batch)
               for mode in ("pwrite", "uring")}
        summary.append({"partitions": partitions, "batch": batch, **{f"{m}_cpu_s_per_gib": v for m, v in med.items()},
                        "ratio_uring_pwrite": med["uring"] / med["pwrite"]})
        print(f"{partitions:>4} x {batch:>8} B  {med['pwrite']:>16.3f}  {med['uring']:>15.3f}  "
              f"{med['uring'] / med['pwrite']:.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
