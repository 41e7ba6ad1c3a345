"""`kbroker perf produce`: write records as fast as the broker takes them (or at a set rate).

Each producer process runs a tight `producer.produce` loop over a payload pool,
with a deep local queue so librdkafka, not Python, decides the batching. Only
every `sample_every`-th record carries a delivery callback, which records its
latency (`Message.latency()`: produce() call to acknowledgement); the others
cost one C call each. After the run the parent also reports how far the high
watermarks moved (`high_watermark_delta`), a cross-check on records lost
without a report - as far as the broker reports watermarks truthfully (Tansu
0.6 reports the last batch's base offset + 1, so it undercounts there).

`--transactional`: each process is a transactional producer (transactional.id
`kbroker-perf-<run>-<process>`, acks=all, idempotent) that writes
`records_per_transaction` records per transaction. Before each commit it waits for
its records' acknowledgements (flush), so that the time commit_transaction takes is
the EndTxn round trip, reported as `end_txn` latencies (a transaction's records and
its commit are otherwise serial, as in Kafka's own producer).

An idempotent producer (`-X enable.idempotence=true`, not transactional) sends one
warm-up record and waits for its acknowledgement before the clock starts, as a
transactional one waits for its producer id in init_transactions: librdkafka sends no
record before it has a producer id, and one that starts before its first broker
connection is up (as at every start) asks for it again only 500 ms later, a wait the
measured time held otherwise (2000 records to bench/floor's null broker took 0.38 s,
0.01 s with the warm-up). The warm-up records stay in the topic; `high_watermark_delta`
leaves them out.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import KafkaError, Producer

from kbroker.perf import admin
from kbroker.perf.options import PerfOptions
from kbroker.perf.payload import build_pool
from kbroker.perf.stats import LatencySummary, RunSummary
from kbroker.perf.workers import WorkerContext, run_workers

POLL_EVERY_GROUPS = 32


@dataclass(frozen=True)
class ProduceTask:
    options: PerfOptions
    num_records: int
    rate: float  # records/s for this process; <= 0 is unthrottled
    transactional_id: str | None = None


def producer_config(options: PerfOptions) -> dict[str, Any]:
    config = admin.client_config(options.bootstrap_server)
    config.update({
        "acks": "all" if options.acks == "-1" else options.acks,
        "compression.type": options.compression,
        "linger.ms": options.linger_ms,
        "batch.size": options.batch_size,
        "message.max.bytes": max(options.batch_size + 65536, 1_000_000),
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 32_768,
        "enable.idempotence": "false",
        "max.in.flight.requests.per.connection": 5,
    })
    if options.transactional:
        config.update({"acks": "all", "enable.idempotence": "true"})
    config.update(options.client_config)
    return config


def _produce_worker(ctx: WorkerContext, task: ProduceTask) -> dict[str, Any]:
    options = task.options
    pool = build_pool(options.record_size, options.random_pool, options.payload_file)
    slot = ctx.slot()
    latencies: list[float] = []
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
            return
        latency_ms = msg.latency() * 1000.0
        latencies.append(latency_ms)
        slot.add_latency(latency_ms)

    config = producer_config(options)
    if task.transactional_id is not None:
        config["transactional.id"] = task.transactional_id
    producer = Producer(config)
    producer.list_topics(options.topic, timeout=30)
    warm_up = 0
    if task.transactional_id is not None:
        producer.init_transactions(options.timeout_s)
    elif _idempotent(config):
        warm_up = _warm_up(producer, options)
    ctx.barrier.wait(timeout=120)
    start = time.monotonic()
    end_txn_ms: list[float] = []
    if task.transactional_id is None:
        sent_bytes = _produce_loop(producer, options.topic, pool, task, options.sample_every(),
                                   on_delivery, slot, start)
    else:
        sent_bytes = _produce_transactions(producer, pool, task, on_delivery, slot, start, end_txn_ms)
    remaining = _flush(producer, task.num_records, sent_bytes, slot, start + options.timeout_s)
    end = time.monotonic()
    return {
        "records": task.num_records - remaining, "bytes": sent_bytes, "start": start, "end": end,
        "latencies_ms": latencies, "errors": len(errors) + remaining,
        "first_errors": errors[:5], "end_txn_ms": end_txn_ms, "warm_up_records": warm_up,
    }


def _idempotent(config: dict[str, Any]) -> bool:
    return str(config.get("enable.idempotence", "false")).lower() in ("true", "1")


def _warm_up(producer: Producer, options: PerfOptions) -> int:
    """One record sent and acknowledged (so the producer holds its producer id); returns
    the records the topic got (1, or 0 if it was not acknowledged in time)."""
    producer.produce(options.topic, b"kbroker perf warm-up")
    return 1 - producer.flush(options.timeout_s)


def _produce_transactions(producer: Producer, pool: list[bytes], task: ProduceTask, on_delivery: Any,
                          slot: Any, start: float, end_txn_ms: list[float]) -> int:
    """`task.num_records` in transactions of records_per_transaction; returns the bytes sent."""
    options = task.options
    sent = sent_bytes = 0
    while sent < task.num_records:
        count = min(options.records_per_transaction, task.num_records - sent)
        producer.begin_transaction()
        sent_bytes += _produce_loop(producer, options.topic, pool, replace(task, num_records=count),
                                    options.sample_every(), on_delivery, slot, start)
        producer.flush(options.timeout_s)
        began = time.monotonic()
        producer.commit_transaction(options.timeout_s)
        end_txn_ms.append((time.monotonic() - began) * 1000.0)
        sent += count
        _show_progress(slot, sent, sent_bytes, len(producer))
    return sent_bytes


def _produce_loop(
    producer: Producer, topic: str, pool: list[bytes], task: ProduceTask, sample_every: int,
    on_delivery: Any, slot: Any, start: float,
) -> int:
    """Produce `task.num_records` values cycling through `pool`; return the bytes sent.

    The pool is cut into groups of `sample_every` values; the first record of
    a group carries the delivery callback. Per record the loop costs one
    `produce` call (a BufferError, when librdkafka's queue is full, polls and
    retries that record).
    """
    produce, poll = producer.produce, producer.poll
    groups = _groups(pool, sample_every)
    n = task.num_records
    sent = sent_bytes = rounds = 0
    while sent < n:
        for first, rest, group_bytes in groups:
            if sent + 1 + len(rest) > n:
                rest = rest[: n - sent - 1]
                group_bytes = len(first) + sum(map(len, rest))
            _produce_one(produce, poll, topic, first, on_delivery)
            for value in rest:
                try:
                    produce(topic, value)
                except BufferError:
                    _produce_one(produce, poll, topic, value, None)
            sent += 1 + len(rest)
            sent_bytes += group_bytes
            rounds += 1
            if task.rate > 0 or rounds % POLL_EVERY_GROUPS == 0:
                poll(0)
                _show_progress(slot, sent, sent_bytes, len(producer))
            if task.rate > 0:
                ahead = start + sent / task.rate - time.monotonic()
                if ahead > 0:
                    poll(ahead)
            if sent >= n:
                break
    return sent_bytes


def _groups(pool: list[bytes], size: int) -> list[tuple[bytes, list[bytes], int]]:
    """(first, rest, total bytes) groups of `size` values, repeating the pool to fill the last."""
    count = -(-len(pool) // size) * size
    values = [pool[i % len(pool)] for i in range(count)]
    return [
        (values[i], values[i + 1 : i + size], sum(map(len, values[i : i + size])))
        for i in range(0, count, size)
    ]


def _produce_one(produce: Any, poll: Any, topic: str, value: bytes, on_delivery: Any) -> None:
    while True:
        try:
            if on_delivery is None:
                produce(topic, value)
            else:
                produce(topic, value, on_delivery=on_delivery)
            return
        except BufferError:
            poll(0.005)


def _show_progress(slot: Any, sent: int, sent_bytes: int, queued: int) -> None:
    acked = sent - queued
    slot.set_progress(acked, sent_bytes * acked // sent if sent else 0)


def _flush(producer: Producer, sent: int, sent_bytes: int, slot: Any, deadline: float) -> int:
    """Wait for the local queue to drain (or the deadline); return the records still queued."""
    remaining = len(producer)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(min(0.5, max(deadline - time.monotonic(), 0.0)))
        _show_progress(slot, sent, sent_bytes, remaining)
    return remaining


def split(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal non-negative integers."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def run_produce(options: PerfOptions) -> RunSummary:
    partitions = _prepare_topic(options)
    before = admin.watermarks(options.bootstrap_server, options.topic, partitions,
                              security=options.client_config)
    per_process_rate = options.throughput / options.producers if options.throughput > 0 else -1.0
    run_id = uuid.uuid4().hex[:8]
    tasks = [
        ProduceTask(options, count, per_process_rate,
                    f"kbroker-perf-{run_id}-{i}" if options.transactional else None)
        for i, count in enumerate(split(options.num_records, options.producers)) if count > 0
    ]
    results = run_workers(_produce_worker, tasks, options.report_interval_s, options.timeout_s,
                          options.quiet)
    after = admin.watermarks(options.bootstrap_server, options.topic, partitions,
                              security=options.client_config)
    appended = sum(after[p][1] - before[p][1] for p in partitions)
    appended -= sum(r["warm_up_records"] for r in results)
    latencies = [x for r in results for x in r["latencies_ms"]]
    first_errors = [e for r in results for e in r["first_errors"]]
    return RunSummary(
        mode="produce",
        records=sum(r["records"] for r in results),
        bytes=sum(r["bytes"] for r in results),
        elapsed_s=max(r["end"] for r in results) - min(r["start"] for r in results),
        latency=LatencySummary.of(latencies),
        errors=sum(r["errors"] for r in results),
        extra={"high_watermark_delta": appended, "partitions": len(partitions),
               "producers": len(tasks), "first_errors": first_errors[:5],
               **_transactions(options, results)},
    )


def _transactions(options: PerfOptions, results: list[dict[str, Any]]) -> dict[str, Any]:
    if not options.transactional:
        return {}
    end_txn = [x for r in results for x in r["end_txn_ms"]]
    summary = LatencySummary.of(end_txn)
    return {"transactions": len(end_txn), "records_per_transaction": options.records_per_transaction,
            "end_txn_latency": None if summary is None else summary.__dict__}


def _prepare_topic(options: PerfOptions) -> list[int]:
    if options.partitions > 0:
        return admin.ensure_topic(options.bootstrap_server, options.topic, options.partitions,
                                  options.replication_factor, security=options.client_config)
    found = admin.topic_partitions(options.bootstrap_server, options.topic,
                                    security=options.client_config)
    if not found:
        raise SystemExit(f"topic {options.topic} does not exist (give --partitions to create it)")
    return found
