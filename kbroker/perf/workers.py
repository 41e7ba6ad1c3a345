"""Worker processes for the perf tool: start them together, show progress, gather results.

Each worker owns one slot of a shared array of doubles and writes only there;
the parent only reads, except that it zeroes the window maximum after each
progress line (a benign race: at most one sample's maximum is lost).

Slot layout (SLOT_SIZE doubles per worker)::

    [RECORDS, BYTES, LATENCY_SUM_MS, LATENCY_COUNT, WINDOW_MAX_MS, MAX_MS]

Processes are spawned, not forked: the parent may hold librdkafka threads.

The parent owns the workers' lifetime: however it ends (the run done, an error,
SIGTERM or SIGINT, which `stop_on_signals` turns into PerfStopped), run_workers
kills and reaps them before it returns or raises. A worker ignores SIGINT (a
Ctrl-C reaches the whole process group; the parent decides) and asks the kernel
for SIGKILL when its parent dies (PR_SET_PDEATHSIG), so not even a SIGKILLed
parent leaves load running. A PerfStopped carries the counters as they stood
(`partial`), which the command line prints as a partial summary.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kbroker.perf.stats import progress_line

RECORDS, BYTES, LATENCY_SUM_MS, LATENCY_COUNT, WINDOW_MAX_MS, MAX_MS = range(6)
SLOT_SIZE = 6
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class PerfStopped(BaseException):
    """The run was stopped by a signal; `partial` holds what the workers had done by then.

    A BaseException, as KeyboardInterrupt is: no `except Exception` on the way swallows it.
    """

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.partial: dict[str, Any] | None = None


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise PerfStopped in the main thread (once: a second signal
    during the clean-up is ignored); the previous handlers come back afterwards."""
    def stop(signum: int, _frame: Any) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise PerfStopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
        if latency_ms > self._array[base + MAX_MS]:
            self._array[base + MAX_MS] = latency_ms


@dataclass
class WorkerContext:
    """What every worker receives besides its own task."""

    index: int
    workers: int
    counters: Any
    barrier: Any
    results: Any
    parent_pid: int

    def slot(self) -> Slot:
        return Slot(self.counters, self.index)

    def total_records(self) -> int:
        """Records done by all workers together (as they last reported)."""
        return int(sum(self.counters[i * SLOT_SIZE + RECORDS] for i in range(self.workers)))


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the parent dies (Linux; elsewhere the parent's own
    clean-up is all there is), and exit now if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


@contextmanager
def _signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back while workers start: a child inherits the mask, so
    a Ctrl-C to the process group cannot interrupt its interpreter before `_entry`
    ignores SIGINT; the parent handles the signal once the mask is lifted."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _entry(target: Callable[..., dict[str, Any]], ctx: WorkerContext, task: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    _die_with_parent(ctx.parent_pid)
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

    def partial(self, started: float | None) -> dict[str, Any]:
        """The counters so far, for a run stopped early (no percentiles: the samples stay
        in the workers)."""
        count = self._total(LATENCY_COUNT)
        return {
            "records": int(self._total(RECORDS)), "bytes": int(self._total(BYTES)),
            "elapsed_s": time.monotonic() - started if started is not None else 0.0,
            "latency_count": int(count),
            "latency_avg_ms": self._total(LATENCY_SUM_MS) / count if count else None,
            "latency_max_ms": max(self.counters[i * SLOT_SIZE + MAX_MS]
                                  for i in range(self.workers)) if count else None,
            "started": started is not None,
        }

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
    worker fails, TimeoutError after `timeout_s`, and PerfStopped (with its
    `partial` counters) when a signal stops the run; every worker is gone by then.
    """
    context = mp.get_context("spawn")
    n = len(tasks)
    counters = context.RawArray("d", n * SLOT_SIZE)
    barrier = context.Barrier(n + 1)
    results: Any = context.Queue()
    processes = [
        context.Process(
            target=_entry,
            args=(target, WorkerContext(i, n, counters, barrier, results, os.getpid()), task),
            daemon=True,
        )
        for i, task in enumerate(tasks)
    ]
    progress = _Progress(counters, n, report_interval_s, quiet)
    started: list[float] = []
    try:
        with _signals_blocked():
            for process in processes:
                process.start()
        return _gather(processes, barrier, results, progress, timeout_s, on_started, started)
    except PerfStopped as stop:
        stop.partial = progress.partial(started[0] if started else None)
        raise
    finally:
        _stop(processes)


def _stop(processes: list[Any]) -> None:
    """Kill and reap every worker still running."""
    for process in processes:
        if process.pid is not None and process.is_alive():
            process.kill()
    for process in processes:
        if process.pid is not None:
            process.join(5)


def _gather(
    processes: list[Any], barrier: Any, results: Any, progress: _Progress, timeout_s: float,
    on_started: Callable[[], None] | None, started: list[float],
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
    started.append(time.monotonic())
    if on_started is not None:
        on_started()
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
