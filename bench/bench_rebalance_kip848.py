"""Rebalance time, classic vs KIP-848 consumer groups: same broker, same clients, same run.

For each protocol and repeat: a fresh kbroker process with Kafka's defaults (consumer
groups: group.consumer.heartbeat.interval.ms 5000; classic: librdkafka's heartbeat.interval.ms
3000, session.timeout.ms 45000), a 6-partition topic with a producer writing to every
partition all along, two confluent-kafka consumers of one group holding the topic, then a
third joins. Measured:

    join_s   the third subscribes -> the three hold disjoint shares covering the 6
             partitions and every one has read a record since the join
    pause_s  the longest time one of the first two members went without a record
             meanwhile (a stop-the-world rebalance stops them; KIP-848 should not)

Protocols: classic (librdkafka's default eager range assignor: every member stops),
classic-cooperative (cooperative-sticky, KIP-429), consumer (group.protocol=consumer,
KIP-848, the broker's uniform assignor).

    python bench/bench_rebalance_kip848.py --repeats 3

Results go to bench/results/rebalance_kip848.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import RunningBroker, kbroker_spec  # noqa: E402

PARTITIONS = 6
RESULTS = Path(__file__).resolve().parent / "results" / "rebalance_kip848.json"
PROTOCOLS: dict[str, dict[str, str]] = {
    "classic": {},
    "classic-cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, conf: dict[str, str]) -> None:
        from confluent_kafka import Consumer

        self.incremental = conf.get("group.protocol") == "consumer" or \
            conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "latest", "log_level": 0, **conf})
        self.assignment: set[int] = set()
        self.read = 0
        self.last = time.monotonic()
        self.pause = 0.0
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        got = {p.partition for p in partitions}
        self.assignment = self.assignment | got if self.incremental else got

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        gone = {p.partition for p in partitions}
        self.assignment = self.assignment - gone if self.incremental else set()

    def poll(self) -> None:
        m = self.consumer.poll(0.01)
        if m is not None and m.error() is None:
            self.read += 1
            now = time.monotonic()
            self.pause = max(self.pause, now - self.last)
            self.last = now


def wait(members: list[Member], producer: Any, topic: str, done: Any, timeout: float = 120.0) -> float:
    start = time.monotonic()
    last = 0.0
    while time.monotonic() - start < timeout:
        if time.monotonic() - last > 0.05:  # a record on every partition every 50 ms
            for p in range(PARTITIONS):
                producer.produce(topic, b"x", partition=p)
            producer.poll(0)
            last = time.monotonic()
        for m in members:
            m.poll()
        if done():
            return time.monotonic() - start
    return float("nan")


def covered(members: list[Member]) -> bool:
    shares = [m.assignment for m in members]
    return all(shares) and sum(map(len, shares)) == PARTITIONS and set().union(*shares) == set(range(PARTITIONS))


def one_run(protocol: str, log_dir: Path) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = RunningBroker(kbroker_spec(name=f"kbroker-{protocol}"), log_dir, partitions=PARTITIONS)
    try:
        broker.wait_ready()
        topic = f"rebalance-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 0})
        conf = PROTOCOLS[protocol]
        members = [Member(broker.bootstrap, f"g-{topic}", topic, conf) for _ in range(2)]
        try:
            wait(members, producer, topic, lambda: covered(members) and all(m.read for m in members))
            members.append(Member(broker.bootstrap, f"g-{topic}", topic, conf))
            for m in members:
                m.read, m.last, m.pause = 0, time.monotonic(), 0.0
            join = wait(members, producer, topic, lambda: covered(members) and all(m.read for m in members))
            pause = max(m.pause for m in members[:2])
            return {"join_s": round(join, 3), "pause_s": round(pause, 3)}
        finally:
            for m in members:
                m.consumer.close()
            producer.flush(10)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--protocols", nargs="+", default=list(PROTOCOLS))
    args = p.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in args.protocols}
    with tempfile.TemporaryDirectory(prefix="bench-kip848-") as tmp:
        for _ in range(args.repeats):  # alternate protocols within each repeat
            for name in args.protocols:
                runs[name].append(one_run(name, Path(tmp)))
                r = runs[name][-1]
                print(f"{name:20s} third member joined -> all consuming in {r['join_s']:.3f} s; "
                      f"longest pause of the others {r['pause_s']:.3f} s", flush=True)
    median = {name: {k: statistics.median(x[k] for x in rs) for k in ("join_s", "pause_s")}
              for name, rs in runs.items()}
    base = median.get("classic")
    for name, m in median.items():
        ratio = f" ({m['join_s'] / base['join_s']:.2f}x classic)" if base else ""
        pause = f" ({m['pause_s'] / base['pause_s']:.2f}x classic)" if base and base["pause_s"] else ""
        print(f"median {name:20s} join {m['join_s']:.3f} s{ratio}, pause {m['pause_s']:.3f} s{pause}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"partitions": PARTITIONS, "members": 3, "runs": runs,
                                   "median": median}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
