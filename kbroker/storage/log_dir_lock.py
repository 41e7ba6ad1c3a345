"""LogDirLocks: one broker process per log directory, by Kafka's `.lock` file.

Kafka's LogManager takes an exclusive lock on `<log dir>/.lock` for its whole life
and refuses to start when another process holds it ("Failed to acquire lock on
file .lock in <dir>. A Kafka instance in another process or thread is using this
directory."). kbroker does the same with flock(2), which conflicts between any two
open file descriptions, so two Brokers embedded in one process exclude each other
too. The lock goes with the descriptor: a killed broker leaves nothing to clean up.
"""

from __future__ import annotations

import fcntl
import os

from kbroker.storage.errors import KafkaStorageError

LOCK_FILE = ".lock"


class LogDirLocks:
    def __init__(self) -> None:
        self._fds: list[int] = []

    def acquire(self, log_dirs: list[str]) -> None:
        """Create each dir if needed and lock it; raise LogDirLockedError naming the first
        dir another broker holds (after releasing the ones taken here)."""
        try:
            for d in log_dirs:
                os.makedirs(d, exist_ok=True)
                fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise LogDirLockedError(os.path.abspath(d)) from None
                self._fds.append(fd)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing the only descriptor of the open file drops the flock
        self._fds.clear()


class LogDirLockedError(KafkaStorageError):
    """Another broker holds `log_dir` (Kafka's message, naming the dir)."""

    def __init__(self, log_dir: str) -> None:
        super().__init__(f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. "
                         "A broker in another process or thread is using this directory.")
        self.log_dir = log_dir
