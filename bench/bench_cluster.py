"""Cluster mode side by side (issue 13): throughput and broker CPU, failover, acks=all latency.

    python bench/bench_cluster.py                             # the three sections, 3 repeats
    python bench/bench_cluster.py --sections latency --repeats 5
    python bench/bench_cluster.py --sections failover --failover-repeats 9
    python bench/bench_cluster.py --sections latency --repeats 1 --profile DIR
    python bench/bench_cluster.py --sections follower --repeats 4 --follower-compare 3eb551c

One ZooKeeper (Debian's) serves the whole run; each cluster runs in a chroot of its own,
every broker is a fresh `python -m kbroker serve` process with a fresh data dir, and the
single broker is plain kbroker (no ZooKeeper). Workloads are `kbroker perf produce`
(librdkafka producers in processes), 1 KiB records.

throughput  Four cells per repeat, each on fresh brokers, in an order that rotates: a
            3-broker cluster takes --records records on a topic of --partitions
            partitions (leaders spread over the brokers) with RF=3 and acks=all; another
            the same with RF=1 and acks=1; a single broker and a 2-broker cluster the
            same RF=1 acks=1 load. Broker CPU is utime+stime
            from /proc/PID/stat of every broker process before and after, summed:
            core-seconds per GB produced (GB = 2^30 bytes of record values, replicas not
            counted) and cores busy (CPU seconds / elapsed seconds).
failover    A 3-broker cluster with zookeeper.session.timeout.ms = --session-timeout-ms.
            --failover-repeats times each: SIGKILL, then SIGTERM (a controlled shutdown),
            of the leader of a fresh topic while an idempotent acks=all producer sends
            --failover-rate records/s to it, once with each of --failover-clients
            (librdkafka, kafka-python: bench/cluster_failover.py says what is timed and how
            the two clients learn the new leader);
            the broker is restarted and back in the ISR before the next probe.
latency     Each repeat, for each --linger-ms value (5, the producer's default, then 0): a
            single broker, then a 3-broker cluster, each taking `perf produce` at --rate
            records/s with acks=all (RF=3 on the cluster, and RF=3 acks=1 beside it) over
            --latency-partitions partitions, every record's delivery latency sampled.
            linger.ms 5 is what librdkafka (and Kafka 4's Java producer, KIP-1030) uses
            when not told otherwise; with linger.ms 0 every record goes out as soon as
            one of the connection's 5 in-flight slots is free, so the request rate
            follows the round trip. --profile DIR: py-spy samples every broker process of each
            latency cell, and of each follower cell (raw collapsed stacks, DIR/<cell>-<repeat>-broker-<id>.txt; the
            samples of a broker waiting for a core count as busy on a loaded machine).
follower    (not run by default) The followers' CPU per replicated GB, this tree's
            kbroker against --follower-compare's (a git ref, built into a temporary
            worktree, or a built checkout's path): each repeat runs, for each tree, an
            acks=all and an acks=1 cell of --follower-records records on a fresh 3-broker
            cluster whose topic (--partitions partitions, RF=3) is led by broker 1 alone,
            the trees and the acks in ABBA order (old then new, new then old). Each
            follower's CPU-s per GB it copied, raw and net of its idle rate (measured
            over --follower-idle-s after the copy); the ratio new/old per acks, of the
            medians and of the runs paired by repeat (min, max: the spread), to
            bench/results/cluster.json as the others (--json).
            bench/cluster_follower.py says what is measured and how.

Targets (issue 13): produce resumes after a leader's SIGKILL within the session timeout
+ 1 s; a controlled shutdown moves leadership in under 1 s; the acks=all RF=3 p99 is
under 2x the single broker's p99 at the same rate and producer settings (each linger.ms
is reported; the target line is the producer's default). Medians over repeats go to stdout,
everything to bench/results/cluster.json (--json). The machine is shared: compare
figures of one run with each other, not with another run's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))

import brokers  # noqa: E402
import cluster_failover  # noqa: E402
import cluster_follower  # noqa: E402
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kbroker.cluster.local_cluster import Cluster  # noqa: E402
from kbroker.cluster.zookeeper_server import ZooKeeperServer  # noqa: E402
from kbroker.perf import admin  # noqa: E402
from kbroker.perf.cli import run_mode  # noqa: E402
from kbroker.perf.options import PerfOptions  # noqa: E402

RESULTS = BENCH_DIR / "results" / "cluster.json"
GB = 1024**3
SECTIONS = ("throughput", "failover", "latency", "follower")
DEFAULT_SECTIONS = SECTIONS[:3]
RECORD_SIZE = 1024
OFFSETS_TOPIC = "__consumer_offsets"
LATENCY_SINGLE, LATENCY_RF3 = "single/acks-all", "cluster-3/rf3-acks-all"
DEFAULT_LINGER_MS = 5.0  # librdkafka's linger.ms default, and the Java producer's since Kafka 4.0


def latency_cell(cell: str, linger_ms: float) -> str:
    """A latency cell's name: `single/acks-all` at the producer's default linger.ms,
    `single/acks-all/linger-0` at another."""
    return cell if linger_ms == DEFAULT_LINGER_MS else f"{cell}/linger-{linger_ms:g}"


class Target:
    """What the benchmark runs against: a cluster or a single broker, and its broker PIDs."""

    def __init__(self, name: str, bootstrap: str, pids: Callable[[], dict[int, int]],
                 cluster: Cluster | None = None) -> None:
        self.name, self.bootstrap, self.pids, self.cluster = name, bootstrap, pids, cluster


@contextmanager
def single_broker(work: Path) -> Iterator[Target]:
    broker = brokers.RunningBroker(brokers.kbroker_spec(), work)
    try:
        broker.wait_ready()
        yield Target("single", broker.bootstrap, lambda: {1: broker.pid})
    finally:
        broker.stop()


@contextmanager
def local_cluster(zookeeper: ZooKeeperServer, work: Path, count: int,
                  overrides: dict[str, str] | None = None,
                  tree: cluster_follower.BrokerTree | None = None) -> Iterator[Target]:
    """`tree`: the brokers run that tree's kbroker (default: this one)."""
    chroot = f"/bench-{uuid.uuid4().hex[:8]}"
    cluster = Cluster(count, work / chroot.strip("/"), overrides, zookeeper=zookeeper, chroot=chroot)
    with cluster_follower.running_from(tree):
        cluster.start()
    try:
        yield Target(f"cluster-{count}", cluster.bootstrap_servers,
                     lambda: {i: b.pid for i, b in cluster.brokers.items() if b.pid is not None},
                     cluster)
    finally:
        cluster.stop()
        for broker in cluster.brokers.values():  # the data (GBs), not the broker.log files
            shutil.rmtree(broker.log_dir, ignore_errors=True)


