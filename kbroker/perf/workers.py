"""Worker processes for the perf tool: start them together, show progress, gather results.

Each worker owns one slot of a shared array of doubles and writes only there;
the parent only reads, except that it zeroes the window maximum after each
progress line (a benign race: at most one sample's maximum is lost).

Slot layout (SLOT_SIZE doubles per worker)::

    [RECORDS, BYTES, LATENCY_SUM_MS, LATENCY_COUNT, WINDOW_MAX_MS]

Processes are spawned, not forked: the parent may hold librdkafka threads.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kbroker.perf.stats import progress_line

RECORDS, BYTES, LATENCY_SUM_MS, LATENCY_COUNT, WINDOW_MAX_MS = range(5)
SLOT_SIZE = 5


class Slot:
    """A worker's view of its own counters."""

    def __init__(self, array: Any, index: int) -> None:
        self._array = array
        self._base = index * SLOT_SIZE

    def set_progress(self, records: int, nbytes: int) -> None:
        self._array[self._base + RECORDS] = records
        self._array[self._base + BYTES] = nbytes

    def add_latency(self, latency_ms: float) -> None:
        base = self._base
        self._array[base + LATENCY_SUM_MS] += latency_ms
        self._array[base + LATENCY_COUNT] += 1
        if latency_ms > self._array[base + WINDOW_MAX_MS]:
            self._array[base + WINDOW_MAX_MS] = latency_ms


@dataclass
class WorkerContext:
    """What every worker receives besides its own task."""

    index: int
    workers: int
    counters: Any
    barrier: Any
    results: Any

    def slot(self) -> Slot:
        return Slot(self.counters, self.index)

    def total_records(self) -> int:
        """Records done by all workers together (as they last reported)."""
        return int(sum(self.counters[i * SLOT_SIZE + RECORDS] for i in range(self.workers)))


def _entry(target: Callable[..., dict[str, Any]], ctx: WorkerContext, task: Any) -> None:
    try:
        result = target(ctx, task)
    except BaseException as exc:  # reported to the parent, which fails the run
        try:
            ctx.barrier.abort()
        finally:
            ctx.results.put({"index": ctx.index, "error": f"{type(exc).__name__}: {exc}"})
        return
    result["index"] = ctx.index
    ctx.results.put(result)


class _Progress:
    def __init__(self, counters: Any, workers: int, interval_s: float, quiet: bool) -> None:
        self.counters = counters
        self.workers = workers
        self.interval_s = interval_s
        self.quiet = quiet
        self.last_time = time.monotonic()
        self.last_records = 0.0
        self.last_bytes = 0.0
        self.last_lat_sum = 0.0
        self.last_lat_count = 0.0

    def _total(self, field: int) -> float:
        return float(sum(self.counters[i * SLOT_SIZE + field] for i in range(self.workers)))

    def reset(self) -> None:
        self.last_time = time.monotonic()

    def maybe_report(self) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last_time < self.interval_s:
            return
        records, nbytes = self._total(RECORDS), self._total(BYTES)
        lat_sum, lat_count = self._total(LATENCY_SUM_MS), self._total(LATENCY_COUNT)
        window_max = max(self.counters[i * SLOT_SIZE + WINDOW_MAX_MS] for i in range(self.workers))
        for i in range(self.workers):
            self.counters[i * SLOT_SIZE + WINDOW_MAX_MS] = 0.0
        samples = lat_count - self.last_lat_count
        avg = (lat_sum - self.last_lat_sum) / samples if samples > 0 else None
        line = progress_line(
            int(records - self.last_records), int(nbytes - self.last_bytes),
            now - self.last_time, avg, window_max if samples > 0 else None,
        )
        print(line, file=sys.stderr, flush=True)
        self.last_time, self.last_records, self.last_bytes = now, records, nbytes
        self.last_lat_sum, self.last_lat_count = lat_sum, lat_count


def run_workers(
    target: Callable[..., dict[str, Any]],
    tasks: Sequence[Any],
    report_interval_s: float,
    timeout_s: float,
    quiet: bool = False,
    on_started: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Run `target(ctx, task)` in one spawned process per task; return their result dicts.

    Workers call `ctx.barrier.wait()` when ready so they start together;
    `on_started` runs in the parent once they have. Raises RuntimeError if a
    worker fails and TimeoutError after `timeout_s`.
    """
    context = mp.get_context("spawn")
    n = len(tasks)
    counters = context.RawArray("d", n * SLOT_SIZE)
    barrier = context.Barrier(n + 1)
    results: Any = context.Queue()
    processes = [
        context.Process(
            target=_entry,
            args=(target, WorkerContext(i, n, counters, barrier, results), task),
            daemon=True,
        )
        for i, task in enumerate(tasks)
    ]
    for process in processes:
        process.start()
    try:
        return _gather(processes, barrier, results, counters, report_interval_s, timeout_s,
                       quiet, on_started)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(5)


def _gather(
    processes: list[Any], barrier: Any, results: Any, counters: Any, report_interval_s: float,
    timeout_s: float, quiet: bool, on_started: Callable[[], None] | None,
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    gathered: list[dict[str, Any]] = []
    try:
        barrier.wait(timeout=min(timeout_s, 120.0))
    except Exception as exc:
        gathered.extend(_drain(results))
        errors = [r["error"] for r in gathered if "error" in r]
        message = "; ".join(errors or ["timeout"])
        raise RuntimeError(f"perf workers failed to start: {message}") from exc
    if on_started is not None:
        on_started()
    progress = _Progress(counters, len(processes), report_interval_s, quiet)
    progress.reset()
    while len(gathered) < len(processes):
        if time.monotonic() > deadline:
            raise TimeoutError(f"perf workers did not finish within {timeout_s} s")
        try:
            gathered.append(results.get(timeout=0.2))
        except queue.Empty:
            if not any(p.is_alive() for p in processes) and results.empty():
                raise RuntimeError("a perf worker died without a result") from None
        progress.maybe_report()
    errors = [r["error"] for r in gathered if "error" in r]
    if errors:
        raise RuntimeError("perf worker failed: " + "; ".join(errors))
    return sorted(gathered, key=lambda r: r["index"])


def _drain(results: Any) -> list[dict[str, Any]]:
    drained = []
    while True:
        try:
            drained.append(results.get(timeout=0.5))
        except queue.Empty:
            return drained
