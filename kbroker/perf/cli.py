"""The `kbroker perf produce|consume|e2e` command line.

The `kbroker` CLI wires this in with either::

    perf_cli.add_subparser(subparsers)     # adds `perf` and its three modes; then run(args)
    SUBCOMMANDS["perf"] = (perf_cli.HELP, perf_cli.configure_parser, perf_cli.run)

and `python -m kbroker.perf ...` runs it standalone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kbroker.perf.options import ACKS, COMPRESSION_TYPES, PerfOptions
from kbroker.perf.stats import RunSummary
from kbroker.tools.common import DEFAULT_BOOTSTRAP

MODES = ("produce", "consume", "e2e")
DEFAULT_LINGER_MS = {"produce": 5.0, "consume": 5.0, "e2e": 0.0}


HELP = "measure a Kafka-compatible broker's throughput and latency"


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `perf` (with `produce`, `consume`, `e2e` under it) to an argparse subparsers object."""
    perf = subparsers.add_parser("perf", help=HELP, description=HELP)
    configure_parser(perf)
    return perf


def configure_parser(perf: argparse.ArgumentParser) -> None:
    """Give an existing `perf` parser its three modes and their options; `func` is `run`."""
    perf.set_defaults(func=run)
    modes = perf.add_subparsers(dest="perf_mode", metavar="MODE", required=True)
    for mode, text in (
        ("produce", "produce records as fast as possible (or at --throughput)"),
        ("consume", "consume records from the beginning of every partition"),
        ("e2e", "produce-to-consume latency at a fixed rate (--throughput, default 10000/s)"),
    ):
        _add_options(modes.add_parser(mode, help=text, description=text))


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"the broker to measure (default {DEFAULT_BOOTSTRAP}, as the other tools)")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True, metavar="N")
    p.add_argument("--record-size", type=int, default=1024, metavar="S",
                   help="value size in bytes (default 1024)")
    p.add_argument("--acks", choices=ACKS, default="1")
    p.add_argument("--compression", choices=COMPRESSION_TYPES, default="none")
    p.add_argument("--producers", type=int, default=1, metavar="P",
                   help="producer processes (default 1)")
    p.add_argument("--consumers", type=int, default=1, metavar="C",
                   help="consumer processes for `consume` (default 1; at most one per partition)")
    p.add_argument("--throughput", type=float, default=-1.0, metavar="R",
                   help="records/s over all producers; <= 0 is unthrottled (e2e: 10000)")
    p.add_argument("--linger-ms", type=float, default=None, metavar="L",
                   help="librdkafka linger.ms (default 5; 0 for e2e)")
    p.add_argument("--batch-size", type=int, default=1_000_000, metavar="B",
                   help="librdkafka batch.size in bytes (default 1000000)")
    payload = p.add_mutually_exclusive_group()
    payload.add_argument("--payload-file", metavar="F", help="payloads, one per line")
    payload.add_argument("--random-pool", type=int, default=1000, metavar="K",
                         help="distinct random payloads to cycle through (default 1000)")
    p.add_argument("--partitions", type=int, default=0, metavar="N",
                   help="create the topic with N partitions if it is missing")
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--latency-sample-every", type=int, default=0, metavar="K",
                   help="sample the latency of every K-th record (default: auto)")
    p.add_argument("--reporting-interval", type=float, default=5.0, metavar="SECONDS")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="give up after this long (default 600)")
    p.add_argument("--idle-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="consumers stop after this long without records (default 10)")
    p.add_argument("-X", dest="client_config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka property (repeatable)")
    p.add_argument("--transactional", action="store_true",
                   help="produce in transactions (a transactional id per producer process; "
                        "acks=all, idempotent); the summary adds the EndTxn round trip")
    p.add_argument("--records-per-transaction", type=int, default=1000, metavar="N",
                   help="records per transaction with --transactional (default 1000)")
    p.add_argument("--json", metavar="OUT", help="also write the summary as JSON to OUT")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def options_from_args(args: argparse.Namespace) -> PerfOptions:
    linger = args.linger_ms if args.linger_ms is not None else DEFAULT_LINGER_MS[args.perf_mode]
    extra: dict[str, str] = {}
    for item in args.client_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"-X wants KEY=VALUE, got {item!r}")
        extra[key] = value
    return PerfOptions(
        bootstrap_server=args.bootstrap_server, topic=args.topic, num_records=args.num_records,
        record_size=args.record_size, acks=args.acks, compression=args.compression,
        producers=args.producers, consumers=args.consumers, throughput=args.throughput,
        linger_ms=linger, batch_size=args.batch_size, payload_file=args.payload_file,
        random_pool=args.random_pool, partitions=args.partitions,
        replication_factor=args.replication_factor,
        latency_sample_every=args.latency_sample_every,
        report_interval_s=args.reporting_interval, timeout_s=args.timeout,
        idle_timeout_s=args.idle_timeout, json_path=args.json, quiet=args.quiet,
        client_config=extra, transactional=args.transactional,
        records_per_transaction=args.records_per_transaction,
    )


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
    """Entry point for `kbroker perf ...`: print progress and a summary; 0 on success."""
    try:
        options = options_from_args(args)
    except ValueError as exc:
        print(f"kbroker perf: {exc}", file=sys.stderr)
        return 2
    summary = run_mode(options, args.perf_mode)
    print(summary.summary_line(), flush=True)
    if options.json_path:
        document = {"tool": "kbroker-perf", "mode": args.perf_mode,
                    "options": _options_json(options), "result": summary.to_json()}
        with open(options.json_path, "w") as f:
            json.dump(document, f, indent=2)
    return 0 if summary.errors == 0 else 1


def _options_json(options: PerfOptions) -> dict[str, Any]:
    from dataclasses import asdict
    return asdict(options)


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
