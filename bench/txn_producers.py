"""Transactional or idempotent producers of a pure-Python client (kafka-python or aiokafka),
the same workload as `kbroker perf produce` runs with librdkafka, for bench_transactions.py
`--client`:

    python bench/txn_producers.py --client aiokafka --mode transactional \
        --bootstrap-server 127.0.0.1:9092 --topic t --records 200000 --json out.json

Each of `--producers` processes writes its share of `--records` values of `--record-size`
bytes (the perf tool's payload pool) to the topic, acks=all and idempotent, with the perf
tool's batch settings (linger, 1 MB batches). `transactional`: a transactional id per
process, `--records-per-transaction` records per transaction; before each commit the
producer waits for its records' acknowledgements (flush), so the commit's duration is the
EndTxn round trip, as `kbroker perf produce --transactional` measures it. `idempotent`:
one record sent and acknowledged first (the producer id), then the records without a wait.

Every process gets ready (producer id, or the warm-up record) before any starts: the
clock runs from the first process's start to the last one's end (CLOCK_MONOTONIC, the
same in every process). The JSON holds what bench_transactions reads: records,
records_per_s, mb_per_s and the EndTxn latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kbroker.perf import admin  # noqa: E402
from kbroker.perf.payload import build_pool  # noqa: E402

CLIENTS = ("kafka-python", "aiokafka")
MODES = ("idempotent", "transactional")
BATCH_BYTES = 1_000_000
MAX_REQUEST_BYTES = BATCH_BYTES + 65536


def _transactions(records: int, per_transaction: int) -> list[int]:
    """The record count of each transaction."""
    return [min(per_transaction, records - sent) for sent in range(0, records, per_transaction)]


def _config(args: argparse.Namespace, index: int, batch_size_key: str) -> dict[str, Any]:
    """The producer settings both clients take under the same names (batch.size is
    `batch_size_key`: kafka-python's batch_size, aiokafka's max_batch_size)."""
    config: dict[str, Any] = dict(bootstrap_servers=args.bootstrap_server, acks="all", enable_idempotence=True,
                                  linger_ms=args.linger_ms, max_request_size=MAX_REQUEST_BYTES,
                                  **{batch_size_key: BATCH_BYTES})
    if args.mode == "transactional":
        config["transactional_id"] = f"{args.topic}-{index}"
    return config


def _kafka_python(args: argparse.Namespace, index: int, records: int, ready: Any) -> dict[str, Any]:
    from kafka import KafkaProducer

    pool = build_pool(args.record_size, 1000, None)
    producer = KafkaProducer(**_config(args, index, "batch_size"))
    if args.mode == "transactional":
        producer.init_transactions()
    else:
        producer.send(args.topic, b"warm-up").get(timeout=60)
    ready.wait(timeout=120)
    send, end_txn_ms, sent = producer.send, [], 0
    start = time.monotonic()
    if args.mode == "transactional":
        for count in _transactions(records, args.records_per_transaction):
            producer.begin_transaction()
            for i in range(sent, sent + count):
                send(args.topic, pool[i % len(pool)])
            producer.flush()
            began = time.monotonic()
            producer.commit_transaction()
            end_txn_ms.append((time.monotonic() - began) * 1000.0)
            sent += count
    else:
        for i in range(records):
            send(args.topic, pool[i % len(pool)])
    producer.flush()
    end = time.monotonic()
    producer.close()
    return {"start": start, "end": end, "records": records, "end_txn_ms": end_txn_ms}


async def _aiokafka_run(args: argparse.Namespace, index: int, records: int, ready: Any) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    pool = build_pool(args.record_size, 1000, None)
    producer = AIOKafkaProducer(**_config(args, index, "max_batch_size"))
    await producer.start()  # a transactional producer also has its producer id now
    try:
        if args.mode != "transactional":
            await (await producer.send(args.topic, b"warm-up"))
        await asyncio.get_running_loop().run_in_executor(None, ready.wait, 120)
        send, end_txn_ms, sent = producer.send, [], 0
        start = time.monotonic()
        if args.mode == "transactional":
            for count in _transactions(records, args.records_per_transaction):
                await producer.begin_transaction()
                for i in range(sent, sent + count):
                    await send(args.topic, pool[i % len(pool)])
                await producer.flush()
                began = time.monotonic()
                await producer.commit_transaction()
                end_txn_ms.append((time.monotonic() - began) * 1000.0)
                sent += count
        else:
            for i in range(records):
                await send(args.topic, pool[i % len(pool)])
        await producer.flush()
        end = time.monotonic()
    finally:
        await producer.stop()
    return {"start": start, "end": end, "records": records, "end_txn_ms": end_txn_ms}


def _worker(args: argparse.Namespace, index: int, records: int, ready: Any, out: Any) -> None:
    if args.client == "kafka-python":
        result = _kafka_python(args, index, records, ready)
    else:
        result = asyncio.run(_aiokafka_run(args, index, records, ready))
    out.put(result)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--client", choices=CLIENTS, required=True)
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--records-per-transaction", type=int, default=1000)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    admin.ensure_topic(args.bootstrap_server, args.topic, args.partitions)
    shares = [args.records // args.producers + (1 if i < args.records % args.producers else 0)
              for i in range(args.producers)]
    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Barrier(args.producers), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(args, i, n, ready, out)) for i, n in enumerate(shares)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=args.timeout) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    seconds = max(r["end"] for r in results) - min(r["start"] for r in results)
    records = sum(r["records"] for r in results)
    end_txn = sorted(x for r in results for x in r["end_txn_ms"])
    doc: dict[str, Any] = {
        "client": args.client, "mode": args.mode, "records": records, "seconds": seconds,
        "records_per_s": records / seconds, "mb_per_s": records * args.record_size / seconds / 1e6,
    }
    if end_txn:
        doc["end_txn_latency"] = {
            "avg_ms": statistics.fmean(end_txn), "max_ms": end_txn[-1], "transactions": len(end_txn),
            "percentiles_ms": {"p50": end_txn[len(end_txn) // 2], "p99": end_txn[int(len(end_txn) * 0.99)]}}
    args.json.write_text(json.dumps(doc))
    print(f"{args.client} {args.mode}: {doc['records_per_s']:,.0f} records/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
