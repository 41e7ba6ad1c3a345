"""Histogram: counts of times (ms) per bucket, for /metrics (kbroker.ops.metrics).

Kafka's JMX histograms are exported as quantile gauges, which cannot be added up across
brokers; these render as Prometheus histograms (cumulative `le` buckets, a sum and a
count) and give quantiles of an interval (`quantile(q, since=earlier copy)`) for the
console and `kbroker top`. One observation is one bisect and two additions, no lock:
one thread observes (the event loop, or the flush thread); a reader on another thread
may see a count before its sum, never a torn list.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds in ms, from a cached Metadata (~50 µs) to a long-poll Fetch (500 ms and up)
TIME_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                   1000.0, 2500.0, 5000.0, 10000.0, 30000.0)


class Histogram:
    """Counts per bucket (the last: above every bound) and the sum of what was observed."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(TIME_BUCKETS_MS, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, count at or below it) pairs, +Inf last: Prometheus' bucket series."""
        out, running = [], 0
        for bound, n in zip((*TIME_BUCKETS_MS, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out

    def quantile(self, q: float, since: Histogram | None = None) -> float | None:
        """The q-quantile (ms) of what was observed after `since` (a copy taken earlier),
        by linear interpolation within its bucket; None when nothing was observed."""
        counts = self.counts if since is None else [
            a - b for a, b in zip(self.counts, since.counts, strict=True)]
        total = sum(counts)
        if total == 0:
            return None
        rank, running, lower = q * total, 0, 0.0
        for bound, n in zip((*TIME_BUCKETS_MS, TIME_BUCKETS_MS[-1]), counts, strict=True):
            if n and running + n >= rank:
                return lower + (bound - lower) * max(rank - running, 0) / n
            running += n
            lower = bound
        return TIME_BUCKETS_MS[-1]

    def copy(self) -> Histogram:
        other = Histogram()
        other.counts = list(self.counts)
        other.sum = self.sum
        return other
