"""`kbroker serve` as a process: config errors, graceful stop, crash and restart."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kbroker.protocol.messages.api_versions import ApiVersionsRequest

from .conftest import ROOT
from .wire import WireClient, wait_until_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def produce_n(bs: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0)
    assert p.flush(20) == 0


def consume_values(bs: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "x", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
        return out
    finally:
        c.close()


def test_sigterm_exits_zero_with_clean_shutdown_marker(broker_factory, tmp_path) -> None:
    bp = broker_factory().start()
    assert "log.dirs=" in bp.output()
    produce_n(bp.bootstrap_servers, "t", 10)
    bp.signal(signal.SIGTERM)
    assert bp.wait(30) == 0
    assert (tmp_path / "kbroker-logs" / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "kbroker-logs" / "meta.properties").exists()


def test_sigint_exits_zero(broker_factory) -> None:
    bp = broker_factory().start()
    bp.signal(signal.SIGINT)
    assert bp.wait(30) == 0


def test_sigterm_finishes_in_flight_long_poll(broker_factory) -> None:
    from kbroker.protocol.messages.fetch import FetchRequest
    from kbroker.protocol.messages.metadata import MetadataRequest

    bp = broker_factory().start()
    with WireClient(bp.bootstrap_servers) as c:
        c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="lp")]), 9)
        req = FetchRequest(max_wait_ms=20000, min_bytes=1, topics=[FetchRequest.FetchTopic(
            topic="lp", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=1024)])])
        cid = c.send(req, 12)
        with WireClient(bp.bootstrap_servers) as probe:  # a later round trip: the Fetch was read
            probe.call(ApiVersionsRequest(), 0)
        bp.signal(signal.SIGTERM)
        got, resp = c.recv(1, 12)
        assert got == cid and resp.responses[0].partitions[0].error_code == 0
    assert bp.wait(30) == 0


def test_sigkill_then_restart_keeps_data(broker_factory, tmp_path) -> None:
    bp = broker_factory().start()
    produce_n(bp.bootstrap_servers, "durable", 50)
    bp.kill()
    assert not (tmp_path / "kbroker-logs" / ".kafka_cleanshutdown").exists()
    bp2 = broker_factory().start()
    assert consume_values(bp2.bootstrap_servers, "durable", 50) == [b"v%d" % i for i in range(50)]
    produce_n(bp2.bootstrap_servers, "durable", 1)
    assert len(consume_values(bp2.bootstrap_servers, "durable", 51)) == 51


def test_topic_ids_and_cluster_id_survive_restart(broker_factory) -> None:
    from kbroker.protocol.messages.metadata import MetadataRequest

    def describe(bs: str):
        with WireClient(bs) as c:
            r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="ids")]), 12)
            return r.cluster_id, r.topics[0].topic_id

    bp = broker_factory().start()
    before = describe(bp.bootstrap_servers)
    bp.stop()
    bp2 = broker_factory().start()
    assert describe(bp2.bootstrap_servers) == before


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("override", ["num.partitions=many", "listeners=http://x", "auto.create.topics.enable=yes"])
def test_ill_typed_config_exits_2_naming_the_key(override: str) -> None:
    r = run_cli("serve", "--override", override)
    assert r.returncode == 2
    assert override.split("=")[0] in r.stderr


def test_missing_config_file_exits_2(tmp_path) -> None:
    r = run_cli("serve", str(tmp_path / "nope.properties"))
    assert r.returncode == 2 and "nope.properties" in r.stderr


def test_a_taken_port_is_named_with_the_override_that_moves_it(tmp_path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:  # another process's listener
        port = taken.getsockname()[1]
        r = run_cli("serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                    "--override", f"log.dirs={tmp_path}")
    assert r.returncode == 1
    assert (f"kbroker: cannot start: Socket server failed to bind to 127.0.0.1:{port}: "
            "Address already in use") in r.stderr
    assert f"--override listeners=PLAINTEXT://127.0.0.1:{port + 1}" in r.stderr
    assert "Traceback" not in r.stderr


def test_properties_file_and_overrides(tmp_path) -> None:
    from kbroker.protocol.messages.metadata import MetadataRequest

    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        "num.partitions = 4\n"
        "node.id=3\n"
        "num.io.threads=8\n"
        "some.unknown.key=1\n"
    )
    # The file says 4 partitions; the override wins with 5.
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbroker", "serve", str(props),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}",
         "--override", "num.partitions=5"],
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        line = ""
        deadline = time.monotonic() + 30
        warned = False
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            warned = warned or "unknown configuration some.unknown.key" in line
            if "kbroker listening on" in line:
                break
        port = line.split("PLAINTEXT://127.0.0.1:")[1].split()[0]
        bs = f"127.0.0.1:{port}"
        wait_until_ready(bs)
        assert warned
        with WireClient(bs) as c:
            r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="p")]), 9)
        assert len(r.topics[0].partitions) == 5
        assert r.brokers[0].node_id == 3 and r.controller_id == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_recovery_after_an_unclean_shutdown_is_logged(broker_factory: Any) -> None:
    broker = broker_factory({"num.partitions": "1"}).start()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(100):
        producer.produce("recover-me", value=b"v%d" % i)
    assert producer.flush(30) == 0
    broker.kill()
    segment = next((broker.log_dir / "recover-me-0").glob("*.log"))
    size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07torn tail")  # a half-written batch
    broker.start()
    line = next(ln for ln in broker.output().splitlines() if "after an unclean shutdown" in ln)
    assert "scanned " in line and "truncated 17 bytes" in line and " ms" in line
    assert segment.stat().st_size == size
