"""A randomized fault test: a 3-broker cluster (each broker in a network namespace of its
own when the machine allows, see network.py) runs an idempotent acks=all producer over
RF=3 partitions (min.insync.replicas=2) while a seeded schedule of faults hits it:

    kill        SIGKILL a broker (restarted by a later step or at the end)
    restart     start a killed broker again
    shutdown    SIGTERM (a controlled shutdown), then start it again
    isolate     cut a broker off from everyone (ZooKeeper too), heal later
    cut         cut the link between two brokers only, heal later

At most one broker is down and one cut is in place at a time; each fault is held for a
random while (1-6 s). A broker that exits by itself (one started while cut off from
ZooKeeper gives up after zookeeper.connection.timeout.ms, as Kafka's does) is started
again at the next step. Then everything heals, the cluster settles (every broker sees a
leader and a full ISR for every partition) and the invariants are checked:

  * every acknowledged record read back at its offset, in the order sent; within a
    producer epoch no record written twice or out of order, and a record written again
    only by the client in a later epoch (librdkafka's KIP-360 epoch bump re-sends
    records whose outcome it did not know: workload.check_idempotent_log);
  * replica logs identical byte for byte below the high watermark (read from the log
    dirs, replica_logs.py);
  * leader epochs never go back, at most one leader per partition and epoch, a leader's
    high watermark never goes back (observer.py, polling all along).

The default run has 25 s of faults; the long run (marked `slow`) 10 minutes, or
KBROKER_FAULT_TEST_SECONDS; KBROKER_FAULT_SEED replays a schedule:

    scripts/test -m slow tests/cluster/test_random_faults.py -s
    KBROKER_FAULT_TEST_SECONDS=3600 scripts/test -m slow tests/cluster/test_random_faults.py -s
    KBROKER_FAULT_SEED=1234 scripts/test tests/cluster/test_random_faults.py -s

The seed is printed at the start and added to the failure. The same seed makes the same
choices; the cluster's own timing still varies from run to run.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.topic_partition import TopicPartition

from .network import Network, made_network, unavailable
from .observer import ClusterObserver
from .replica_logs import divergence, replica_batches
from .support import create_topic, partition_view, wait_until
from .workload import (
    ProducerWorkload,
    check_acknowledged,
    check_idempotent_log,
    high_watermark,
    logged_records,
    read_partition,
)

SHORT_S = 25.0
LONG_S = float(os.environ.get("KBROKER_FAULT_TEST_SECONDS", "600"))
SEED = os.environ.get("KBROKER_FAULT_SEED") or None
TOPIC = "faults"
PARTITIONS = 4
BROKERS = (1, 2, 3)
SETTLE_S = 120.0
LOG_TAIL_LINES = 150  # of each broker's log, printed when the test fails
OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "replica.socket.timeout.ms": "5000",
    "replica.fetch.backoff.ms": "200",
    "request.timeout.ms": "10000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "controlled.shutdown.max.retries": "1",  # a controller out of reach: give up sooner
}


@pytest.fixture
def network() -> Iterator[Network | None]:
    """Brokers in namespaces when possible; without, the test runs no network faults."""
    if unavailable() is not None:
        yield None
        return
    with made_network(BROKERS) as net:
        yield net


class FaultSchedule:
    """The faults of one run, drawn from a seeded generator, and what they left undone."""

    def __init__(self, cluster: Cluster, network: Network | None, rng: random.Random) -> None:
        self.cluster = cluster
        self.network = network
        self.rng = rng
        self.down: int | None = None  # the broker killed and not yet restarted
        self.cut_until = 0.0
        self.log: list[str] = []

    def restart_exited(self) -> None:
        """Start again a broker that exited by itself: one restarted while cut off from
        ZooKeeper gives up after zookeeper.connection.timeout.ms, as Kafka's does."""
        for b in BROKERS:
            proc = self.cluster.brokers[b]
            if b != self.down and not proc.is_running():
                code = proc.proc.returncode if proc.proc is not None else None
                proc.start()
                self.log.append(f"broker {b} had exited (code {code}): restart")

    def step(self) -> None:
        self.restart_exited()
        kinds = ["kill", "shutdown"] if self.down is None else ["restart"]
        if self.network is not None and time.monotonic() >= self.cut_until:
            if self.cut_until:
                self.network.heal()
                self.cut_until = 0.0
                self.log.append("heal")
            kinds += ["isolate", "cut", "cut"]
        kind = self.rng.choice(kinds)
        hold = self.rng.uniform(1.0, 6.0)
        up = [b for b in BROKERS if b != self.down]
        if kind == "kill":
            self.down = self.rng.choice(up)
            self.cluster.kill(self.down)
            self.log.append(f"kill {self.down}")
        elif kind == "restart":
            assert self.down is not None
            self.cluster.brokers[self.down].start()
            self.log.append(f"restart {self.down}")
            self.down = None
        elif kind == "shutdown":
            target = self.rng.choice(up)
            code = self.cluster.stop_broker(target, timeout=60)
            self.cluster.brokers[target].start()
            self.log.append(f"shutdown {target} (exit {code}) and restart")
        elif kind == "isolate":
            assert self.network is not None
            target = self.rng.choice(up)
            self.network.isolate(target)
            self.cut_until = time.monotonic() + hold
            self.log.append(f"isolate {target} for {hold:.1f} s")
        else:
            assert self.network is not None
            a, b = self.rng.sample(list(BROKERS), 2)
            self.network.cut(a, b)
            self.cut_until = time.monotonic() + hold
            self.log.append(f"cut {a}<->{b} for {hold:.1f} s")
        time.sleep(self.rng.uniform(0.5, 3.0))  # the fault's own duration, not a wait

    def repair(self) -> None:
        if self.network is not None:
            self.network.heal()
        if self.down is not None:
            self.cluster.brokers[self.down].start()
            self.down = None
        self.restart_exited()


