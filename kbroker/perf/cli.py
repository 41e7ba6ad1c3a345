"""The `kbroker perf produce|consume|e2e|compare` command line.

The `kbroker` CLI wires this in with either::

    perf_cli.add_subparser(subparsers)     # adds `perf` and its three modes; then run(args)
    SUBCOMMANDS["perf"] = (perf_cli.HELP, perf_cli.configure_parser, perf_cli.run)

and `python -m kbroker.perf ...` runs it standalone.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from dataclasses import MISSING, asdict, fields
from typing import Any

from kbroker.perf import compare
from kbroker.perf.compare import DEFAULT_THRESHOLD, NOISE_LOG_STDEV
from kbroker.perf.context import load_average, run_context
from kbroker.perf.options import ACKS, COMPRESSION_TYPES, PerfOptions
from kbroker.perf.stats import LatencySummary, RunSummary, format_figure, spread
from kbroker.perf.workers import PerfStopped, stop_on_signals
from kbroker.tools.common import DEFAULT_BOOTSTRAP

MODES = ("produce", "consume", "e2e")
DEFAULT_LINGER_MS = {"produce": 5.0, "consume": 5.0, "e2e": 0.0}


HELP = "measure a Kafka-compatible broker's throughput and latency"
EPILOG = (
    "A progress line each second (--reporting-interval) on stderr, a summary per run on "
    "stdout; --repeats N adds min/median/max of every figure, --json OUT writes the runs "
    "with their context (versions, CPU, load, settings) for `kbroker perf compare`. "
    "Ctrl-C or SIGTERM stops every worker process and prints what was measured so far, "
    "marked PARTIAL. Exit status: 0 done, 1 errors (or a regression, compare), 2 bad "
    "usage (or unusable files, compare), 130 after SIGINT, 143 after SIGTERM."
)


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `perf` (with `produce`, `consume`, `e2e` under it) to an argparse subparsers object."""
    perf = subparsers.add_parser("perf", help=HELP, description=HELP)
    configure_parser(perf)
    return perf


def configure_parser(perf: argparse.ArgumentParser) -> None:
    """Give an existing `perf` parser its three modes and their options; `func` is `run`."""
    perf.set_defaults(func=run)
    perf.epilog = EPILOG
    modes = perf.add_subparsers(dest="perf_mode", metavar="MODE", required=True)
    for mode, text in (
        ("produce", "produce records as fast as possible (or at --throughput)"),
        ("consume", "consume records from the beginning of every partition"),
        ("e2e", "produce-to-consume latency at a fixed rate (--throughput, default 10000/s)"),
    ):
        _add_options(modes.add_parser(mode, help=text, description=text, epilog=EPILOG), mode)
    _add_compare(modes)


PRODUCING = ("produce", "e2e")  # the modes that produce records (with a tool-made payload)


