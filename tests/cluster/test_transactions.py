"""Transactions on a real cluster (ZooKeeper and three kbroker processes) with
confluent-kafka: the transaction coordinator's broker SIGKILLed in the middle of a
commit, and a partition leader SIGKILLed between the markers of a transaction. Every
transaction ends up all or nothing on every partition, every commit the producer saw
succeed is visible to read_committed consumers, and the transactions complete."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest

from .support import ask, ask_any, create_topic, new_cluster, wait_for_leader, wait_until

pytestmark = pytest.mark.timeout(300)

RECORDS_PER_TXN = 30


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, tmp_path, 3, {"replica.lag.time.max.ms": "5000"})
    try:
        yield c
    finally:
        c.stop()


def coordinator_of(cluster: Cluster, transactional_id: str) -> int | None:
    r = ask_any(cluster, FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
    return r.node_id if r is not None and r.error_code == 0 else None  # type: ignore[attr-defined]


def transaction_state(cluster: Cluster, transactional_id: str) -> str | None:
    node = coordinator_of(cluster, transactional_id)
    if node is None or not cluster.brokers[node].is_running():
        return None
    r = ask(cluster, node, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    if r is None:
        return None
    state = r.transaction_states[0]
    return state.transaction_state if state.error_code == 0 else None


class TxnRun:
    """A transactional producer in a thread: transaction k writes "k-i" for i < 30 to
    partition i % partitions. `before_commit` (once) runs right before a commit."""

    def __init__(self, cluster: Cluster, topic: str, transactional_id: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.committed: list[int] = []
        self.aborted: list[int] = []
        self.errors: list[str] = []
        self.before_commit: Callable[[], None] | None = None
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                   "transactional.id": transactional_id, "linger.ms": 5,
                                   "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
        self._producer.init_transactions(60)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TxnRun:
        self._thread.start()
        return self

    def _run(self) -> None:
        p = self._producer
        k = 0
        while not self._stop.is_set():
            try:
                p.begin_transaction()
                for i in range(RECORDS_PER_TXN):
                    p.produce(self.topic, f"{k}-{i}".encode(), partition=i % self.partitions)
                hook, self.before_commit = self.before_commit, None
                if hook is not None:
                    p.flush(60)
                    hook()
                self._commit(k)
            except KafkaException as e:
                self.errors.append(str(e))
                if e.args[0].fatal():
                    return
            k += 1

    def _commit(self, k: int) -> None:
        p = self._producer
        while True:
            try:
                p.commit_transaction(60)
                self.committed.append(k)
                return
            except KafkaException as e:
                err: KafkaError = e.args[0]
                self.errors.append(str(err))
                if err.retriable():
                    continue
                if err.txn_requires_abort():
                    p.abort_transaction(60)
                    self.aborted.append(k)
                    return
                raise

    def wait_committed(self, count: int, what: str) -> None:
        target = len(self.committed) + count
        wait_until(lambda: len(self.committed) >= target or not self._thread.is_alive(), what, 120)
        assert len(self.committed) >= target, self.errors

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)


def read_committed(cluster: Cluster, topic: str, partitions: int) -> dict[int, list[str]]:
    """Each partition's values up to its last stable offset, read_committed."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "checker",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    done: set[int] = set()
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + 60
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                err = m.error()
                if err is None:
                    out[m.partition()].append(m.value().decode())
                elif err.code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
    finally:
        c.close()
    assert len(done) == partitions, "no end of partition"
    return out


def check_atomic(run: TxnRun, values: dict[int, list[str]]) -> None:
    """Every transaction all or nothing; every one the producer saw committed is there,
    every one it aborted is not; each partition in transaction order."""
    seen: dict[int, set[int]] = {}
    for partition, vs in values.items():
        txns = [int(v.split("-")[0]) for v in vs]
        assert txns == sorted(txns), f"partition {partition} out of order"
        for v in vs:
            k, i = map(int, v.split("-"))
            seen.setdefault(k, set()).add(i)
    for k, records in seen.items():
        assert records == set(range(RECORDS_PER_TXN)), f"transaction {k} is partly visible"
    assert set(run.committed) <= set(seen), sorted(set(run.committed) - set(seen))
    assert not set(run.aborted) & set(seen)


def test_coordinator_sigkill_mid_commit(cluster: Cluster) -> None:
    create_topic(cluster, "txn-coord", partitions=3, rf=3)
    run = TxnRun(cluster, "txn-coord", "coordinated", 3).start()
    try:
        run.wait_committed(5, "transactions before the kill")
        old = wait_until(lambda: coordinator_of(cluster, "coordinated"), "the coordinator")
        assert isinstance(old, int)
        killed = threading.Event()

        def kill() -> None:  # runs in the producer's thread, right before its commit
            cluster.kill(old)
            killed.set()

        run.before_commit = kill
        wait_until(killed.is_set, "the coordinator's SIGKILL")
        wait_until(lambda: coordinator_of(cluster, "coordinated") not in (None, old), "a new coordinator", 90)
        run.wait_committed(5, "transactions after the failover")
    finally:
        run.stop()
    cluster.restart(old)
    wait_until(lambda: transaction_state(cluster, "coordinated") in ("CompleteCommit", "CompleteAbort"),
               "the last transaction to complete", 90)
    check_atomic(run, read_committed(cluster, "txn-coord", 3))


def test_partition_leader_sigkill_between_markers(cluster: Cluster) -> None:
    create_topic(cluster, "txn-lead", partitions=2, rf=3)
    leaders = [wait_for_leader(cluster, "txn-lead", p).leader for p in (0, 1)]
    victim = leaders[1]
    # a transactional id whose coordinator is not the broker we kill
    candidates = (f"marked-{i}" for i in range(100))
    transactional_id = next(t for t in candidates
                            if wait_until(lambda t=t: coordinator_of(cluster, t), "a coordinator") != victim)
    run = TxnRun(cluster, "txn-lead", transactional_id, 2).start()
    try:
        run.wait_committed(3, "transactions before the kill")
        killed = threading.Event()

        def kill() -> None:  # records on both partitions written: markers go to both next
            cluster.kill(victim)
            killed.set()

        run.before_commit = kill
        wait_until(killed.is_set, "the leader's SIGKILL")
        wait_for_leader(cluster, "txn-lead", 1, not_on=victim)
        run.wait_committed(3, "transactions after the new leader")
    finally:
        run.stop()
    wait_until(lambda: transaction_state(cluster, transactional_id) in ("CompleteCommit", "CompleteAbort"),
               "the transaction to complete on both partitions", 90)
    values = read_committed(cluster, "txn-lead", 2)
    check_atomic(run, values)
    cluster.restart(victim)
    wait_until(lambda: len(read_committed(cluster, "txn-lead", 2)[1]) == len(values[1]),
               "the same committed data with the old leader back")
