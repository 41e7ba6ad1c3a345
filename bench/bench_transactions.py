"""Transactional against idempotent produce throughput, and the EndTxn round trip.

Issue 14's goal: a transactional producer writing 1000 records per transaction within
15% of the idempotent producer's throughput, with the EndTxn round trip p99 reported.
Each repeat starts a fresh broker (a new process on a free port, new data dir) and runs,
on it, one after the other (which goes first alternates between repeats):

    idempotent     kbroker perf produce --acks all -X enable.idempotence=true
    transactional  kbroker perf produce --transactional --records-per-transaction N

with the same records (1 KiB by default), producer processes, partitions and linger,
and the broker's CPU time (user + system) per 1000 records of each, and the clients'
(the producer processes', from getrusage of the reaped children).
The transactional producer waits for its records' acknowledgements before each commit,
so commit_transaction's duration is the EndTxn round trip (kbroker/perf/produce.py).

    python bench/bench_transactions.py                       # 500k records, 3 repeats
    python bench/bench_transactions.py --records 1000000 --records-per-transaction 100
    python bench/bench_transactions.py --same-session         # the broker in this session
    python bench/bench_transactions.py --peer tansu           # and Tansu, repeat by repeat
    python bench/bench_transactions.py --peer null            # and the floor (below)

`--peer null` runs bench/floor/null_broker.py beside kbroker: a broker that answers every
request at once with success and stores nothing. What the same producers reach against
it, and their ratio, is the floor the client sets by itself (librdkafka's serial chain per
transaction and the clients' CPU on this machine), whatever a broker does.

A transactional producer waits for each commit, so its throughput follows the client-
broker round trip; the idempotent producer keeps its pipeline full and does not. On a
machine whose kernel groups scheduling by session (sched_autogroup) and that is busy
with other work, a broker in a session of its own (as the other benchmarks start it)
answers every round trip later: --same-session shows the difference.

Results go to bench/results/transactions.json: every run, the medians, and the ratio
transactional / idempotent of the median records/s.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import BrokerSpec, RunningBroker, resolve_spec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "transactions.json"
GOAL = 0.85
TXN_PRODUCERS = Path(__file__).resolve().parent / "txn_producers.py"
CLIENTS = ("librdkafka", "kafka-python", "aiokafka")


def perf(broker: RunningBroker, args: argparse.Namespace, mode: str, out: Path) -> dict[str, Any]:
    topic = f"bench-{mode}"
    cpu_before = broker.cpu_seconds()
    client_before = _children_cpu_s()
    if args.client == "librdkafka":
        extra = (["--transactional", "--records-per-transaction", str(args.records_per_transaction)]
                 if mode == "transactional" else ["-X", "enable.idempotence=true"])
        command = [sys.executable, "-m", "kbroker.perf", "produce", "--num-records", str(args.records),
                   "--acks", "all", "--quiet", "--timeout", "600", *extra]
    else:
        command = [sys.executable, str(TXN_PRODUCERS), "--client", args.client, "--mode", mode,
                   "--records", str(args.records), "--records-per-transaction", str(args.records_per_transaction)]
    done = subprocess.run(
        [*command, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partitions", str(args.partitions),
         "--record-size", str(args.record_size), "--producers", str(args.producers),
         "--linger-ms", str(args.linger_ms), "--json", str(out)],
        capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{args.client} producers ({mode}) failed:\n{done.stdout}\n{done.stderr}")
    broker_cpu_s = broker.cpu_seconds() - cpu_before
    client_cpu_s = _children_cpu_s() - client_before
    if args.client == "librdkafka":
        perf_doc = json.loads(out.read_text())["result"]
        result = {"records": perf_doc["records"], "errors": perf_doc["errors"],
                  "records_per_s": perf_doc["records_per_s"], "mb_per_s": perf_doc["mb_per_s"],
                  "produce_p99_ms": perf_doc["latency"]["percentiles_ms"]["p99"],
                  "end_txn_latency": perf_doc["extra"].get("end_txn_latency")}
        if result["end_txn_latency"]:
            result["end_txn_latency"] = {**result["end_txn_latency"],
                                         "transactions": perf_doc["extra"]["transactions"]}
    else:
        result = {"errors": 0, **json.loads(out.read_text())}
    row = {"records": result["records"], "errors": result["errors"],
           "broker_cpu_ms_per_1000": broker_cpu_s * 1e6 / max(result["records"], 1),
           "client_cpu_ms_per_1000": client_cpu_s * 1e6 / max(result["records"], 1),
           "records_per_s": result["records_per_s"], "mb_per_s": result["mb_per_s"]}
    if "produce_p99_ms" in result:
        row["produce_p99_ms"] = result["produce_p99_ms"]
    end_txn = result.get("end_txn_latency")
    if end_txn:
        row.update(transactions=end_txn.get("transactions", 0), end_txn_avg_ms=end_txn["avg_ms"],
                   end_txn_p50_ms=end_txn["percentiles_ms"]["p50"],
                   end_txn_p99_ms=end_txn["percentiles_ms"]["p99"], end_txn_max_ms=end_txn["max_ms"])
    return row


def _children_cpu_s() -> float:
    """User + system CPU of the reaped producer processes (kbroker perf and the processes
    it spawns): what the clients spent, beside the broker's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_repeat(spec: Any, args: argparse.Namespace, tmp: Path, repeat: int,
               runs: dict[str, list[dict[str, Any]]]) -> None:
    """Both modes on one fresh broker of `spec`; which goes first alternates by repeat."""
    broker = RunningBroker(spec, tmp, partitions=args.partitions, own_session=not args.same_session)
    try:
        broker.wait_ready()
        order = ["idempotent", "transactional"]
        for mode in order if repeat % 2 == 0 else order[::-1]:
            runs[mode].append(perf(broker, args, mode, tmp / f"{spec.name}-{mode}-{repeat}.json"))
    finally:
        broker.stop()