def create_topic(target: Target, topic: str, partitions: int, rf: int,
                 assignment: list[list[int]] | None = None) -> None:
    """Create `topic` (with that replica assignment, when given) and wait until every
    broker's Metadata shows every partition with a leader and a full ISR, so that no
    produce run waits for an election or a broker that has not heard of the topic yet."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    new = (NewTopic(topic, len(assignment), replica_assignment=assignment) if assignment
           else NewTopic(topic, partitions, rf))
    for f in admin.create_topics([new], operation_timeout=30).values():
        f.result(timeout=60)
    wait_ready_everywhere(target, topic, partitions)


def wait_ready_everywhere(target: Target, topic: str, partitions: int | None = None) -> None:
    def ready() -> bool:
        return all(cluster_failover.topic_ready_at(host, int(port), topic, partitions)
                   for host, port in (b.rsplit(":", 1) for b in target.bootstrap.split(",")))
    cluster_failover.wait_for(ready, f"leaders and full ISRs of {topic} on {target.name}",
                              interval=0.1)


def warm_up(target: Target, topic: str, partitions: int) -> None:
    """Have the brokers create __consumer_offsets now (perf's watermark query asks for a
    group coordinator): its 50 partitions must not be created inside a measured run. Then
    one acks=all record to each partition of `topic`, acknowledged: every follower is
    fetching it. A new partition's ISR is full from the start, but a follower only joins
    its fetch session once the fetch it has parked at the leader returns (up to
    replica.fetch.wait.max.ms, 500 ms) and its OffsetForLeaderEpoch has been answered (a
    leader that has not yet handled its LeaderAndIsr answers UNKNOWN_TOPIC_OR_PARTITION,
    and the follower backs off replica.fetch.backoff.ms, 1 s), as Kafka's fetcher threads
    do; without this the first records of a measured run waited 0.4-0.7 s for that."""
    cluster_failover.wait_for(lambda: _watermarks_answered(target, topic),
                              f"watermarks of {topic} on {target.name}", interval=0.5)
    wait_ready_everywhere(target, OFFSETS_TOPIC)
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False})
    failed: list[str] = []
    for partition in range(partitions):
        producer.produce(topic, b"warm-up", partition=partition,
                         on_delivery=lambda err, _msg: err is not None and failed.append(str(err)))
    if producer.flush(60) or failed:
        raise RuntimeError(f"warm-up records to {topic} on {target.name} not acknowledged: {failed}")


def _watermarks_answered(target: Target, topic: str) -> bool:
    try:
        admin.watermarks(target.bootstrap, topic, [0], timeout_s=10)
    except KafkaException:
        return False
    return True


@contextmanager
def profiled(target: Target, out: Path | None, name: str) -> Iterator[None]:
    """py-spy on every broker process of `target` meanwhile (--profile), when `out` is set."""
    procs: list[subprocess.Popen[bytes]] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        procs = [subprocess.Popen(
            ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
             "--nonblocking", "--output", str(out / f"{name}-broker-{b}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for b, pid in target.pids().items()]
        time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def measured_produce(target: Target, options: PerfOptions) -> dict[str, Any]:
    """One `perf produce` run with the CPU each broker process spent meanwhile."""
    pids = target.pids()
    before = {b: brokers.tree_cpu_seconds(pid) for b, pid in pids.items()}
    client_before = client_cpu_seconds()
    summary = run_mode(options, "produce")
    cpu = {b: brokers.tree_cpu_seconds(pid) - before[b] for b, pid in pids.items()}
    client = client_cpu_seconds() - client_before
    result = summary.to_json()
    total = sum(cpu.values())
    elapsed = summary.elapsed_s or None
    result.update({
        "broker_cpu_s": {str(b): round(s, 3) for b, s in cpu.items()},
        "broker_cpu_total_s": total,
        "cpu_s_per_gb": total / (summary.bytes / GB) if summary.bytes else None,
        "cores_busy": total / elapsed if elapsed else None,
        "client_cpu_s": client,
        "client_cores": client / elapsed if elapsed else None,
        "incomplete": summary.records < options.num_records or summary.errors > 0,
    })
    return result


def client_cpu_seconds() -> float:
    """CPU time of this process and its reaped children: the perf tool's producer processes
    (brokers are children too, but none exits during a measured run)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def perf_options(target: Target, topic: str, args: argparse.Namespace, **kw: Any) -> PerfOptions:
    base: dict[str, Any] = {
        "bootstrap_server": target.bootstrap, "topic": topic, "num_records": args.records,
        "record_size": RECORD_SIZE, "producers": args.producers, "report_interval_s": 1e9,
        "timeout_s": args.phase_timeout, "quiet": True}
    base.update(kw)
    return PerfOptions(**base)


