"""Argument parsing of `kbroker perf` and the splitting of work between processes."""

from __future__ import annotations

import argparse
import json

import pytest

from kbroker import cli as kbroker_cli
from kbroker.perf.cli import (
    HELP,
    add_subparser,
    build_parser,
    configure_parser,
    options_from_args,
    run,
)
from kbroker.perf.consume import plan_consumers
from kbroker.perf.options import PerfOptions
from kbroker.perf.payload import file_pool, random_pool
from kbroker.perf.produce import _groups, split

BASE = ["--bootstrap-server", "127.0.0.1:9092", "--topic", "t", "--num-records", "100"]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["perf", *argv])


def test_produce_defaults() -> None:
    options = options_from_args(parse("produce", *BASE))
    assert options.bootstrap_server == "127.0.0.1:9092"
    assert options.num_records == 100
    assert options.record_size == 1024
    assert options.acks == "1"
    assert options.compression == "none"
    assert options.producers == 1
    assert options.linger_ms == 5.0
    assert options.throughput == -1.0
    assert options.partitions == 0


def test_all_options() -> None:
    args = parse("produce", *BASE, "--record-size", "100", "--acks", "all", "--compression",
                 "lz4", "--producers", "3", "--throughput", "5000", "--linger-ms", "20",
                 "--batch-size", "65536", "--random-pool", "7", "--partitions", "64",
                 "--json", "out.json", "-X", "socket.nagle.disable=true")
    options = options_from_args(args)
    assert (options.record_size, options.acks, options.compression) == (100, "all", "lz4")
    assert (options.producers, options.throughput, options.linger_ms) == (3, 5000.0, 20.0)
    assert (options.batch_size, options.random_pool, options.partitions) == (65536, 7, 64)
    assert options.json_path == "out.json"
    assert options.client_config == {"socket.nagle.disable": "true"}


def test_transactional_options() -> None:
    options = options_from_args(parse("produce", *BASE, "--transactional", "--records-per-transaction", "50"))
    assert options.transactional and options.records_per_transaction == 50
    assert not options_from_args(parse("produce", *BASE)).transactional
    with pytest.raises(ValueError):
        options_from_args(parse("produce", *BASE, "--records-per-transaction", "0"))


@pytest.mark.parametrize("argv", [["perf", "produce", "--topic", "t", "--num-records", "1"],
                                  ["topics", "list"], ["groups", "list"], ["cluster", "status"],
                                  ["transactions", "list"]])
def test_every_tool_defaults_to_the_local_broker(argv: list[str]) -> None:
    args = kbroker_cli.build_parser().parse_args(argv)
    assert args.bootstrap_server == "127.0.0.1:9092"


def test_e2e_defaults_to_no_linger() -> None:
    assert options_from_args(parse("e2e", *BASE)).linger_ms == 0.0


@pytest.mark.parametrize("argv", [
    ["produce", *BASE, "--acks", "2"],
    ["produce", *BASE, "--compression", "brotli"],
    ["produce", *BASE, "--payload-file", "f", "--random-pool", "3"],
    ["produce", "--bootstrap-server", "127.0.0.1:9092", "--num-records", "1"],
    ["fly", *BASE],
])
def test_bad_arguments_exit(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)


def test_invalid_values_are_rejected_by_options() -> None:
    with pytest.raises(ValueError):
        options_from_args(parse("produce", *BASE, "--producers", "0"))
    with pytest.raises(ValueError):
        options_from_args(parse("produce", *BASE, "-X", "novalue"))


def test_add_subparser_wires_into_a_parent_cli() -> None:
    parser = argparse.ArgumentParser(prog="kbroker")
    add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "consume", *BASE])
    assert args.command == "perf" and args.perf_mode == "consume"
    assert callable(args.func)


def test_configure_parser_fits_a_registry_of_parsers() -> None:
    parser = argparse.ArgumentParser(prog="kbroker")
    sub = parser.add_subparsers(dest="command")
    configure_parser(sub.add_parser("perf", help=HELP))
    args = parser.parse_args(["perf", "e2e", *BASE, "--throughput", "100"])
    assert args.perf_mode == "e2e" and args.throughput == 100.0
    assert args.func is run


