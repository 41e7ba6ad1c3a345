"""Side-by-side broker benchmark: the same matrix against broker A and broker B in one run.

    python bench/matrix.py --a kbroker --b tansu                 # full matrix, 3 repeats
    python bench/matrix.py --a tansu --b tansu --quick           # noise floor, a few cells
    python bench/matrix.py --a kbroker --b kbroker-ref:HEAD~1 --regression-threshold 0.15

Cell sets (--sets): "base", record size (100 B, 1 KiB) x acks (1, all) x
compression (none, lz4) x partitions (1, 64); "tuned", consumer-tuned cells:
several consumer processes configured as a user tuning librdkafka for
throughput would (large fetch sizes, librdkafka's defaults otherwise); and
"latency", produce-to-consume latency (`perf e2e`) at fixed rates. Each repeat
runs every cell on A, then on B, each time on a fresh broker (new process, new
temp data dir, killed by PID afterwards): create the topic, `perf produce`,
then `perf consume` of the same records, or `perf e2e` alone.
Broker CPU comes from /proc/PID/stat before and after each phase, peak RSS
from VmHWM. Medians over repeats and the A/B ratio per cell go to stdout,
bench/results/matrix-<timestamp>.json and a PNG + HTML report beside it.

Units: MB = 2**20 bytes (as Kafka's perf tools), GB = 2**30 bytes.
Exit status: 0, or 1 when a cell's A/B throughput ratio is below
1 - threshold (regression mode), or 2 when runs failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import brokers  # noqa: E402

from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.compare import (  # noqa: E402
    DEFAULT_THRESHOLD,
    NOISE_LOG_STDEV,
    default_threshold_all,
    geomean,
    is_regression,
    ratio_spread,
)
from kbroker.perf.compare import ratio as compare_ratio  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402
from kbroker.perf.stats import format_figure  # noqa: E402

GB = 1024**3
# The noise band and the default thresholds are kbroker.perf.compare's (shared with
# `kbroker perf compare`), measured on this shared 2-core machine (bench/README.md).
RESULTS_DIR = BENCH_DIR / "results"
# Records per phase: ~500 MB of 1 KiB records, ~300 MB of 100 B records (a few seconds each).
FULL_RECORDS = {100: 3_000_000, 1024: 500_000}
QUICK_RECORDS = {100: 1_000_000, 1024: 200_000}
THROUGHPUT_METRICS = ("records_per_s", "mb_per_s")
# The consumer-tuned cells' librdkafka settings: what a user tuning a consumer for
# throughput writes (issue 17; bench_kcat_consume.py's "throughput settings"), with
# librdkafka's defaults for the rest, where `perf consume` otherwise sets its own
# (queued.min.messages 1M, fetch.wait.max.ms 100, 8 MiB per partition).
TUNED_CONSUMER = {
    "fetch.max.bytes": "67108864",
    "max.partition.fetch.bytes": "16777216",
    "queued.min.messages": "100000",
    "queued.max.messages.kbytes": "65536",
    "fetch.wait.max.ms": "500",
}
LATENCY_RATES = (1000, 10_000, 50_000)  # records/s of the latency cells
SETS = ("base", "tuned", "latency")


@dataclass(frozen=True)
class Cell:
    record_size: int
    acks: str
    compression: str
    partitions: int
    consumers: int = 0  # consumer processes; 0: --consumers
    profile: str = "base"  # "base", "tuned" (TUNED_CONSUMER) or "latency" (perf e2e alone)
    rate: int = 0  # records/s of a latency cell

    @property
    def key(self) -> str:
        size = "1KiB" if self.record_size == 1024 else f"{self.record_size}B"
        key = f"{size}/acks={self.acks}/{self.compression}/p{self.partitions}"
        if self.profile == "tuned":
            return f"{key}/tuned-c{self.consumers}"
        if self.profile == "latency":
            return f"{key}/e2e-{self.rate // 1000}k" if self.rate % 1000 == 0 else f"{key}/e2e-{self.rate}"
        return key


def full_cells() -> list[Cell]:
    return [
        Cell(size, acks, compression, partitions)
        for size, acks, compression, partitions in itertools.product(
            (100, 1024), ("1", "all"), ("none", "lz4"), (1, 64)
        )
    ]


def tuned_cells() -> list[Cell]:
    """Several consumer processes with large fetch sizes, on as many partitions or more."""
    return [
        Cell(size, "1", "none", partitions, consumers, "tuned")
        for size, (partitions, consumers) in itertools.product((100, 1024), ((4, 2), (8, 4)))
    ]


def latency_cells(rates: tuple[int, ...] = LATENCY_RATES) -> list[Cell]:
    """Produce-to-consume latency of 1 KiB records at each rate (acks=1, one partition)."""
    return [Cell(1024, "1", "none", 1, profile="latency", rate=rate) for rate in rates]


def quick_cells() -> list[Cell]:
    return [Cell(1024, "1", "none", 1), Cell(100, "1", "none", 1), Cell(1024, "all", "lz4", 64)]


def cells_for(args: argparse.Namespace) -> list[Cell]:
    """The cells of this run: --cells picks by key from every set, else --sets (--quick:
    the quick base cells, one tuned cell, latency at 10k/s)."""
    everything = full_cells() + tuned_cells() + latency_cells(args.latency_rates)
    if args.cells:
        wanted = args.cells.split(",")
        unknown = set(wanted) - {c.key for c in everything}
        if unknown:
            raise SystemExit(f"no cell is called {', '.join(sorted(unknown))}")
        return [c for c in everything if c.key in wanted]
    chosen: list[Cell] = []
    if "base" in args.sets:
        chosen += quick_cells() if args.quick else full_cells()
    if "tuned" in args.sets:
        chosen += tuned_cells()[:1] if args.quick else tuned_cells()
    if "latency" in args.sets:
        rates = (10_000,) if args.quick and args.latency_rates == LATENCY_RATES else args.latency_rates
        chosen += latency_cells(rates)
    return chosen


# ---------------------------------------------------------------- one run

def run_once(
    spec: brokers.BrokerSpec, side: str, cell: Cell, repeat: int, args: argparse.Namespace,
    log_dir: Path,
) -> dict[str, Any]:
    """Fresh broker -> produce -> consume -> kill. Returns one raw run record."""
    record: dict[str, Any] = {"side": side, "broker": spec.name, "cell": cell.key,
                              "repeat": repeat, **asdict(cell)}
    broker = brokers.RunningBroker(spec, log_dir, partitions=cell.partitions)
    try:
        ready_s = broker.wait_ready()
        record["broker_stats"] = {"ready_s": ready_s, "idle_rss_mb": broker.rss_kb() / 1024}
        for phase, options in phase_options(cell, args, broker.bootstrap):
            record[phase] = _phase(broker, options, phase)
        record["broker_stats"]["peak_rss_mb"] = broker.peak_rss_kb() / 1024
    except Exception as exc:  # one failed run must not lose the others
        record["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    finally:
        broker.stop()
    return record


def phase_options(cell: Cell, args: argparse.Namespace,
                  bootstrap: str) -> list[tuple[str, PerfOptions]]:
    """The perf runs of one cell, in order: (mode, options)."""
    options = PerfOptions(
        bootstrap_server=bootstrap, topic="bench", num_records=records_for(cell, args),
        record_size=cell.record_size, acks=cell.acks, compression=cell.compression,
        producers=args.producers, consumers=min(cell.consumers or args.consumers, cell.partitions),
        partitions=cell.partitions, linger_ms=args.linger_ms, batch_size=args.batch_size,
        report_interval_s=1e9, timeout_s=args.phase_timeout, quiet=True,
    )
    if cell.profile == "latency":
        # One producer at the cell's rate, every record sent at once (linger 0).
        return [("e2e", replace(options, throughput=float(cell.rate), linger_ms=0.0,
                                producers=1))]
    consume = options
    if cell.profile == "tuned":
        consume = replace(options, client_config=dict(TUNED_CONSUMER))
    return [("produce", options), ("consume", consume)]


def _phase(broker: brokers.RunningBroker, options: PerfOptions, mode: str) -> dict[str, Any]:
    cpu_before = broker.cpu_seconds()
    summary = run_mode(options, mode)
    cpu = broker.cpu_seconds() - cpu_before
    result = summary.to_json()
    result["broker_cpu_s"] = cpu
    result["cpu_s_per_gb"] = cpu / (summary.bytes / GB) if summary.bytes else None
    if summary.records < options.num_records or summary.errors:
        result["incomplete"] = True
    return result


def records_for(cell: Cell, args: argparse.Namespace) -> int:
    if cell.profile == "latency":
        return max(1, round(cell.rate * args.latency_seconds))
    if args.records:
        return int(args.records)
    table = QUICK_RECORDS if args.quick else FULL_RECORDS
    return table.get(cell.record_size, max(1, 500 * 1024 * 1024 // cell.record_size))


# ---------------------------------------------------------------- aggregation

def metric(run: dict[str, Any], phase: str, name: str) -> float | None:
    """One figure of one run's phase, or None when the run failed or lacks it."""
    result = run.get(phase)
    if result is None or result.get("incomplete"):
        return None
    if name.startswith("p") and name[1:2].isdigit() or name in ("avg_ms", "max_ms"):
        latency = result.get("latency")
        if latency is None:
            return None
        return latency["avg_ms"] if name == "avg_ms" else (
            latency["max_ms"] if name == "max_ms" else latency["percentiles_ms"].get(name))
    value = result.get(name)
    return float(value) if value is not None else None


