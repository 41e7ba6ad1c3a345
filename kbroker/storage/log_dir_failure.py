"""LogDirFailureChannel: a log directory that failed an I/O operation goes offline.

Kafka's rule (KIP-112, LogDirFailureChannel): the first I/O error on a log dir -
appending, rolling, flushing, writing a checkpoint - marks the whole dir offline.
Its error is logged once with the path; every partition in it then answers
KAFKA_STORAGE_ERROR until a restart, while partitions in other dirs are served as
before. When no dir is left the broker shuts down ("all log dirs have failed").
Nothing written to an offline dir is trusted again without recovery: it gets no
checkpoint and no clean-shutdown marker, so the next start recovers it.

Lock: `report` may be called from any thread (the flush thread reports a failed
fsync); `_lock` guards the offline set and listeners run on the reporting thread,
so they must hand work to the event loop themselves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[str] = set()
        self.listeners: list[Callable[[str], None]] = []

    def is_offline(self, log_dir: str) -> bool:
        with self._lock:
            return log_dir in self._offline

    @property
    def offline_dirs(self) -> set[str]:
        with self._lock:
            return set(self._offline)

    def report(self, log_dir: str, what: str, error: BaseException) -> None:
        """Mark `log_dir` offline after `error` while `what`; the first report logs it."""
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
        log.error("error while %s in log dir %s: %s; the dir is now offline (its partitions answer "
                  "KAFKA_STORAGE_ERROR until a restart)", what, log_dir, error)
        for listener in list(self.listeners):
            listener(log_dir)
