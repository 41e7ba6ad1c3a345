"""RequestMetrics: Kafka's RequestChannel metrics (kafka.network:type=RequestMetrics), per API.

Fed by the request log's one measurement point (RequestLog.completed, with a
LoggedRequest's times: kbroker.server.request_logger): while the operations listener
serves /metrics, every request is followed from its read to its last byte written, and
its completion counts here:

    requests[version]       RequestsPerSec{request, version}
    errors[name]            ErrorsPerSec{request, error}: every error code of the
                            response, per partition included, NONE too (as Kafka's
                            errorCounts)
    request_queue, local,   RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs,
    remote, response_queue, ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs:
    send, total             histograms in ms, Kafka's split (request_logger)

Histograms are plain bucket counts (kbroker.utils.histogram: one bisect per time),
rendered by kbroker.ops.metrics as Prometheus histograms: Kafka's JMX histograms are
exported as quantile gauges, which a scrape cannot add up across brokers.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.utils.histogram import Histogram

TIMES = ("request_queue", "local", "remote", "response_queue", "send", "total")


class ApiMetrics:
    """One API's counts and time histograms."""

    __slots__ = ("requests", "errors", *TIMES)

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.errors: dict[int, int] = {}  # error code -> count
        self.request_queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.send = Histogram()
        self.total = Histogram()

    def histogram(self, name: str) -> Histogram:
        found: Histogram = getattr(self, name)
        return found


class RequestMetrics:
    """See the module docstring."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiMetrics] = {}

    def api(self, api_key: int) -> ApiMetrics:
        found = self.apis.get(api_key)
        if found is None:
            found = self.apis[api_key] = ApiMetrics()
        return found

    def completed(self, api_key: int, api_version: int, errors: Mapping[int, int],
                  received_ns: int, started_ns: int, returned_ns: int, ready_ns: int,
                  dequeued_ns: int, end_ns: int) -> None:
        m = self.api(api_key)
        m.requests[api_version] = m.requests.get(api_version, 0) + 1
        counted = m.errors
        for code, n in errors.items():
            counted[code] = counted.get(code, 0) + n
        m.request_queue.observe(max(started_ns - received_ns, 0) / 1e6)
        m.local.observe(max(returned_ns - started_ns, 0) / 1e6)
        m.remote.observe(max(ready_ns - returned_ns, 0) / 1e6)
        m.response_queue.observe(max(dequeued_ns - ready_ns, 0) / 1e6)
        m.send.observe(max(end_ns - dequeued_ns, 0) / 1e6)
        m.total.observe(max(end_ns - received_ns, 0) / 1e6)