def _add_options(p: argparse.ArgumentParser, mode: str) -> None:
    """The options of one mode: only those that mean something there."""
    def option(modes: tuple[str, ...], *names: str, **kwargs: Any) -> None:
        if mode in modes:
            p.add_argument(*names, **kwargs)

    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"the broker to measure (default {DEFAULT_BOOTSTRAP}, as the other tools)")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True, metavar="N")
    option(PRODUCING, "--record-size", type=int, default=1024, metavar="S",
           help="value size in bytes (default 1024)")
    option(PRODUCING, "--acks", choices=ACKS, default="1")
    option(PRODUCING, "--compression", choices=COMPRESSION_TYPES, default="none")
    option(("produce",), "--producers", type=int, default=1, metavar="P",
           help="producer processes (default 1)")
    option(("consume",), "--consumers", type=int, default=1, metavar="C",
           help="consumer processes (default 1; at most one per partition)")
    option(PRODUCING, "--throughput", type=float, default=-1.0, metavar="R",
           help="records/s over all producers; <= 0 is unthrottled" if mode == "produce"
           else "records/s (default 10000)")
    option(PRODUCING, "--linger-ms", type=float, default=None, metavar="L",
           help=f"librdkafka linger.ms (default {DEFAULT_LINGER_MS[mode]:g})")
    option(PRODUCING, "--batch-size", type=int, default=1_000_000, metavar="B",
           help="librdkafka batch.size in bytes (default 1000000)")
    if mode in PRODUCING:
        payload = p.add_mutually_exclusive_group()
        payload.add_argument("--payload-file", metavar="F", help="payloads, one per line")
        payload.add_argument("--random-pool", type=int, default=1000, metavar="K",
                             help="distinct random payloads to cycle through (default 1000)")
    option(PRODUCING, "--partitions", type=int, default=0, metavar="N",
           help="create the topic with N partitions if it is missing")
    option(PRODUCING, "--replication-factor", type=int, default=1, metavar="RF",
           help="replication factor of a topic --partitions creates (default 1)")
    option(("produce",), "--latency-sample-every", type=int, default=0, metavar="K",
           help="sample the latency of every K-th record (default: auto)")
    p.add_argument("--reporting-interval", type=float, default=1.0, metavar="SECONDS",
                   help="seconds between progress lines (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="give up after this long (default 600)")
    option(("consume", "e2e"), "--idle-timeout", type=float, default=10.0, metavar="SECONDS",
           help="the consumer stops after this long without records (default 10)")
    p.add_argument("-X", dest="client_config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka property (repeatable)")
    option(("produce",), "--transactional", action="store_true",
           help="produce in transactions (a transactional id per producer process; "
                "acks=all, idempotent); the summary adds the EndTxn round trip")
    option(("produce",), "--records-per-transaction", type=int, default=1000, metavar="N",
           help="records per transaction with --transactional (default 1000)")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run N times; the summary and the JSON give min/median/max of every figure")
    p.add_argument("--json", metavar="OUT",
                   help="also write the runs, their spread and their context as JSON to OUT "
                        "(what `kbroker perf compare` reads)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _add_compare(modes: Any) -> None:
    text = ("compare two `--json` files: per-figure ratios (new / baseline), the noise band, "
            "and exit status 1 when a throughput ratio is below 1 - threshold")
    p = modes.add_parser("compare", help=text, description=text)
    p.add_argument("baseline", metavar="BASELINE.json")
    p.add_argument("new", metavar="NEW.json")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, metavar="X",
                   help=f"a records/s or MB/s ratio below 1 - X is a regression (default "
                        f"{DEFAULT_THRESHOLD}: the noise of a shared 2-core machine, "
                        f"log-ratio stdev {NOISE_LOG_STDEV})")


def options_from_args(args: argparse.Namespace) -> PerfOptions:
    """The options of this mode; PerfOptions' defaults for those the mode has no flag for."""
    def given(name: str) -> Any:
        return getattr(args, name, DEFAULTS[name])

    linger = given("linger_ms")
    extra: dict[str, str] = {}
    for item in args.client_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"-X wants KEY=VALUE, got {item!r}")
        extra[key] = value
    if getattr(args, "repeats", 1) < 1:
        raise ValueError("--repeats must be at least 1")
    if args.reporting_interval <= 0:
        raise ValueError("--reporting-interval must be positive")
    return PerfOptions(
        bootstrap_server=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        record_size=given("record_size"), acks=given("acks"), compression=given("compression"),
        producers=given("producers"), consumers=given("consumers"),
        throughput=given("throughput"),
        linger_ms=linger if linger is not None else DEFAULT_LINGER_MS[args.perf_mode],
        batch_size=given("batch_size"), payload_file=given("payload_file"),
        random_pool=given("random_pool"), partitions=given("partitions"),
        replication_factor=given("replication_factor"),
        latency_sample_every=given("latency_sample_every"),
        report_interval_s=args.reporting_interval, timeout_s=args.timeout,
        idle_timeout_s=given("idle_timeout"), json_path=args.json, quiet=args.quiet,
        client_config=extra, transactional=given("transactional"),
        records_per_transaction=given("records_per_transaction"),
    )


DEFAULTS: dict[str, Any] = {
    **{f.name: f.default for f in fields(PerfOptions) if f.default is not MISSING},
    "linger_ms": None, "idle_timeout": PerfOptions.idle_timeout_s,
}


def run_mode(options: PerfOptions, mode: str) -> RunSummary:
    """Run one perf mode in this process (worker processes are spawned underneath)."""
    if mode == "produce":
        from kbroker.perf.produce import run_produce
        return run_produce(options)
    if mode == "consume":
        from kbroker.perf.consume import run_consume
        return run_consume(options)
    if mode == "e2e":
        from kbroker.perf.e2e import run_e2e
        return run_e2e(options)
    raise ValueError(f"unknown perf mode {mode!r}")


def run(args: argparse.Namespace) -> int:
    """Entry point for `kbroker perf ...`: progress lines, a summary per run and, with
    --repeats, the spread; 0 on success, 1 on errors or a regression (compare), 2 on
    bad usage, 130/143 when SIGINT/SIGTERM stopped the run (after a partial summary)."""
    if args.perf_mode == "compare":
        return run_compare(args)
    try:
        options = options_from_args(args)
    except ValueError as exc:
        print(f"kbroker perf: {exc}", file=sys.stderr)
        return 2
    runs: list[RunSummary] = []
    context = run_context(options, args.perf_mode, args.repeats)
    with stop_on_signals():
        try:
            from kbroker.perf import admin  # librdkafka: the tools extra (kbroker.cli NEEDS_CLIENT)
            admin.check_reachable(options.bootstrap_server)
            for repeat in range(args.repeats):
                summary = run_mode(options, args.perf_mode)
                runs.append(summary)
                prefix = f"run {repeat + 1}/{args.repeats}: " if args.repeats > 1 else ""
                print(prefix + summary.summary_line(), flush=True)
        except PerfStopped as stop:
            return _stopped(stop, options, args, runs, context)
        except (Exception, SystemExit) as exc:  # one line, not a traceback
            print(f"kbroker perf: {_error_text(exc)}", file=sys.stderr)
            return 1
    _finish(options, args, runs, context)
    return 0 if all(r.errors == 0 for r in runs) else 1