PHASE_METRICS = {
    "produce": ("records_per_s", "mb_per_s", "p50", "p99", "p99_9", "cpu_s_per_gb"),
    "consume": ("records_per_s", "mb_per_s", "cpu_s_per_gb"),
    "e2e": ("p50", "p95", "p99", "p99_9", "max_ms"),
    "broker_stats": ("ready_s", "idle_rss_mb", "peak_rss_mb"),
}


def summarize(runs: list[dict[str, Any]], cells: list[str]) -> list[dict[str, Any]]:
    """Per cell, phase and metric: the median over repeats for A and B, and A/B."""
    rows = []
    for cell in cells:
        for phase, names in PHASE_METRICS.items():
            for name in names:
                a = _values(runs, cell, "A", phase, name)
                b = _values(runs, cell, "B", phase, name)
                if not a and not b:
                    continue
                med_a = statistics.median(a) if a else None
                med_b = statistics.median(b) if b else None
                ratio = compare_ratio(med_a, med_b)
                rows.append({"cell": cell, "phase": phase, "metric": name, "a": med_a,
                             "b": med_b, "ratio": ratio, "a_values": a, "b_values": b})
    return rows


def _values(runs: list[dict[str, Any]], cell: str, side: str, phase: str, name: str) -> list[float]:
    found = (metric(r, phase, name) for r in runs if r["cell"] == cell and r["side"] == side)
    return [v for v in found if v is not None]


