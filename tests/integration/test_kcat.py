"""kcat (Debian's librdkafka 2.0.2, ApiVersions v3) against a `kbroker serve` subprocess."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(90),
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=30)


def test_metadata_listing(broker_process) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"kc-l-{uuid.uuid4().hex[:8]}"
    assert kcat("-b", bs, "-P", "-t", topic, stdin=b"x\n").returncode == 0
    r = kcat("-b", bs, "-L", "-t", topic)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert "underflow" not in r.stderr.decode()
    assert f'topic "{topic}" with 3 partitions' in out
    assert "(controller)" in out
    assert "partition 0, leader 0, replicas: 0, isrs: 0" in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume(broker_process, codec: str) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"kc-{codec}-{uuid.uuid4().hex[:8]}"
    lines = [f"k{i}:value {i}" for i in range(50)]
    p = kcat("-b", bs, "-P", "-t", topic, "-K:", "-p", "1", "-z", codec,
             stdin=("\n".join(lines) + "\n").encode())
    assert p.returncode == 0, p.stderr.decode()
    c = kcat("-b", bs, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e", "-f", "%o %k=%s\n")
    assert c.returncode == 0, c.stderr.decode()
    got = c.stdout.decode().splitlines()
    assert got == [f"{i} k{i}=value {i}" for i in range(50)]