def settled(cluster: Cluster) -> bool:
    for p in range(PARTITIONS):
        views = {partition_view(cluster, TOPIC, p, broker_id=b) for b in BROKERS}
        if len(views) != 1 or any(v is None or v.leader < 0 or len(v.isr) != len(BROKERS)
                                  for v in views):
            return False
    return True


def describe(cluster: Cluster) -> str:
    """Each broker's view of each partition, and which brokers run, for a failure message."""
    lines = []
    for b, proc in cluster.brokers.items():
        views = [partition_view(cluster, TOPIC, p, broker_id=b) if proc.is_running() else None
                 for p in range(PARTITIONS)]
        lines.append(f"broker {b} ({'running' if proc.is_running() else 'stopped'}): " + ", ".join(
            f"{p}: leader {v.leader} epoch {v.leader_epoch} ISR {list(v.isr)}" if v else f"{p}: ?"
            for p, v in enumerate(views)))
    return "\n".join(lines)


def print_log_tails(cluster: Cluster, lines: int = LOG_TAIL_LINES) -> None:
    """The end of each broker's log, into the test's captured output: a failed CI run's
    temporary directory (the whole logs) is gone by the time anyone reads the report."""
    for b, proc in cluster.brokers.items():
        tail = proc.output().splitlines()[-lines:]
        print(f"---- broker {b}: the last {len(tail)} lines of {proc.log_path} ----")
        print("\n".join(tail))


def replicas_agree(cluster: Cluster) -> str | None:
    problems = []
    for p in range(PARTITIONS):
        tp = TopicPartition(TOPIC, p)
        hw = high_watermark(cluster.bootstrap_servers, TOPIC, p)
        differs = divergence({b: replica_batches(cluster.brokers[b].log_dir, tp) for b in BROKERS}, hw)
        if differs is not None:
            problems.append(f"{tp}: {differs}")
    return "; ".join(problems) or None


