"""Record values for the perf tool: a pool of distinct random payloads, or lines of a file.

Identical payloads compress about 20x and flatter every codec, so the default
pool holds `random_pool` distinct `os.urandom` values of `record_size` bytes.
A payload file holds one payload per line (as Kafka's `--payload-file`).
"""

from __future__ import annotations

import os


def random_pool(record_size: int, count: int) -> list[bytes]:
    """`count` distinct random payloads of `record_size` bytes (distinct unless tiny)."""
    blob = os.urandom(record_size * count)
    return [blob[i * record_size : (i + 1) * record_size] for i in range(count)]


def file_pool(path: str) -> list[bytes]:
    """Non-empty lines of `path`, without their line ends."""
    with open(path, "rb") as f:
        lines = [line.rstrip(b"\r\n") for line in f]
    values = [line for line in lines if line]
    if not values:
        raise ValueError(f"payload file {path} holds no non-empty lines")
    return values


def build_pool(record_size: int, count: int, payload_file: str | None) -> list[bytes]:
    if payload_file is not None:
        return file_pool(payload_file)
    return random_pool(record_size, count)
