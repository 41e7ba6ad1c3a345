"""Lines librdkafka logs on its own that a test of quiet output expects.

kbroker answers GetTelemetrySubscriptions (client metrics, KIP-714,
docs/client-metrics.md), so each librdkafka client logs at INFO the instance id the
broker gave it ("GETSUBSCRIPTIONS ... Telemetry client instance id changed from
AAAAAAAAAAAAAAAAAAAAAA to ..."), as it does against any Kafka with client metrics on.
"""

from __future__ import annotations

import re
from collections.abc import Generator

import pytest

# librdkafka's INFO line at its first GetTelemetrySubscriptions answer; the client name is
# client.id#producer-N (rdkafka when client.id is not set)
TELEMETRY_INSTANCE_ID = re.compile(
    r"%6\|[\d.]+\|GETSUBSCRIPTIONS\|[^|#\s]+#[\w-]+\| \[thrd:main\]: Telemetry client instance "
    r"id changed from A{22} to [A-Za-z0-9+/]{22}\n")


def without_telemetry_instance_ids(stderr: str) -> str:
    """`stderr` less librdkafka's telemetry instance id lines."""
    return TELEMETRY_INSTANCE_ID.sub("", stderr)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's captured stderr is shown without those lines: every client a test
    made logs one, and hundreds of them bury the lines that tell what went wrong."""
    report = yield
    report.sections = [(title, without_telemetry_instance_ids(text) if "stderr" in title else text)
                       for title, text in report.sections]
    return report
