"""LiveFigures: the broker's figures once a second, pushed as server-sent events (/api/live).

    GET /api/live    text/event-stream; one event a second:

    data: {"time_ms": 1767225600000, "phase": "RUNNING", "interval_s": 1.0,
           "total": {"messages_in_per_s": 120.0, "bytes_in_per_s": 12000.0,
                     "bytes_out_per_s": 12000.0, "messages_in": 5120, ...},
           "topics": {"orders": {...the same per topic...}},
           "requests": {"Produce": {"per_s": 12.0, "p50_ms": 0.4, "p99_ms": 2.1}, ...},
           "connections": 3, "request_queue": 0}

Rates are over the interval since the previous sample; request latency percentiles are
those of TotalTimeMs over that interval (RequestMetrics' buckets, interpolated), per API
that was answered in it. The first event of a stream has the counts and no rates. A stream's "topics" are those its
user may DESCRIBE (console_auth; as Metadata shows them), decided again at each event.
The console's charts and `kbroker top` read it; sampling runs only while a stream is
open, and a client that reads too slowly misses samples rather than holding memory.

Used from the broker's loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kbroker.cluster.broker_topic_stats import TopicStats
from kbroker.ops.console_auth import context, listener_name
from kbroker.server.authorization import authorized_topics
from kbroker.server.request_json import api_name
from kbroker.utils.histogram import Histogram

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker

SAMPLE_INTERVAL_S = 1.0
QUEUED_SAMPLES = 4  # per stream; older ones are dropped for a slow reader
_RATES = ("messages_in", "bytes_in", "bytes_out")


class _Snapshot:
    def __init__(self, at: float, topics: dict[str, TopicStats], total: TopicStats,
                 latency: dict[int, Histogram]) -> None:
        self.at = at
        self.topics = topics
        self.total = total
        self.latency = latency


class LiveFigures:
    """See the module docstring."""

    def __init__(self, broker: ServedBroker) -> None:
        self.broker = broker
        self._streams: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._previous: _Snapshot | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for queue in self._streams:
            _offer(queue, None)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL_S)
            if self._streams:
                sample = self.sample()
                for queue in self._streams:
                    _offer(queue, sample)
            else:
                self._previous = None

    def _snapshot(self) -> _Snapshot | None:
        state = self.broker.services
        if state is None or not self.broker.running:
            return None
        stats = state.topic_stats
        topics = {name: _copy(s) for name, s in stats.topics()}
        metrics = self.broker.request_metrics
        latency = ({k: m.total.copy() for k, m in metrics.apis.items()}
                   if metrics is not None else {})
        return _Snapshot(time.monotonic(), topics, stats.all_topics(), latency)

    def sample(self, advance: bool = True) -> dict[str, Any]:
        """The figures now, with rates since the previous sample (`advance`), or without
        rates (a new stream's first event, which leaves the others' interval alone)."""
        now = self._snapshot()
        out: dict[str, Any] = {"time_ms": int(time.time() * 1000),
                               "phase": self.broker.phase.name}
        if now is None:
            return out
        before = self._previous if advance else None
        if advance:
            self._previous = now
        interval = now.at - before.at if before is not None else None
        out["interval_s"] = interval
        out["total"] = _rates(now.total, before.total if before else None, interval)
        out["topics"] = {name: _rates(s, before.topics.get(name) if before else None, interval)
                         for name, s in sorted(now.topics.items())}
        requests: dict[str, Any] = {}
        for api_key, hist in sorted(now.latency.items()):
            earlier = before.latency.get(api_key) if before else None
            answered = hist.count - (earlier.count if earlier is not None else 0)
            if before is not None and answered <= 0:
                continue
            requests[api_name(api_key)] = {
                "per_s": answered / interval if interval else None,
                "p50_ms": hist.quantile(0.5, earlier), "p99_ms": hist.quantile(0.99, earlier),
            }
        out["requests"] = requests
        server = self.broker.server
        if server is not None:
            out["connections"] = len(server.connections)
            out["request_queue"] = server.request_queue.requests
        return out

    async def stream(self, request: web.Request) -> web.StreamResponse:
        if self._closing:
            raise web.HTTPServiceUnavailable(text="the broker is shutting down")
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no"})
        await response.prepare(request)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUED_SAMPLES)
        self._streams.add(queue)
        try:
            item: dict[str, Any] | None = self.sample(advance=False)
            while item is not None:
                item = self._visible(request, item)
                await response.write(f"data: {json.dumps(item)}\n\n".encode())
                item = await queue.get()
        except ConnectionResetError:  # the client went away
            pass
        finally:
            self._streams.discard(queue)
        return response


    def _visible(self, request: web.Request, item: dict[str, Any]) -> dict[str, Any]:
        """`item` with only the topics the stream's user may DESCRIBE."""
        services, topics = self.broker.services, item.get("topics")
        if services is None or services.authorizer is None or not topics:
            return item
        user = context(services, request, listener_name(self.broker))
        allowed = authorized_topics(user, "DESCRIBE", topics)
        return {**item, "topics": {n: v for n, v in topics.items() if n in allowed}}


def _offer(queue: asyncio.Queue[dict[str, Any] | None], item: dict[str, Any] | None) -> None:
    if queue.full():
        queue.get_nowait()  # a slow reader loses the oldest sample
    queue.put_nowait(item)


def _copy(stats: TopicStats) -> TopicStats:
    out = TopicStats()
    out.add(stats)
    return out


def _rates(now: TopicStats, before: TopicStats | None, interval: float | None
           ) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {}
    for name in _RATES:
        value = getattr(now, name)
        out[name] = value
        if before is None or not interval:
            out[f"{name}_per_s"] = None
        else:
            out[f"{name}_per_s"] = max(value - getattr(before, name), 0) / interval
    return out
