"""A producer held to its producer_byte_rate: the rate it reaches against the quota.

Each repeat starts a fresh embedded Broker (quota.window.num windows of 1 s, 2 by
default: the rate settles within a second or two; with Kafka's 11 the first 10 s may
burst to 10 s worth of quota), sets producer_byte_rate for the client id `limited`
(AlterClientQuotas, as Kafka's admin tools send it), and runs one confluent-kafka
producer of 1000 B records as fast as librdkafka takes them for `--seconds`. The first
second runs ahead (the first window's rate is spread over quota.window.num - 1 windows
at least, as Kafka's); the rate is measured over the acknowledgements after it, and
reported against the quota with librdkafka's statistics of the throttle_time_ms the
broker answered (max and sum). tests/integration/test_quotas.py checks the throttle the
broker computes; this measures what it does to a producer's rate on this machine
(within 10 % of the quota on an idle machine; a busy one can only be slower).

    python bench/bench_quotas.py                         # 512 KiB/s, 7 s, 3 repeats
    python bench/bench_quotas.py --quota 1048576 --seconds 10 --repeats 5

Results: bench/results/quotas.json (every run, the median ratio to the quota).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka

from kbroker.broker import Broker
from kbroker.client.connection import BrokerConnection
from kbroker.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as A

RESULTS = Path(__file__).resolve().parent / "results" / "quotas.json"
RECORD = b"x" * 1000
CLIENT_ID = "limited"


def set_quota(broker: Broker, quota: float) -> None:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        response = conn.request(A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="client-id", entity_name=CLIENT_ID)],
            ops=[A.OpData(key="producer_byte_rate", value=quota, remove=False)])]), 1)
    if response.entries[0].error_code:
        raise RuntimeError(f"AlterClientQuotas: {response.entries[0].error_code}")


def run(quota: float, seconds: float, windows: int) -> dict[str, Any]:
    """One fresh broker, one producer for `seconds`; what it reached."""
    with tempfile.TemporaryDirectory(prefix="bench-quotas-") as d, Broker({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": d,
            "quota.window.num": str(windows)}) as broker:
        set_quota(broker, quota)
        stats: list[str] = []
        producer = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "client.id": CLIENT_ID,
            "linger.ms": 5, "statistics.interval.ms": 500, "stats_cb": stats.append,
            "queue.buffering.max.kbytes": 64})
        delivered: list[float] = []  # when each record was acknowledged
        start = time.monotonic()
        while time.monotonic() < start + seconds:
            try:
                producer.produce("quota-topic", RECORD,
                                 on_delivery=lambda e, m: delivered.append(time.monotonic()))
            except BufferError:
                producer.poll(0.01)
        producer.flush(60)
    steady = [t for t in delivered if start + 1 <= t < start + seconds]
    rate = len(steady) * len(RECORD) / (seconds - 1)
    throttles = [b.get("throttle", {}) for s in stats for b in json.loads(s)["brokers"].values()]
    return {"quota_bytes_per_s": quota, "bytes_per_s": rate, "ratio": rate / quota,
            "records": len(delivered),
            "throttle_max_ms": max((t.get("max", 0) for t in throttles), default=0),
            "throttle_sum_ms": sum(t.get("sum", 0) for t in throttles)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quota", type=float, default=512 * 1024, help="bytes/s")
    parser.add_argument("--seconds", type=float, default=7.0)
    parser.add_argument("--windows", type=int, default=2, help="quota.window.num")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS, help="the JSON file")
    args = parser.parse_args(argv)
    runs = []
    print(f"{'run':>4} {'quota B/s':>12} {'produced B/s':>13} {'ratio':>6} "
          f"{'throttle max ms':>16} {'throttle sum ms':>16}")
    for i in range(args.repeats):
        r = run(args.quota, args.seconds, args.windows)
        runs.append(r)
        print(f"{i + 1:>4} {r['quota_bytes_per_s']:>12.0f} {r['bytes_per_s']:>13.0f} "
              f"{r['ratio']:>6.3f} {r['throttle_max_ms']:>16} {r['throttle_sum_ms']:>16}")
    summary = {"settings": {k: v for k, v in vars(args).items() if k != "output"}, "runs": runs,
               "median_ratio": statistics.median(r["ratio"] for r in runs)}
    print(f"median produced/quota: {summary['median_ratio']:.3f}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