def test_sample_every() -> None:
    options = PerfOptions(bootstrap_server="h:1", topic="t", num_records=1)
    assert options.sample_every() == 32
    assert PerfOptions("h:1", "t", 1, throughput=10_000).sample_every() == 1
    assert PerfOptions("h:1", "t", 1, latency_sample_every=5).sample_every() == 5


def test_split_is_even_and_complete() -> None:
    assert split(10, 3) == [4, 3, 3]
    assert sum(split(1_000_001, 7)) == 1_000_001


def test_groups_cover_the_pool_in_sample_sized_groups() -> None:
    pool = [b"a", b"bb", b"ccc"]
    groups = _groups(pool, 2)
    assert groups == [(b"a", [b"bb"], 3), (b"ccc", [b"a"], 4)]


def test_plan_consumers_deals_partitions_round_robin() -> None:
    options = PerfOptions("h:1", "t", num_records=150, consumers=2)
    tasks = plan_consumers(options, [2, 0, 1])
    assert [t.partitions for t in tasks] == [[0, 2], [1]]


def test_plan_consumers_at_most_one_per_partition() -> None:
    options = PerfOptions("h:1", "t", num_records=50, consumers=4)
    tasks = plan_consumers(options, [0])
    assert len(tasks) == 1 and tasks[0].partitions == [0]


def test_random_pool_values_are_distinct() -> None:
    pool = random_pool(100, 50)
    assert len(pool) == 50 and all(len(v) == 100 for v in pool)
    assert len(set(pool)) == 50


def test_payload_file_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "payloads.txt"
    path.write_bytes(b"one\n\ntwo\r\nthree")
    assert file_pool(str(path)) == [b"one", b"two", b"three"]


def _help(mode: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    perf = sub.choices["perf"]
    modes = next(a for a in perf._actions if isinstance(a, argparse._SubParsersAction))
    return modes.choices[mode].format_help()


def test_each_mode_lists_only_the_options_it_uses() -> None:
    assert "--consumers" not in _help("produce") and "--consumers" in _help("consume")
    assert "--producers" in _help("produce") and "--producers" not in _help("consume")
    assert "--consumers" not in _help("e2e") and "--transactional" not in _help("e2e")
    assert "--acks" not in _help("consume") and "--idle-timeout" not in _help("produce")
    for mode in ("produce", "consume", "e2e"):
        assert "--repeats" in _help(mode) and "--json" in _help(mode)
    with pytest.raises(SystemExit):
        parse("produce", *BASE, "--consumers", "2")


def test_a_mode_without_a_flag_gets_the_default() -> None:
    options = options_from_args(parse("consume", *BASE, "--consumers", "3"))
    assert options.consumers == 3 and options.producers == 1 and options.acks == "1"
    assert options_from_args(parse("produce", *BASE)).idle_timeout_s == 10.0
    assert options.report_interval_s == 1.0


@pytest.mark.parametrize("bad", [["--repeats", "0"], ["--reporting-interval", "0"]])
def test_repeats_and_interval_must_be_positive(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        options_from_args(parse("produce", *BASE, *bad))


def test_compare_arguments() -> None:
    args = parse("compare", "a.json", "b.json", "--threshold", "0.1")
    assert (args.baseline, args.new, args.threshold) == ("a.json", "b.json", 0.1)
    assert parse("compare", "a.json", "b.json").threshold == 0.30


def test_a_partial_run_stays_out_of_the_spread(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from kbroker.perf.cli import _finish
    from kbroker.perf.context import run_context
    from kbroker.perf.stats import RunSummary

    out = tmp_path / "runs.json"
    args = parse("produce", *BASE, "--repeats", "3", "--json", str(out))
    options = options_from_args(args)
    runs = [RunSummary("produce", 100, 100, 1.0, None), RunSummary("produce", 300, 300, 1.0, None),
            RunSummary("produce", 5, 5, 1.0, None, partial=True, extra={"stopped_by": "SIGINT"})]
    _finish(options, args, runs, run_context(options, "produce", 3))
    document = json.loads(out.read_text())
    assert document["partial"] and len(document["runs"]) == 3
    assert document["figures"]["records_per_s"]["values"] == [100.0, 300.0]
    assert document["result"]["records"] == 100
    assert "over 2 runs (min / median / max):" in capsys.readouterr().out