def summarize(spec: BrokerSpec, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per mode, printed, and the ratio transactional / idempotent of records/s."""
    median = {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], float)}
              for mode, rs in runs.items()}
    ratio = median["transactional"]["records_per_s"] / median["idempotent"]["records_per_s"]
    print(spec.name + (f" ({spec.about})" if spec.about else ""))
    for mode, row in median.items():
        print(f"  {mode:14} {row['records_per_s']:>12,.0f} records/s {row['mb_per_s']:8.2f} MB/s "
              f"CPU per 1000 records: broker {row['broker_cpu_ms_per_1000']:.2f} ms, "
              f"clients {row['client_cpu_ms_per_1000']:.2f} ms; "
              + (f"produce p99 {row['produce_p99_ms']:.2f} ms" if "produce_p99_ms" in row else "")
              + (f", EndTxn p50 {row['end_txn_p50_ms']:.2f} ms p99 {row['end_txn_p99_ms']:.2f} ms"
                 if "end_txn_p99_ms" in row else ""))
    print(f"  transactional / idempotent throughput: {ratio:.3f} "
          + ("(the floor's: the goal is for a broker)" if spec.about else f"(goal >= {GOAL})"))
    return {"broker": spec.name, **({"about": spec.about} if spec.about else {}),
            "runs": runs, "median": median, "ratio": ratio}


def compare(first: dict[str, Any], peer: dict[str, Any]) -> dict[str, float]:
    """The first broker's records/s of each mode and ratio as a fraction of the peer's."""
    shares = {f"{mode} records/s": first["median"][mode]["records_per_s"]
              / peer["median"][mode]["records_per_s"] for mode in ("idempotent", "transactional")}
    shares["ratio"] = first["ratio"] / peer["ratio"]
    print(f"{first['broker']} / {peer['broker']}: "
          + ", ".join(f"{key} {value:.3f}" for key, value in shares.items()))
    return shares


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--broker", default="kbroker", help="kbroker, kbroker-ref:<ref> or another spec")
    ap.add_argument("--peer", default=None, metavar="SPEC",
                    help="also run a peer broker (e.g. tansu), repeat by repeat with --broker")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--records-per-transaction", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--linger-ms", type=int, default=5, help="both producers' linger.ms")
    ap.add_argument("--client", choices=CLIENTS, default="librdkafka",
                    help="the producers' client: librdkafka (kbroker perf produce, the default) or a "
                         "pure-Python one (bench/txn_producers.py)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--same-session", action="store_true",
                    help="start the broker in this session (see the module docstring)")
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    specs = [resolve_spec(args.broker)] + ([resolve_spec(args.peer)] if args.peer else [])
    runs: list[dict[str, list[dict[str, Any]]]] = [{"idempotent": [], "transactional": []} for _ in specs]
    try:
        for spec in specs:
            if spec.prepare:
                spec.prepare()
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-txn-") as tmp:
            for repeat in range(args.repeats):
                for spec, spec_runs in zip(specs, runs, strict=True):
                    one_repeat(spec, args, Path(tmp), repeat, spec_runs)
    finally:
        for spec in specs:
            if spec.cleanup:
                spec.cleanup()
    results = [summarize(spec, spec_runs) for spec, spec_runs in zip(specs, runs, strict=True)]
    doc = {**results[0], "options": {k: v for k, v in vars(args).items() if k != "json"}, "goal": GOAL}
    if len(results) > 1:
        doc["peer"] = results[1]
        doc["against_peer"] = compare(results[0], results[1])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2, default=str))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
