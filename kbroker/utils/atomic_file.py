"""write_atomically: replace a small file so readers see the old or the new one, whole.

The data goes to `<path>.tmp`, is fsynced, renamed over `path`, and the directory
is fsynced so the rename itself survives a machine crash (Kafka's
Utils.atomicMoveWithFallback + flushDir). Every checkpoint, registry and snapshot
file of the broker is written through this one function.
"""

from __future__ import annotations

import os


def write_atomically(path: str, data: bytes | str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    view = memoryview(data.encode() if isinstance(data, str) else data)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