@pytest.mark.parametrize("fault_seconds", [
    pytest.param(SHORT_S, id="short", marks=pytest.mark.timeout(SHORT_S + 300)),
    pytest.param(LONG_S, id="long", marks=[pytest.mark.slow, pytest.mark.timeout(LONG_S + 300)]),
])
def test_random_faults(fault_seconds: float, network: Network | None, tmp_path: Path,
                       record_property: pytest.RecordProperty) -> None:
    seed = int(SEED) if SEED is not None else random.randrange(1 << 31)
    print(f"random fault test: seed {seed} (KBROKER_FAULT_SEED={seed} replays the choices), "
          f"{fault_seconds:.0f} s of faults, network faults "
          f"{'on' if network is not None else 'off: ' + str(unavailable())}")
    record_property("seed", seed)
    try:
        _run(seed, fault_seconds, network, tmp_path, record_property)
    except BaseException as e:
        e.add_note(f"random fault test seed: {seed} (KBROKER_FAULT_SEED={seed})")
        raise


def _run(seed: int, fault_seconds: float, network: Network | None, tmp_path: Path,
         record_property: pytest.RecordProperty) -> None:
    rng = random.Random(seed)
    host = network.host_address if network is not None else "127.0.0.1"
    with ZooKeeperServer(tmp_path / "zookeeper", host=host) as zookeeper, Cluster(
            len(BROKERS), tmp_path / "cluster", OVERRIDES, zookeeper=zookeeper,
            namespaces=network.placements() if network is not None else None) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_until(lambda: settled(cluster), "the topic's leaders and ISRs", SETTLE_S)
        observer = ClusterObserver({b: (p.host, p.port) for b, p in cluster.brokers.items()},
                                   TOPIC, lambda b: cluster.brokers[b].pid).start()
        workload = ProducerWorkload(cluster.bootstrap_servers, TOPIC, PARTITIONS).start()
        schedule = FaultSchedule(cluster, network, rng)
        try:
            workload.wait_acked(200, 60)
            started = time.monotonic()
            while time.monotonic() - started < fault_seconds:
                schedule.step()
            schedule.repair()
            print("faults:", "; ".join(schedule.log))
            repaired = time.monotonic()
            wait_until(lambda: settled(cluster), "the cluster to settle after the faults", SETTLE_S)
            settle_s = time.monotonic() - repaired
            workload.wait_all_partitions_acked(after=time.monotonic(), timeout=SETTLE_S)
        except BaseException as e:
            e.add_note(f"workload: {workload.describe()}; faults: {schedule.log}\n"
                       f"{describe(cluster)}")
            print_log_tails(cluster)
            raise
        finally:
            seen = observer.stop()
        workload.stop()
        assert workload.errors == [], workload.errors[:10]

        read = {p: read_partition(cluster.bootstrap_servers, TOPIC, p) for p in range(PARTITIONS)}
        check_acknowledged(workload.acked, read)
        deadline = time.monotonic() + 30
        while (differs := replicas_agree(cluster)) is not None:
            assert time.monotonic() < deadline, differs
            time.sleep(0.2)  # followers' files catch up with the high watermark
        resent = 0
        for p in range(PARTITIONS):
            batches = replica_batches(cluster.brokers[BROKERS[0]].log_dir, TopicPartition(TOPIC, p))
            records = logged_records(batches, high_watermark(cluster.bootstrap_servers, TOPIC, p))
            assert [r.offset for r in records] == [o for o, _v in read[p]]
            resent += check_idempotent_log(p, workload.acked[p], records)
        assert seen.violations == [], seen.violations[:10]

    epochs = {p: max(e) for p, e in seen.epochs_seen.items()}
    record_property("faults", len(schedule.log))
    record_property("settle_s", round(settle_s, 2))
    record_property("resent_after_epoch_bump", resent)
    print(f"{len(schedule.log)} faults; settled {settle_s:.2f} s after the last; "
          f"{workload.acked_count()} records acknowledged, {sum(map(len, read.values()))} read, "
          f"{resent} sent again by the producer after an epoch bump; "
          f"{seen.polls} observer polls, last leader epochs {epochs}; high watermark lower "
          f"after a leader change {seen.hw_lower_after_leader_change} times, after a leader "
          f"restart at the same epoch {seen.hw_lower_after_leader_restart} times")
