"""FileDeleter: removes files of deleted segments and partitions after a delay.

A segment removed from its Log is renamed to *.deleted at once; its file descriptor
stays open for file.delete.delay.ms (Kafka's default 60 s) so a Fetch response being
sent with os.sendfile from that fd is never cut short, then the fd is closed and the
files unlinked. Deleted partition directories (<topic>-<partition>.<uuid>-delete) go
the same way.

Lock: `schedule` is called from the event-loop thread; the work runs on one
background thread (or synchronously through run_due(), for tests). A
threading.Condition guards the queue; the tasks touch nothing but their own files.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import shutil
import threading
from collections.abc import Callable

from kbroker.utils.time import Time

log = logging.getLogger(__name__)


class FileDeleter:
    def __init__(self, time: Time, poll_interval_s: float = 0.1) -> None:
        self._time = time
        self._poll = poll_interval_s
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kbroker-file-deleter", daemon=True)
            self._thread.start()

    def schedule(self, delay_ms: int, task: Callable[[], None]) -> None:
        due = self._time.milliseconds() + max(delay_ms, 0)
        with self._cond:
            heapq.heappush(self._queue, (due, next(self._seq), task))
            self._cond.notify()

    def schedule_segment(self, delay_ms: int, close: Callable[[], None], paths: list[str]) -> None:
        def task() -> None:
            close()
            for p in paths:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass

        self.schedule(delay_ms, task)

    def schedule_dir(self, delay_ms: int, path: str) -> None:
        self.schedule(delay_ms, lambda: shutil.rmtree(path, ignore_errors=True))

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def run_due(self, everything: bool = False) -> int:
        """Run the tasks that are due (all of them with everything=True); return how many."""
        done = 0
        while True:
            with self._cond:
                if not self._queue:
                    return done
                if not everything and self._queue[0][0] > self._time.milliseconds():
                    return done
                _, _, task = heapq.heappop(self._queue)
            try:
                task()
            except Exception:  # a failed delete must not stop the others
                log.exception("file deletion failed")
            done += 1

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._cond.wait(self._poll)
            self.run_due()

    def shutdown(self) -> None:
        """Stop the thread and run every pending deletion now."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.run_due(everything=True)
