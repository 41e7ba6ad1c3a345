"""`kbroker perf e2e`: produce-to-consume latency at a fixed rate.

A consumer process assigns every partition at its log end offset (asked for
before the producer starts) and reads, skipping records stamped before it was ready; the parent then produces `num_records` records at `throughput`
records/s (default 10000/s). Each value starts with the producer's wall clock
in nanoseconds, 8 bytes big-endian (`time.time_ns()`; one host, so one clock):

    value = int64 send_time_ns | payload bytes (pool value, tail cut to record_size)

The consumer subtracts that from its own clock on arrival. Records shorter
than 8 bytes are padded to 8.

The consumer uses `fetch.wait.max.ms=5` (override with -X): a broker that
does not answer a parked Fetch early when data arrives (Tansu 0.6 behaves so)
shows that wait in these figures, as it would to any client.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.perf import admin
from kbroker.perf.consume import consumer_config
from kbroker.perf.options import PerfOptions
from kbroker.perf.payload import build_pool
from kbroker.perf.produce import producer_config
from kbroker.perf.stats import LatencySummary, RunSummary
from kbroker.perf.workers import WorkerContext, run_workers

DEFAULT_RATE = 10_000.0
STAMP = struct.Struct(">q")


@dataclass(frozen=True)
class E2ETask:
    options: PerfOptions
    partitions: list[int]


def _e2e_consumer(ctx: WorkerContext, task: E2ETask) -> dict[str, Any]:
    options = task.options
    slot = ctx.slot()
    config = consumer_config(options)
    config.update({"fetch.wait.max.ms": 5, "group.id": f"kbroker-e2e-{uuid.uuid4().hex[:8]}"})
    config.update(options.client_config)
    consumer = Consumer(config)
    consumer.assign(_end_positions(consumer, options.topic, task.partitions, options.timeout_s))
    consumer.consume(num_messages=1, timeout=0.5)  # connect and start fetching before the go
    go_ns = time.time_ns()  # before the barrier: the producer starts only after it
    ctx.barrier.wait(timeout=120)
    start = last_data = time.monotonic()
    stale = 0
    latencies: list[float] = []
    unpack = STAMP.unpack_from
    records = nbytes = 0
    while records < options.num_records:
        now = time.monotonic()
        if now - start > options.timeout_s or now - last_data > options.idle_timeout_s:
            break
        # consume() waits for all num_messages; drain what is queued, else wait for one.
        messages = consumer.consume(num_messages=1000, timeout=0)
        if not messages:
            first = consumer.poll(0.1)
            messages = [first] if first is not None else []
        for message in messages[: options.num_records - records]:
            if message.error() is not None:
                continue
            arrived = time.time_ns()
            value = message.value()
            sent_ns = unpack(value)[0]  # type: ignore[arg-type]
            if sent_ns < go_ns:  # an older record (a broker that answered the end short)
                stale += 1
                continue
            latency_ms = (arrived - sent_ns) / 1e6
            latencies.append(latency_ms)
            slot.add_latency(latency_ms)
            records += 1
            nbytes += len(value)  # type: ignore[arg-type]
            last_data = time.monotonic()
        slot.set_progress(records, nbytes)
    consumer.close()
    return {"records": records, "bytes": nbytes, "start": start, "end": last_data,
            "latencies_ms": latencies, "stale": stale}


def _end_positions(consumer: Consumer, topic: str, partitions: list[int],
                   timeout_s: float) -> list[TopicPartition]:
    """Each partition at its log end offset, resolved now, before the producer starts.

    Assigning OFFSET_END instead lets librdkafka resolve the end whenever its ListOffsets
    answer arrives; on a loaded machine that can be after the first records were produced,
    which then lie behind the resolved end and are never read.
    """
    ends = []
    for p in partitions:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
        ends.append(TopicPartition(topic, p, high))
    return ends


def run_e2e(options: PerfOptions) -> RunSummary:
    if options.throughput <= 0:
        options = replace(options, throughput=DEFAULT_RATE)
    if options.partitions > 0:
        partitions = admin.ensure_topic(options.bootstrap_server, options.topic,
                                        options.partitions, options.replication_factor,
                                        security=options.client_config)
    else:
        partitions = admin.topic_partitions(options.bootstrap_server, options.topic,
                                    security=options.client_config)
    if not partitions:
        raise SystemExit(f"topic {options.topic} does not exist (give --partitions to create it)")
    producer = Producer(producer_config(options))
    producer.list_topics(options.topic, timeout=30)
    pool = [v.ljust(8, b"\0") for v in
            build_pool(options.record_size, options.random_pool, options.payload_file)]
    sent: dict[str, int] = {}
    task = E2ETask(options, partitions)
    stop = threading.Event()
    thread = threading.Thread(
        target=lambda: sent.update(_paced_produce(producer, options, pool, stop)), daemon=True
    )
    try:
        results = run_workers(_e2e_consumer, [task], options.report_interval_s,
                              options.timeout_s + options.idle_timeout_s, options.quiet,
                              on_started=thread.start)
    except BaseException:  # an error or a signal: the producer stops with the consumer
        stop.set()
        if thread.is_alive():
            thread.join(5)
        raise
    thread.join(options.timeout_s)
    result = results[0]
    return RunSummary(
        mode="e2e",
        records=result["records"],
        bytes=result["bytes"],
        elapsed_s=result["end"] - result["start"],
        latency=LatencySummary.of(result["latencies_ms"]),
        errors=max(0, options.num_records - result["records"]),
        extra={"rate": options.throughput, "produced": sent.get("records", 0),
               "partitions": len(partitions), "stale_records_skipped": result["stale"]},
    )


def _paced_produce(producer: Producer, options: PerfOptions, pool: list[bytes],
                   stop: threading.Event) -> dict[str, int]:
    """Produce at `options.throughput` records/s, stamping each value; flush at the end
    (or, once `stop` is set, return without sending more)."""
    pack = STAMP.pack
    produce, poll = producer.produce, producer.poll
    rate, n, size = options.throughput, options.num_records, len(pool)
    start = time.monotonic()
    sent = 0
    while sent < n:
        if stop.is_set():
            return {"records": sent}
        due = min(n, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            value = pool[sent % size]
            try:
                produce(options.topic, pack(time.time_ns()) + value[8:])
            except BufferError:
                poll(0.001)
                continue
            sent += 1
        poll(0)
        ahead = start + sent / rate - time.monotonic()
        if ahead > 0:
            time.sleep(min(ahead, 0.001))
    producer.flush(options.timeout_s)
    return {"records": sent}