# ---------------------------------------------------------------- sections

THROUGHPUT_CELLS = (  # cell, brokers (0: the single broker), replication factor, acks
    ("cluster-3/rf3-acks-all", 3, 3, "all"), ("cluster-3/rf1-acks-1", 3, 1, "1"),
    ("single/rf1-acks-1", 0, 1, "1"), ("cluster-2/rf1-acks-1", 2, 1, "1"))


def throughput_repeat(zookeeper: ZooKeeperServer, work: Path, args: argparse.Namespace,
                      repeat: int) -> list[dict[str, Any]]:
    """Each cell on fresh brokers, in an order that rotates between repeats. Brokers that
    already took a cell run the next one slower: on this machine an RF=1 cell after an
    RF=3 one on the same cluster cost 2.5-2.8 CPU-s/GB instead of 0.8-0.9 (as it did after
    a plain 3 GB dd): the page cache the first one filled, not kbroker."""
    runs: list[dict[str, Any]] = []
    shift = repeat % len(THROUGHPUT_CELLS)
    for cell, count, rf, acks in THROUGHPUT_CELLS[shift:] + THROUGHPUT_CELLS[:shift]:
        with single_broker(work) if count == 0 else local_cluster(zookeeper, work, count) as target:
            runs.append(produce_cell(target, cell, repeat, rf, args.partitions, args, acks=acks))
    return runs


