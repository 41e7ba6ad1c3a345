"""Helpers of the operations listener's tests: HTTP against a broker, Prometheus text."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

DEADLINE_S = 30.0


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """(status, body) of a GET; an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def call(url: str, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None, raw: bytes | None = None) -> tuple[int, Any]:
    """(status, JSON answer) of a write request."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def get_json(url: str) -> Any:
    status, body = get(url)
    assert status == 200, (url, status, body[:300])
    return json.loads(body)


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics as {(sample name, sorted labels): value}."""
    status, body = get(url + "/metrics")
    assert status == 200, body[:300]
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def partition_reads(url: str, topic: str) -> float:
    """How many partition reads the broker's Fetches of `topic` made (TotalFetchRequests in
    its /metrics): a Fetch that finds too little parks in the step that read, so once this
    went up after a Fetch was sent, that Fetch is parked (or answered)."""
    found = value(scrape(url), "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                  topic=topic)
    return found or 0.0


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S,
               interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
