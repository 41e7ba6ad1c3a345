"""`kbroker perf consume`: read records from the beginning of every partition, as fast as possible.

The partitions are dealt out round-robin to `consumers` processes; each
assigns its partitions from the beginning (no group membership, no commits)
and pulls `consume(num_messages=...)` batches until all processes together
have read `num_records` (each reads the others' counts from the shared
progress array), or nothing arrived for `idle_timeout_s`. Targets do not come
from the high watermarks: Tansu 0.6 reports the base offset of the last
batch + 1 there, so they undercount. consume() waits until it has
`num_messages` or times out, so a process never asks for more than it wants.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition

from kbroker.perf import admin
from kbroker.perf.options import PerfOptions
from kbroker.perf.stats import RunSummary
from kbroker.perf.workers import WorkerContext, run_workers

BATCH_RECORDS = 10_000


@dataclass(frozen=True)
class ConsumeTask:
    options: PerfOptions
    partitions: list[int]


def consumer_config(options: PerfOptions) -> dict[str, Any]:
    config = admin.client_config(options.bootstrap_server)
    config.update({
        "group.id": f"kbroker-perf-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
        "auto.offset.reset": "earliest",
        "enable.partition.eof": "false",
        "fetch.wait.max.ms": 100,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 262_144,
        "queued.min.messages": 1_000_000,
    })
    config.update(options.client_config)
    return config


def _consume_worker(ctx: WorkerContext, task: ConsumeTask) -> dict[str, Any]:
    options = task.options
    slot = ctx.slot()
    consumer = Consumer(consumer_config(options))
    consumer.assign([TopicPartition(options.topic, p, OFFSET_BEGINNING) for p in task.partitions])
    ctx.barrier.wait(timeout=120)
    start = last_data = time.monotonic()
    deadline = start + options.timeout_s
    records = nbytes = errors = batches = 0
    value_of, error_of = Message.value, Message.error
    wanted = options.num_records
    while True:
        missing = wanted - (ctx.total_records() if ctx.workers > 1 else records)
        now = time.monotonic()
        if missing <= 0 or now > deadline or now - last_data > options.idle_timeout_s:
            break
        messages = consumer.consume(min(BATCH_RECORDS, missing), timeout=0.5)
        if not messages:
            continue
        last_data = time.monotonic()
        if any(map(error_of, messages)):
            errors += sum(1 for m in messages if m.error() is not None)
            messages = [m for m in messages if m.error() is None]
        records += len(messages)
        nbytes += sum(map(len, map(value_of, messages)))  # type: ignore[arg-type]
        batches += 1
        slot.set_progress(records, nbytes)
    end = last_data if records else time.monotonic()
    consumer.close()
    return {"records": records, "bytes": nbytes, "start": start, "end": end, "errors": errors,
            "batches": batches}


def run_consume(options: PerfOptions) -> RunSummary:
    partitions = admin.topic_partitions(options.bootstrap_server, options.topic,
                                    security=options.client_config)
    if not partitions:
        raise SystemExit(f"topic {options.topic} does not exist")
    tasks = plan_consumers(options, partitions)
    results = run_workers(_consume_worker, tasks, options.report_interval_s, options.timeout_s,
                          options.quiet)
    records = sum(r["records"] for r in results)
    return RunSummary(
        mode="consume",
        records=records,
        bytes=sum(r["bytes"] for r in results),
        elapsed_s=max(r["end"] for r in results) - min(r["start"] for r in results),
        latency=None,
        errors=sum(r["errors"] for r in results) + max(0, options.num_records - records),
        extra={"partitions": len(partitions), "consumers": len(tasks),
               "fetch_batches": sum(r["batches"] for r in results)},
    )


def plan_consumers(options: PerfOptions, partitions: list[int]) -> list[ConsumeTask]:
    """Deal partitions round-robin to at most `consumers` processes."""
    ordered = sorted(partitions)
    count = min(options.consumers, len(ordered))
    return [ConsumeTask(options, ordered[i::count]) for i in range(count)]