def produce_cell(target: Target, cell: str, repeat: int, rf: int, partitions: int,
                 args: argparse.Namespace, profile: Path | None = None, **perf: Any) -> dict[str, Any]:
    """One measured `perf produce` run on a fresh topic of `partitions` partitions, its
    brokers sampled by py-spy into `profile` when set."""
    topic = f"{cell.replace('/', '-')}-{repeat}"
    create_topic(target, topic, partitions, rf)
    warm_up(target, topic, partitions)
    options = perf_options(target, topic, args, partitions=partitions, replication_factor=rf, **perf)
    # Write back what earlier cells left dirty (GBs after an RF=3 cell): else its writeback,
    # and the fsyncs that wait for it, land in this cell's CPU and latency.
    os.sync()
    with profiled(target, profile, f"{cell.replace('/', '-')}-{repeat}"):
        result = measured_produce(target, options)
    pct = (result.get("latency") or {}).get("percentiles_ms", {})
    print(f"  {cell:34} {result['records_per_s']:>9,.0f} rec/s {result['mb_per_s']:6.1f} MB/s "
          f"{_f(result['cpu_s_per_gb'], '6.2f')} CPU-s/GB {_f(result['cores_busy'], '4.2f')} cores "
          f"(clients {_f(result['client_cores'], '4.2f')})  p50 {_f(pct.get('p50'), '7.2f')} ms "
          f"p99 {_f(pct.get('p99'), '7.2f')} ms max {_f((result.get('latency') or {}).get('max_ms'), '7.1f')} ms",
          flush=True)
    return {"cell": cell, "repeat": repeat, **result}


def failover_section(zookeeper: ZooKeeperServer, work: Path, args: argparse.Namespace
                     ) -> list[dict[str, Any]]:
    overrides = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    runs: list[dict[str, Any]] = []
    with local_cluster(zookeeper, work, 3, overrides) as target:
        cluster = target.cluster
        assert cluster is not None
        for repeat in range(args.failover_repeats):
            for kind, client in ((k, c) for k in ("kill", "term") for c in args.failover_clients):
                controller = cluster_failover.controller_id(cluster)
                candidates = [b for b in sorted(cluster.brokers) if b != controller]
                victim = candidates[(repeat * 2 + (kind == "term")) % len(candidates)]
                try:
                    run = cluster_failover.probe(cluster, kind, victim, args.failover_rate,
                                                 RECORD_SIZE, settle_records=int(args.failover_rate),
                                                 client=client)
                except Exception as exc:  # one failed probe must not lose the others
                    traceback.print_exc(file=sys.stderr)
                    run = {"kind": kind, "client": client, "victim": victim,
                           "error": f"{type(exc).__name__}: {exc}"}
                    if not cluster.brokers[victim].is_running():
                        cluster.restart(victim)
                run.update({"repeat": repeat, "controller": controller})
                runs.append(run)
                print(f"  {kind:4} broker {victim} ({client}): " + ", ".join(
                    f"{k} {run[k]:.2f} s" for k in ("metadata_leader_s", "resumed_s", "stall_s",
                                                     "exited_s") if k in run)
                      + (f", {run['errors']} producer errors" if run.get("errors") else "")
                      + (f" FAILED {run['error']}" if "error" in run else ""), flush=True)
    return runs


def latency_repeat(zookeeper: ZooKeeperServer, work: Path, args: argparse.Namespace,
                   repeat: int) -> list[dict[str, Any]]:
    """For each linger.ms: the single broker with acks=all, then a 3-broker cluster with
    RF=3 and acks=all and (to tell the wait for the followers from the load they add) RF=3
    and acks=1."""
    runs = []
    for linger_ms in args.linger_ms:
        paced = {"num_records": args.latency_records, "producers": 1, "throughput": args.rate,
                 "linger_ms": linger_ms, "latency_sample_every": 1}
        with single_broker(work) as single:
            runs.append(produce_cell(single, latency_cell(LATENCY_SINGLE, linger_ms), repeat, 1,
                                     args.latency_partitions, args, args.profile, acks="all", **paced))
        with local_cluster(zookeeper, work, 3) as cluster:
            for cell, acks in ((LATENCY_RF3, "all"), ("cluster-3/rf3-acks-1", "1")):
                runs.append(produce_cell(cluster, latency_cell(cell, linger_ms), repeat, 3,
                                         args.latency_partitions, args, args.profile, acks=acks,
                                         **paced))
    return runs