def noise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Spread of the A/B throughput ratios (meaningful when A and B are the same broker).

    Per-run ratios pair the i-th run of A with the i-th run of B in a cell;
    the cell ratios are ratios of medians (what regression mode checks).
    """
    cell_ratios, run_ratios = [], []
    for row in rows:
        if row["metric"] != "records_per_s" or row["phase"] not in ("produce", "consume"):
            continue
        if row["ratio"] is not None:
            cell_ratios.append(row["ratio"])
        run_ratios += [a / b for a, b in zip(row["a_values"], row["b_values"], strict=False) if b]
    if not cell_ratios:
        return {}
    return {
        **{f"cell_{key}": value for key, value in ratio_spread(cell_ratios).items()},
        "run_ratio_min": min(run_ratios) if run_ratios else None,
        "run_ratio_max": max(run_ratios) if run_ratios else None,
        "cells": len(cell_ratios),
    }


def throughput_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows regression mode checks: produce and consume records/s with a ratio."""
    return [
        row for row in rows
        if row["metric"] == "records_per_s" and row["phase"] in ("produce", "consume")
        and row["ratio"] is not None
    ]


def regressions(rows: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """Throughput rows whose A/B ratio is below 1 - threshold."""
    return [row for row in throughput_rows(rows) if is_regression(row["ratio"], threshold)]


def geomean_ratio(rows: list[dict[str, Any]]) -> float | None:
    """Geometric mean of the checked A/B ratios: the whole matrix in one, far less noisy, figure."""
    return geomean([row["ratio"] for row in throughput_rows(rows)])


# ---------------------------------------------------------------- output

def print_table(rows: list[dict[str, Any]], a_name: str, b_name: str) -> None:
    print(f"\nmedians over repeats; A = {a_name}, B = {b_name}; ratio = A/B")
    print(f"{'cell':28} {'phase':8} {'metric':14} {'A':>12} {'B':>12} {'A/B':>7}")
    for row in rows:
        digits = 3 if row["metric"] in ("cpu_s_per_gb",) else 2
        print(f"{row['cell']:28} {row['phase']:8} {row['metric']:14} "
              f"{format_figure(row['a'], digits):>12} {format_figure(row['b'], digits):>12} "
              f"{format_figure(row['ratio'], 3):>7}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--a", default="kbroker",
                   help="broker A: kbroker | tansu | kbroker-ref:<git ref> | cmd:<shell command>")
    p.add_argument("--b", default="tansu", help="broker B (same forms as --a)")
    p.add_argument("--peer-cmd", help="broker B as a shell command with {port} and {data_dir}")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true",
                   help="3 base cells, 1 tuned, latency at 10k/s, fewer records (a few minutes)")
    p.add_argument("--sets", default=",".join(SETS),
                   help=f"comma-separated cell sets to run, of {', '.join(SETS)} (default: all)")
    p.add_argument("--cells", help="comma-separated cell keys to run (any set), e.g. "
                   "1KiB/acks=1/none/p1,100B/acks=1/none/p4/tuned-c2,1KiB/acks=1/none/p1/e2e-10k")
    p.add_argument("--records", type=int, default=0, help="records per phase (default by size)")
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument("--batch-size", type=int, default=1_000_000)
    p.add_argument("--latency-rates", default=",".join(map(str, LATENCY_RATES)),
                   help="records/s of the latency cells, comma-separated")
    p.add_argument("--latency-seconds", type=float, default=5.0,
                   help="how long each latency cell produces (records = rate x seconds)")
    p.add_argument("--phase-timeout", type=float, default=300.0)
    p.add_argument("--regression-threshold", type=float, default=None, metavar="X",
                   help=f"exit 1 if a cell's A/B records/s ratio < 1 - X "
                        f"(default {DEFAULT_THRESHOLD} when B is a kbroker-ref)")
    p.add_argument("--regression-threshold-all", type=float, default=None, metavar="Y",
                   help="exit 1 if the geometric mean of all cells' ratios < 1 - Y (default: "
                        "3 sigma of the measured noise for that many cells, with --regression-"
                        "threshold)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    p.add_argument("--no-report", action="store_true", help="skip the PNG/HTML report")
    args = p.parse_args(argv)
    if args.peer_cmd:
        args.b = "cmd:" + args.peer_cmd
    if args.regression_threshold is None and args.b.startswith("kbroker-ref:"):
        args.regression_threshold = DEFAULT_THRESHOLD
    args.sets = tuple(args.sets.split(","))
    unknown = set(args.sets) - set(SETS)
    if unknown:
        p.error(f"--sets: no set is called {', '.join(sorted(unknown))}; sets: {', '.join(SETS)}")
    try:
        args.latency_rates = tuple(int(rate) for rate in args.latency_rates.split(","))
    except ValueError:
        p.error(f"--latency-rates: not a list of whole numbers: {args.latency_rates}")
    if any(rate <= 0 for rate in args.latency_rates) or args.latency_seconds <= 0:
        p.error("--latency-rates and --latency-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cells = cells_for(args)
    if not cells:
        raise SystemExit("no cell to run")
    specs = {"A": brokers.resolve_spec(args.a), "B": brokers.resolve_spec(args.b)}
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    args.out.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="kbroker-bench-logs-"))
    runs: list[dict[str, Any]] = []
    started = time.time()
    try:
        for spec in specs.values():
            if spec.prepare is not None:
                spec.prepare()
        for repeat in range(args.repeats):
            for cell in cells:
                for side, spec in specs.items():
                    run = run_once(spec, side, cell, repeat, args, log_dir)
                    runs.append(run)
                    _progress(run)
    finally:
        for spec in specs.values():
            if spec.cleanup is not None:
                spec.cleanup()
    rows = summarize(runs, [c.key for c in cells])
    print_table(rows, specs["A"].name, specs["B"].name)
    spread = noise(rows)
    failed = regressions(rows, args.regression_threshold) if args.regression_threshold else []
    overall = geomean_ratio(rows)
    threshold_all = args.regression_threshold_all
    if threshold_all is None and args.regression_threshold:
        threshold_all = default_threshold_all(len(throughput_rows(rows)))
    if threshold_all and overall is not None and overall < 1.0 - threshold_all:
        failed.append({"cell": "all cells (geometric mean)", "phase": "produce+consume",
                       "ratio": overall})
    document = {
        "tool": "bench/matrix.py", "started": started, "elapsed_s": time.time() - started,
        "a": {"name": specs["A"].name, "command": specs["A"].command},
        "b": {"name": specs["B"].name, "command": specs["B"].command},
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "units": {"MB": 2**20, "GB": 2**30},
        "cells": [c.key for c in cells], "runs": runs, "summary": rows, "ratio_spread": spread,
        "regression_threshold": args.regression_threshold, "noise_log_stdev": NOISE_LOG_STDEV,
        "regression_threshold_all": threshold_all, "geomean_ratio": overall,
        "regressions": [f"{r['cell']} {r['phase']} ratio {r['ratio']:.3f}" for r in failed],
        "broker_logs": str(log_dir),
    }
    path = args.out / f"matrix-{stamp}.json"
    path.write_text(json.dumps(document, indent=1))
    print(f"\nA/B records/s ratio spread: {json.dumps(spread)}")
    if overall is not None:
        print(f"geometric mean of the A/B records/s ratios: {overall:.3f}")
    print(f"results: {path}")
    if not args.no_report:
        import report

        for written in report.write(document, args.out / f"matrix-{stamp}"):
            print(f"report:  {written}")
    errors = [r for r in runs if "error" in r]
    if errors:
        print(f"{len(errors)} run(s) failed; broker logs in {log_dir}", file=sys.stderr)
    if failed:
        print(f"REGRESSION (threshold {args.regression_threshold}):", file=sys.stderr)
        for line in document["regressions"]:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 2 if errors else 0


def _progress(run: dict[str, Any]) -> None:
    def rate(phase: str) -> str:
        result = run.get(phase)
        return f"{result['mb_per_s']:.1f} MB/s" if result else "-"

    if "e2e" in run:
        p99 = metric(run, "e2e", "p99")
        status = f"e2e p99 {p99:.2f} ms" if p99 is not None else "e2e incomplete"
    else:
        status = f"produce {rate('produce')}, consume {rate('consume')}"
    status = run.get("error", status)
    print(f"[{time.strftime('%H:%M:%S')}] repeat {run['repeat']} {run['cell']:24} "
          f"{run['side']}={run['broker']}: {status}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
