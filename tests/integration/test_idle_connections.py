"""An idle connection costs the broker at most 16 KB of memory.

1,000 clients connect, each asks ApiVersions once and stays connected; the broker's
resident memory grows by less than 16 KB per connection (it was about 65 KB when
each connection kept its own 64 KB receive buffer).
"""

from __future__ import annotations

import resource
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from brokers import _recv_exact, api_versions_v0_request  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONNECTIONS = 1000


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")))


def test_idle_connections_cost_at_most_16_kb_each(broker_factory: Any) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < CONNECTIONS + 100:
        pytest.skip("open-file limit too low for the client side")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, CONNECTIONS + 100), hard))
    broker = broker_factory().start()
    pid = broker.proc.pid
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    warm = socket.create_connection(("127.0.0.1", port))  # first use allocates shared buffers
    warm.sendall(api_versions_v0_request(0))
    _recv_exact(warm, int.from_bytes(_recv_exact(warm, 4), "big"))
    before = rss_kb(pid)
    socks = []
    try:
        for i in range(CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(api_versions_v0_request(i))
            socks.append(s)
        for s in socks:  # every connection served once, then idle
            _recv_exact(s, int.from_bytes(_recv_exact(s, 4), "big"))
        per_connection = (rss_kb(pid) - before) * 1024 / CONNECTIONS
        assert per_connection <= 16 * 1024, f"{per_connection:.0f} bytes per idle connection"
    finally:
        for s in socks:
            s.close()
        warm.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