def follower_repeat(zookeeper: ZooKeeperServer, work: Path, args: argparse.Namespace,
                    repeat: int, trees: list[cluster_follower.BrokerTree]) -> list[dict[str, Any]]:
    """Both trees' acks=all and acks=1 cells, each on a fresh cluster, in ABBA order: the
    trees (old, new) and the acks (all, 1) in one order on even repeats, reversed on odd."""
    flip = repeat % 2 == 1
    runs = []
    for tree in (trees[::-1] if flip else trees):
        for acks in (("1", "all") if flip else ("all", "1")):
            try:
                with local_cluster(zookeeper, work, 3, tree=tree) as target:
                    runs.append(follower_cell(target, tree, acks, repeat, args))
            except Exception as exc:  # one failed cell (a cluster not formed in time) must not lose the others
                traceback.print_exc(file=sys.stderr)
                runs.append({"cell": f"{tree.name}/acks-{acks}", "tree": tree.name, "acks": acks,
                             "repeat": repeat, "incomplete": True, "error": f"{type(exc).__name__}: {exc}"})
    return runs


def follower_cell(target: Target, tree: cluster_follower.BrokerTree, acks: str, repeat: int,
                  args: argparse.Namespace) -> dict[str, Any]:
    """One produce of --follower-records on a topic led by broker 1 alone, the followers'
    CPU from the producer's start until they have copied every record."""
    cell = f"{tree.name}/acks-{acks}"
    topic = f"follower-{tree.name}-acks{acks}-{repeat}"
    partitions = args.partitions
    leader_first = [[cluster_follower.LEADER, *cluster_follower.FOLLOWERS]] * partitions
    create_topic(target, topic, partitions, 3, assignment=leader_first)
    warm_up(target, topic, partitions)
    options = perf_options(target, topic, args, num_records=args.follower_records,
                           partitions=partitions, replication_factor=3, acks=acks)
    pids = target.pids()
    cluster_follower.check_tree(pids, tree)
    os.sync()  # what an earlier cell left dirty is written back outside this one
    with profiled(target, args.profile, f"{cell.replace('/', '-')}-{repeat}"):
        before = cluster_follower.cpu_seconds(pids)
        start = time.monotonic()
        summary = run_mode(options, "produce")
        copied = _wait_copied(target, topic, partitions, partitions + summary.records, args.phase_timeout)
        elapsed = time.monotonic() - start
        after = cluster_follower.cpu_seconds(pids)
    time.sleep(args.follower_idle_s)  # a measurement window: the brokers' CPU with nothing to copy
    idle_rate = {b: (cpu - after[b]) / args.follower_idle_s
                 for b, cpu in cluster_follower.cpu_seconds(pids).items()}
    result = {"cell": cell, "tree": tree.name, "tree_path": str(tree.path), "acks": acks,
              "repeat": repeat, **summary.to_json(),
              **cluster_follower.follower_result(before, after,
                                                 summary.bytes, elapsed, idle_rate),
              "incomplete": not copied or summary.records < options.num_records or summary.errors > 0}
    raw, net = result["follower_cpu_s_per_gb"], result["follower_net_cpu_s_per_gb"]
    print(f"  {cell:14} repeat {repeat} {result['mb_per_s']:6.1f} MB/s, copied in {elapsed:5.1f} s: "
          f"followers {', '.join(f'{b}: {v:.2f} (net {net[b]:.2f})' for b, v in raw.items())} CPU-s/GB, leader "
          f"{_f(result['leader_cpu_s_per_gb'], '.2f')}" + (" INCOMPLETE" if result["incomplete"] else ""),
          flush=True)
    return result


def _wait_copied(target: Target, topic: str, partitions: int, records: int, timeout: float) -> bool:
    """Until the leader's high watermarks sum to `records`: both followers have every
    record (False on timeout)."""
    def copied() -> bool:
        marks = admin.watermarks(target.bootstrap, topic, list(range(partitions)), timeout_s=10)
        return sum(high for _, high in marks.values()) >= records
    try:
        cluster_failover.wait_for(copied, f"the followers of {topic} to copy {records} records",
                                  timeout=timeout, interval=0.2)
    except TimeoutError:
        traceback.print_exc(file=sys.stderr)
        return False
    return True


# ---------------------------------------------------------------- summaries

