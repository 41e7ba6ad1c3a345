"""write_atomically: replace a small file so readers see the old or the new one, whole.

The data goes to `<path>.tmp`, is fsynced, renamed over `path`, and the directory
is fsynced so the rename itself survives a machine crash (Kafka's
Utils.atomicMoveWithFallback + flushDir). Every checkpoint, registry and snapshot
file of the broker is written through this one function.
"""

from __future__ import annotations

import ctypes
import os


def write_atomically(path: str, data: bytes | str, *, sync: bool = True) -> None:
    """sync=False skips both fsyncs: for a caller that syncs the whole filesystem once
    after writing many files (sync_filesystem), as bulk partition creation does.

    The directory must exist (FileNotFoundError otherwise): a late write for a partition
    whose directory was deleted or moved away must not bring an empty one back."""
    directory = os.path.dirname(os.path.abspath(path))
    view = memoryview(data.encode() if isinstance(data, str) else data)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


_libc = ctypes.CDLL(None, use_errno=True)


def sync_filesystem(directory: str) -> None:
    """Write back every file of the filesystem holding `directory`, in one call
    (syncfs(2)): what one fsync per file and per directory would do, for many at once."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), directory)
    finally:
        os.close(fd)
