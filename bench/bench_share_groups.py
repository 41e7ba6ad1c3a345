"""Delivery throughput, share group (KIP-932) vs classic consumer group: same broker, same
topic, same run.

One fresh kbroker process with Kafka's defaults, a topic of PARTITIONS partitions filled
with RECORDS records of SIZE bytes, then for each repeat, alternating: one classic
confluent-kafka Consumer (a new group, auto.offset.reset=earliest, no commits) reads the
whole topic; one ShareConsumer (a new share group, share.auto.offset.reset=earliest,
implicit acknowledgement: every record accepted, each acknowledgement persisted in
__share_group_state before it is answered) reads it too. Measured: records a second from
the first record delivered to the last (joining the group is left out), for each.

    python bench/bench_share_groups.py --records 200000 --repeats 3

Results go to bench/results/share_groups.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokers import RunningBroker, kbroker_spec  # noqa: E402

PARTITIONS = 3
RESULTS = Path(__file__).resolve().parent / "results" / "share_groups.json"


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "log_level": 0})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def drain(poll: Callable[[], Any], close: Callable[[], None], records: int, timeout: float, name: str) -> float:
    """Poll until `records` records came; records a second from the first to the last."""
    got, start, deadline = 0, 0.0, time.monotonic() + timeout
    try:
        while got < records:
            assert time.monotonic() < deadline, f"{name} read {got} of {records}"
            n = sum(1 for m in poll() if m.error() is None)
            if n and not got:
                start = time.monotonic()
            got += n
        return got / (time.monotonic() - start)
    finally:
        close()


def classic(bootstrap: str, topic: str, records: int, timeout: float) -> float:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.subscribe([topic])
    return drain(lambda: c.consume(10000, 0.5), c.close, records, timeout, "classic")


def share(bootstrap: str, topic: str, records: int, timeout: float) -> float:
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    group = f"share-{uuid.uuid4().hex[:8]}"
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=[entry])]).values():
        f.result(30)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    c.subscribe([topic])
    return drain(lambda: c.poll(0.5), c.close, records, timeout, "share")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    runs: dict[str, list[float]] = {"classic": [], "share": []}
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        broker = RunningBroker(kbroker_spec(name="kbroker-share"), Path(tmp), partitions=PARTITIONS)
        try:
            broker.wait_ready()
            topic = f"share-bench-{uuid.uuid4().hex[:8]}"
            fill(broker.bootstrap, topic, args.records, args.size)
            for _ in range(args.repeats):
                for name, run in (("classic", classic), ("share", share)):
                    rate: Any = run(broker.bootstrap, topic, args.records, args.timeout)
                    runs[name].append(round(rate))
                    print(f"{name:8s} {rate:12,.0f} records/s", flush=True)
        finally:
            broker.stop()
    median = {name: statistics.median(rs) for name, rs in runs.items()}
    print(f"median classic {median['classic']:,.0f} records/s, share {median['share']:,.0f} records/s "
          f"({median['share'] / median['classic']:.2f}x classic)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"partitions": PARTITIONS, "records": args.records, "size": args.size,
                                   "runs": runs, "median": median}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