def follower_section(zookeeper: ZooKeeperServer, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    trees = cluster_follower.compared_trees(args.follower_compare)
    print("follower", flush=True)
    try:
        runs = [r for i in range(args.repeats) for r in follower_repeat(zookeeper, work, args, i, trees)]
    finally:
        for tree in trees:
            tree.cleanup()
    return {"trees": {t.name: str(t.path) for t in trees}, "runs": runs,
            "summary": cluster_follower.follower_summary(runs, [t.name for t in trees])}


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def throughput_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {}
    for cell in dict.fromkeys(r["cell"] for r in runs):
        ok = [r for r in runs if r["cell"] == cell and not r.get("incomplete")]
        cells[cell] = {k: median([r[k] for r in ok if r.get(k) is not None])
                       for k in ("records_per_s", "mb_per_s", "cpu_s_per_gb", "cores_busy", "client_cores")}
        cells[cell]["repeats"] = len(ok)

    def ratio(a: str, b: str, key: str) -> float | None:
        x, y = cells.get(a, {}).get(key), cells.get(b, {}).get(key)
        return x / y if x is not None and y else None
    return {"cells": cells, "ratios": {
        "rf3_acks_all / rf1_acks_1 records/s": ratio("cluster-3/rf3-acks-all", "cluster-3/rf1-acks-1",
                                                     "records_per_s"),
        "rf3_acks_all / rf1_acks_1 CPU-s/GB": ratio("cluster-3/rf3-acks-all", "cluster-3/rf1-acks-1",
                                                    "cpu_s_per_gb"),
        "2 processes / 1 broker records/s": ratio("cluster-2/rf1-acks-1", "single/rf1-acks-1",
                                                  "records_per_s"),
        "2 processes / 1 broker CPU-s/GB": ratio("cluster-2/rf1-acks-1", "single/rf1-acks-1",
                                                 "cpu_s_per_gb"),
        "2 processes / 1 broker cores busy": ratio("cluster-2/rf1-acks-1", "single/rf1-acks-1",
                                                   "cores_busy"),
    }}


def failover_summary(runs: list[dict[str, Any]], session_timeout_ms: int) -> dict[str, Any]:
    """Per producer client and kind: medians and maxima of each figure; the targets per
    client (the leader's move is the brokers' alone: one target over every client's probes)."""
    out: dict[str, Any] = {"session_timeout_ms": session_timeout_ms, "clients": {}, "targets": {}}
    for client in dict.fromkeys(r["client"] for r in runs):
        mine = [r for r in runs if r["client"] == client]
        per: dict[str, Any] = {}
        for kind in ("kill", "term"):
            ok = [r for r in mine if r["kind"] == kind and "error" not in r]
            per[kind] = {k: {"median": median(v), "max": max(v) if v else None, "values": v}
                         for k in ("metadata_leader_s", "resumed_s", "stall_s", "exited_s")
                         if (v := [r[k] for r in ok if k in r])}
            per[kind]["probes"] = len(ok)
            per[kind]["failed"] = len([r for r in mine if r["kind"] == kind]) - len(ok)
            per[kind]["producer_errors"] = sum(r.get("errors", 0) for r in ok)
        out["clients"][client] = per
        kill_max = per["kill"].get("resumed_s", {}).get("max")
        out["targets"][f"kill: resumed within session timeout + 1 s ({client})"] = _met(
            kill_max, session_timeout_ms / 1000 + 1)
    moved = [r["metadata_leader_s"] for r in runs
             if r["kind"] == "term" and "error" not in r and "metadata_leader_s" in r]
    out["targets"]["term: leader moved in under 1 s"] = _met(max(moved) if moved else None, 1.0)
    return out


def latency_summary(runs: list[dict[str, Any]], lingers: list[float]) -> dict[str, Any]:
    cells: dict[str, dict[str, Any]] = {}
    for cell in dict.fromkeys(r["cell"] for r in runs):
        ok = [r for r in runs if r["cell"] == cell and not r.get("incomplete") and r.get("latency")]
        cells[cell] = {k: median([r["latency"]["percentiles_ms"][k] for r in ok])
                       for k in ("p50", "p95", "p99", "p99_9")}
        cells[cell]["records_per_s"] = median([r["records_per_s"] for r in ok])
        cells[cell]["cores_busy"] = median([r["cores_busy"] for r in ok if r.get("cores_busy") is not None])
        cells[cell]["p99_values"] = [r["latency"]["percentiles_ms"]["p99"] for r in ok]
    ratios, targets = {}, {}
    for linger_ms in lingers:
        single = cells.get(latency_cell(LATENCY_SINGLE, linger_ms), {}).get("p99")
        rf3 = cells.get(latency_cell(LATENCY_RF3, linger_ms), {}).get("p99")
        ratio = rf3 / single if single and rf3 is not None else None
        ratios[f"{linger_ms:g}"] = ratio
        default = " (the producer's default)" if linger_ms == DEFAULT_LINGER_MS else ""
        targets[f"p99 rf3 < 2 x single, linger.ms {linger_ms:g}{default}"] = _met(ratio, 2.0)
    return {"cells": cells, "p99_ratio_by_linger_ms": ratios, "targets": targets}


def _met(value: float | None, limit: float) -> dict[str, Any]:
    return {"value": value, "limit": limit, "met": value is not None and value < limit}


def print_report(doc: dict[str, Any]) -> None:
    if "throughput" in doc:
        s = doc["throughput"]["summary"]
        print(f"\nthroughput, {doc['args']['records']} x 1 KiB, {doc['args']['partitions']} partitions, "
              f"medians of {doc['args']['repeats']}")
        print(f"{'cell':26} {'records/s':>11} {'MB/s':>8} {'CPU-s/GB':>9} {'cores':>6} {'client cores':>12}")
        for cell, c in s["cells"].items():
            print(f"{cell:26} {_f(c['records_per_s'], ',.0f'):>11} {_f(c['mb_per_s'], '.1f'):>8} "
                  f"{_f(c['cpu_s_per_gb'], '.2f'):>9} {_f(c['cores_busy'], '.2f'):>6} "
                  f"{_f(c['client_cores'], '.2f'):>12}")
        for name, value in s["ratios"].items():
            print(f"  {name:40} {_f(value, '.2f')}")
    if "failover" in doc:
        s = doc["failover"]["summary"]
        print(f"\nfailover, zookeeper.session.timeout.ms={s['session_timeout_ms']} (seconds)")
        print(f"{'client':13} {'event':6} {'figure':18} {'median':>7} {'max':>7}")
        for client, per in s["clients"].items():
            for kind in ("kill", "term"):
                for key, v in per[kind].items():
                    if isinstance(v, dict):
                        print(f"{client:13} {kind:6} {key:18} {_f(v['median'], '.2f'):>7} "
                              f"{_f(v['max'], '.2f'):>7}")
                print(f"{client:13} {kind:6} probes {per[kind]['probes']}, failed {per[kind]['failed']}, "
                      f"producer errors {per[kind]['producer_errors']}")
    if "latency" in doc:
        s = doc["latency"]["summary"]
        print(f"\nacks=all produce latency at {doc['args']['rate']:.0f} records/s of 1 KiB (ms, medians)")
        print(f"{'cell':34} {'p50':>7} {'p95':>7} {'p99':>7} {'p99.9':>7} {'cores':>6}")
        for cell, c in s["cells"].items():
            print(f"{cell:34} " + " ".join(f"{_f(c[k], '.2f'):>7}" for k in ("p50", "p95", "p99", "p99_9"))
                  + f" {_f(c['cores_busy'], '.2f'):>6}")
        for linger_ms, ratio in s["p99_ratio_by_linger_ms"].items():
            print(f"  p99 ratio {LATENCY_RF3} / {LATENCY_SINGLE}, linger.ms {linger_ms}: {_f(ratio, '.2f')}")
    if "follower" in doc:
        print_follower_report(doc)
    targets = {k: v for sec in ("failover", "latency") if sec in doc
               for k, v in doc[sec]["summary"]["targets"].items()}
    if targets:
        print("\ntargets")
        for name, t in targets.items():
            print(f"  {name:62} {_f(t['value'], '.2f'):>7} < {t['limit']:.2f}  "
                  f"{'met' if t['met'] else 'NOT MET'}")


def print_follower_report(doc: dict[str, Any]) -> None:
    s = doc["follower"]["summary"]
    print(f"\nfollower CPU per replicated GB, {doc['args']['follower_records']} x 1 KiB, "
          f"{doc['args']['partitions']} partitions led by broker 1, medians of "
          f"{doc['args']['repeats']} (old: {doc['follower']['trees']['old']})")
    for kind in ("raw", "net"):
        print(f"{kind + ': cell':14} {'CPU-s/GB':>9} {'min':>6} {'max':>6} {'leader':>7}")
        for cell, c in s[kind]["cells"].items():
            lo, hi = c["spread"] or (None, None)
            print(f"{cell:14} {_f(c['follower_cpu_s_per_gb'], '.2f'):>9} {_f(lo, '.2f'):>6} "
                  f"{_f(hi, '.2f'):>6} {_f(c['leader_cpu_s_per_gb'], '.2f'):>7}")
        for acks, r in s[kind]["new/old"].items():
            print(f"  new/old {acks:9} ratio of medians {_f(r['median_ratio'], '.2f')}, paired by "
                  f"repeat median {_f(r['paired_median'], '.2f')} (min {_f(r['paired_min'], '.2f')}, "
                  f"max {_f(r['paired_max'], '.2f')})")


def _f(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


# ---------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sections", default=",".join(DEFAULT_SECTIONS),
                    help="comma-separated: " + ", ".join(SECTIONS) + " (default: all but follower)")
    ap.add_argument("--repeats", type=int, default=3, help="throughput and latency repeats")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per throughput cell")
    ap.add_argument("--partitions", type=int, default=6, help="partitions per throughput topic")
    ap.add_argument("--producers", type=int, default=2, help="producer processes per throughput cell")
    ap.add_argument("--failover-repeats", type=int, default=5, help="SIGKILL and SIGTERM probes each")
    ap.add_argument("--failover-rate", type=float, default=1000.0, help="records/s of the failover producer")
    ap.add_argument("--failover-clients", type=lambda v: v.split(","), default=["librdkafka", "kafka-python"],
                    help="comma-separated producer clients of the failover probes: librdkafka "
                         "(confluent-kafka), kafka-python, aiokafka (default: the first two)")
    ap.add_argument("--session-timeout-ms", type=int, default=6000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--rate", type=float, default=10_000.0, help="records/s of the latency runs")
    ap.add_argument("--latency-records", type=int, default=50_000)
    ap.add_argument("--latency-partitions", type=int, default=3)
    ap.add_argument("--linger-ms", type=lambda v: [float(x) for x in v.split(",")],
                    default=[DEFAULT_LINGER_MS, 0.0],
                    help="comma-separated linger.ms values of the latency producer (default 5,0)")
    ap.add_argument("--follower-records", type=int, default=131_072,
                    help="records (1 KiB) per follower cell (default: 128 MiB)")
    ap.add_argument("--follower-idle-s", type=float, default=5.0,
                    help="seconds each follower cell measures the brokers' idle CPU rate over")
    ap.add_argument("--follower-compare", default="3eb551c",
                    help="the follower section's old tree: a git ref to build, or a built checkout")
    ap.add_argument("--phase-timeout", type=float, default=300.0)
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="py-spy every broker of each latency and follower cell, stacks into DIR")
    ap.add_argument("--json", type=Path, default=RESULTS)
    ap.add_argument("--work", type=Path, default=None,
                    help="keep ZooKeeper's and the brokers' logs here (default: a temp dir, removed)")
    args = ap.parse_args(argv)
    args.sections = [s for s in args.sections.split(",") if s]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}: use {', '.join(SECTIONS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    doc: dict[str, Any] = {"bench": "cluster", "args": {**vars(args), "json": str(args.json)},
                           "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()},
                           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-cluster-") as tmp:
        work = (args.work or Path(tmp)).resolve()  # the follower section starts brokers elsewhere
        work.mkdir(parents=True, exist_ok=True)
        zookeeper = ZooKeeperServer(work / "zookeeper").start()
        try:
            if "throughput" in args.sections:
                print("throughput", flush=True)
                runs = [r for i in range(args.repeats) for r in throughput_repeat(zookeeper, work, args, i)]
                doc["throughput"] = {"runs": runs, "summary": throughput_summary(runs)}
            if "failover" in args.sections:
                print("failover", flush=True)
                runs = failover_section(zookeeper, work, args)
                doc["failover"] = {"runs": runs,
                                   "summary": failover_summary(runs, args.session_timeout_ms)}
            if "latency" in args.sections:
                print("latency", flush=True)
                runs = [r for i in range(args.repeats) for r in latency_repeat(zookeeper, work, args, i)]
                doc["latency"] = {"runs": runs, "summary": latency_summary(runs, args.linger_ms)}
            if "follower" in args.sections:
                doc["follower"] = follower_section(zookeeper, work, args)
        finally:
            zookeeper.stop()
    doc["machine"]["loadavg_end"] = os.getloadavg()
    print_report(doc)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2, default=str))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
