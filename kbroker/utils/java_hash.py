"""Java's hash functions where Kafka's placement depends on them: a group's
__consumer_offsets partition (String.hashCode, Utils.abs) and a partition's replica
fetcher."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1 << 16)
def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed int32. Cached: the
    coordinators hash the same group and transactional ids on every request (a
    transaction's requests, markers and log writes hashed its id 15 times)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)