def _stopped(stop: PerfStopped, options: PerfOptions, args: argparse.Namespace,
             runs: list[RunSummary], context: dict[str, Any]) -> int:
    """After SIGINT/SIGTERM: the partial run's summary (if it had started), then the rest."""
    partial = stop.partial
    if partial is not None and partial["started"]:
        latency = None
        if partial["latency_count"]:
            latency = LatencySummary(partial["latency_count"], partial["latency_avg_ms"],
                                     partial["latency_max_ms"])
        summary = RunSummary(args.perf_mode, partial["records"], partial["bytes"],
                             partial["elapsed_s"], latency, partial=True,
                             extra={"stopped_by": stop.signal_name})
        runs.append(summary)
        print(summary.summary_line(), flush=True)
    else:
        print(f"kbroker perf: stopped by {stop.signal_name} before the run started",
              file=sys.stderr)
    if runs:
        _finish(options, args, runs, context)
    return 128 + signal.Signals[stop.signal_name].value


def _finish(options: PerfOptions, args: argparse.Namespace, runs: list[RunSummary],
            context: dict[str, Any]) -> None:
    """The spread over repeats (when more than one run) and the JSON document. A partial
    run stays out of the spread unless it is the only one."""
    results = [r.to_json() for r in runs]
    complete = [r for r in results if not r["partial"]] or results
    figures = spread(complete)
    if len(complete) > 1:
        print(f"over {len(complete)} runs (min / median / max):")
        for name, values in figures.items():
            print(f"  {name:24} {format_figure(values['min'])} / {format_figure(values['median'])} / "
                  f"{format_figure(values['max'])}")
    if options.json_path:
        median_run = _median_run(complete)
        document = {"tool": "kbroker-perf", "mode": args.perf_mode,
                    "context": {**context, "load_average_after": load_average()},
                    "options": asdict(options), "runs": results, "figures": figures,
                    "result": median_run, "partial": any(r.partial for r in runs)}
        with open(options.json_path, "w") as f:
            json.dump(document, f, indent=2)


def _median_run(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose records/s is the median (the lower middle one of an even count)."""
    ordered = sorted(results, key=lambda r: r["records_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def run_compare(args: argparse.Namespace) -> int:
    """`kbroker perf compare BASELINE.json NEW.json`: 0 no regression, 1 regression, 2 unusable."""
    try:
        baseline, new = compare.load(args.baseline), compare.load(args.new)
        rows = compare.compare(baseline, new, args.threshold)
    except compare.CompareError as exc:
        print(f"kbroker perf compare: {exc}", file=sys.stderr)
        return 2
    for name, document in (("baseline", baseline), ("new", new)):
        context = document.get("context", {})
        partial = " (PARTIAL: stopped early)" if document.get("partial") else ""
        print(f"{name:8} {getattr(args, name)}: {document['mode']}, "
              f"{len(document.get('runs', []))} run(s){partial}, kbroker "
              f"{context.get('kbroker_version')} {context.get('kbroker_commit') or ''}, "
              f"{context.get('time')}")
    print(f"\n{'figure':24} {'baseline':>14} {'new':>14} {'new/base':>9}  noise band")
    for row in rows:
        band = f"{row.band[0]:.3f}..{row.band[1]:.3f}" if row.band else "-"
        verdict = "  REGRESSION" if row.regression else ""
        print(f"{row.name:24} {format_figure(row.baseline):>14} {format_figure(row.new):>14} "
              f"{format_figure(row.ratio, 3):>9}  {band}{verdict}")
    print(f"\nthreshold {args.threshold}: a records/s or MB/s ratio below {1 - args.threshold:.3f} "
          f"is a regression (the same broker against itself on a shared machine: log-ratio "
          f"stdev {NOISE_LOG_STDEV})")
    failed = [row for row in rows if row.regression]
    if failed:
        print("REGRESSION: " + ", ".join(f"{r.name} {r.ratio:.3f}" for r in failed),
              file=sys.stderr)
        return 1
    return 0


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return str(exc.code)
    from kbroker.tools.common import error_text
    return error_text(exc)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kbroker.perf",
                                     description="kbroker's performance tool")
    sub = parser.add_subparsers(dest="command", required=True)
    add_subparser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kbroker.perf produce ...` (the `perf` word is optional)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] != "perf":
        arguments.insert(0, "perf")
    args = build_parser().parse_args(arguments)
    return int(args.func(args))
