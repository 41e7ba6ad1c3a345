"""Consumer group formation time, kbroker side by side with a peer broker (Tansu by default).

For each broker and repeat: a fresh broker process, a 6-partition topic, then three
confluent-kafka consumers (librdkafka defaults: heartbeat.interval.ms 3000,
session.timeout.ms 45000) subscribe at once. Measured:

    stable_s    subscribe -> every consumer holds a disjoint share covering all 6 partitions
    takeover_s  one consumer closes -> the other two cover all 6 partitions again

    python bench/bench_groups.py                      # kbroker (delay 0 and 3000) vs tansu, 3 repeats
    python bench/bench_groups.py --brokers kbroker --repeats 5

kbroker runs once with group.initial.rebalance.delay.ms=0 (what tests use) and once
with Kafka's default 3000. Results go to bench/results/groups.json.
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

from brokers import BrokerSpec, RunningBroker, kbroker_spec, resolve_spec  # noqa: E402

PARTITIONS = 6
RESULTS = Path(__file__).resolve().parent / "results" / "groups.json"


def specs(names: list[str]) -> list[BrokerSpec]:
    out = []
    for name in names:
        if name == "kbroker":
            for delay in (0, 3000):
                spec = kbroker_spec(name=f"kbroker-delay{delay}")
                spec.command += f" --override group.initial.rebalance.delay.ms={delay}"
                out.append(spec)
        else:
            out.append(resolve_spec(name))
    return out


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "log_level": 0})
        self.assignment: set[int] = set()
        self.open = True
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        self.assignment = {p.partition for p in partitions}

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self.assignment = set()

    def close(self) -> None:
        self.consumer.close()
        self.open = False


def wait_covered(members: list[Member], timeout: float = 120.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        live = [m for m in members if m.open]
        for m in live:
            m.consumer.poll(0.02)
        shares = [m.assignment for m in live]
        if all(shares) and sum(map(len, shares)) == PARTITIONS and set().union(*shares) == set(range(PARTITIONS)):
            return time.monotonic() - start
    return float("nan")


def one_run(spec: BrokerSpec, log_dir: Path) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = RunningBroker(spec, log_dir, partitions=PARTITIONS)
    try:
        broker.wait_ready()
        topic = f"groups-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        members = [Member(broker.bootstrap, f"g-{topic}", topic) for _ in range(3)]
        try:
            stable = wait_covered(members)
            members[0].close()
            takeover = wait_covered(members)
        finally:
            for m in members:
                if m.open:
                    m.close()
        return {"stable_s": round(stable, 3), "takeover_s": round(takeover, 3)}
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", nargs="+", default=["kbroker", "tansu"])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    all_specs = specs(args.brokers)
    runs: dict[str, list[dict[str, float]]] = {s.name: [] for s in all_specs}
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as tmp:
        for _ in range(args.repeats):  # alternate brokers within each repeat
            for spec in all_specs:
                runs[spec.name].append(one_run(spec, Path(tmp)))
                print(spec.name, runs[spec.name][-1], flush=True)
    summary = {name: {key: statistics.median(r[key] for r in rs) for key in ("stable_s", "takeover_s")}
               for name, rs in runs.items()}
    print(json.dumps(summary, indent=1))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"partitions": PARTITIONS, "consumers": 3, "runs": runs,
                                   "median": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
