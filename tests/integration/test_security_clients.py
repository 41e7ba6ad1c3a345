"""Real clients over every security protocol: confluent-kafka and kcat (librdkafka),
kafka-python and aiokafka, with SSL, mutual TLS, SASL_PLAINTEXT and SASL_SSL, PLAIN and
both SCRAMs. Each produces and reads back its own records through the listener it
authenticated on (Metadata answers with that listener's endpoints)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import uuid

import confluent_kafka
import pytest

from .security_support import (
    endpoint,
    librdkafka_config,
)

pytestmark = pytest.mark.integration

CASES = [
    ("PLAINTEXT", None, None, None, None),
    ("SSL", None, None, None, None),
    ("MTLS", None, None, None, "alice"),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-scram", None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-scram", None),
    ("SASL_SSL", "PLAIN", "admin", "admin-secret", None),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-scram", None),
    ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-scram", None),
]


def _roundtrip(conf: dict, n: int = 200) -> None:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 15000})
    errors: list = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode() * 50, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(20) == 0
    assert errors == [None] * n
    consumer = confluent_kafka.Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = []
        for _ in range(60):
            got += [m for m in consumer.consume(n, timeout=0.5) if m.error() is None]
            if len(got) >= n:
                break
        assert [m.value() for m in got] == [f"v{i}".encode() * 50 for i in range(n)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize(("listener", "mechanism", "user", "password", "cert"), CASES,
                         ids=[f"{c[0]}-{c[1] or c[4] or 'anon'}" for c in CASES])
def test_confluent_kafka(secure_broker, pki, listener, mechanism, user, password, cert) -> None:
    _roundtrip(librdkafka_config(secure_broker, pki, listener, mechanism, user, password, cert))


def _kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize(("listener", "mechanism", "user", "password", "cert"), [
    ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-scram", None),
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", None),
    ("MTLS", None, None, None, "alice"),
], ids=["sasl_ssl-scram512", "sasl_plaintext-plain", "mtls"])
def test_kcat(secure_broker, pki, listener, mechanism, user, password, cert) -> None:
    conf = librdkafka_config(secure_broker, pki, listener, mechanism, user, password, cert)
    opts = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    bs = conf["bootstrap.servers"]
    produced = _kcat("-b", bs, *opts, "-P", "-t", topic, stdin=b"one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat("-b", bs, *opts, "-C", "-t", topic, "-o", "beginning", "-c", "3", "-e")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [b"one", b"two", b"three"]


def _client_ssl(pki, cert: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        ctx.load_cert_chain(str(pki.cert(cert)), str(pki.key(cert)))
    return ctx


def _python_conf(broker, pki, listener, mechanism, user, password, cert) -> dict:
    """kafka-python's and aiokafka's settings (the same names in both)."""
    protocol = {"MTLS": "SSL"}.get(listener, listener)
    conf: dict = {"bootstrap_servers": endpoint(broker, listener), "security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl_context"] = _client_ssl(pki, cert)
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=password)
    return conf


@pytest.mark.parametrize(("listener", "mechanism", "user", "password", "cert"), [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", None),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-scram", None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-scram", None),
    ("MTLS", None, None, None, "bob"),
], ids=["sasl_plaintext-plain", "sasl_ssl-scram256", "sasl_plaintext-scram512", "mtls"])
def test_kafka_python(secure_broker, pki, listener, mechanism, user, password, cert) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = _python_conf(secure_broker, pki, listener, mechanism, user, password, cert)
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    try:
        for i in range(20):
            producer.send(topic, f"m{i}".encode()).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    try:
        got = [m.value for _, m in zip(range(20), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [f"m{i}".encode() for i in range(20)]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password", "cert"), [
    ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-scram", None),
    ("SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret", None),
    ("MTLS", None, None, None, "alice"),
], ids=["sasl_ssl-scram512", "sasl_plaintext-plain", "mtls"])
def test_aiokafka(secure_broker, pki, listener, mechanism, user, password, cert) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    conf = _python_conf(secure_broker, pki, listener, mechanism, user, password, cert)
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(20):
                while len(got) < 20:
                    batch = await consumer.getmany(timeout_ms=500)
                    got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(20)]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), [
    ("SSL", None, None, None),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-scram"),
], ids=["ssl", "sasl_ssl-scram256"])
def test_aiokafka_tls_close_is_answered(secure_broker, pki, listener, mechanism, user,
                                        password) -> None:
    """A client's close_notify is answered with the broker's and the connection closes, as
    Kafka's SslTransportLayer does. asyncio's TLS transport, which aiokafka's connections
    use, waits for that answer when it closes: unanswered, every close of an aiokafka
    client over TLS ended after asyncio's ssl_shutdown_timeout (30 s) with 'SSL shutdown
    timed out' (aiokafka's own test_ssl_consume failed so in its consumer's stop())."""
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    host, port = endpoint(secure_broker, listener).split(":")

    async def run() -> None:
        conn = await create_conn(host, int(port), security_protocol=listener,
                                 ssl_context=_client_ssl(pki, None), sasl_mechanism=mechanism,
                                 sasl_plain_username=user, sasl_plain_password=password)
        response = await conn.send(MetadataRequest([]))
        assert [b[0] for b in response.brokers] == [secure_broker.config.node_id]
        # aiokafka's protocol hides how the connection ended; its stream writer keeps it
        writer = conn._writer
        await conn.close()
        await writer.wait_closed()  # raises what ended the TLS session uncleanly

    asyncio.run(run())


def test_tls_request_before_close_notify_is_handled(secure_broker, pki) -> None:
    """A request in the same read as the client's close_notify is still handled before the
    connection closes, as Kafka handles what it read before the close: an acks=0 Produce
    followed at once by close_notify (one TLS session over a raw socket, both in one send)
    appends its record, and the broker answers the close_notify with its own."""
    from batches import make_batch

    from kbroker.protocol.messages.produce import ProduceRequest

    from .wire import encode_request

    topic = f"close-notify-{uuid.uuid4().hex[:8]}"
    admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": endpoint(secure_broker, "PLAINTEXT")})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 1)]).values():
        f.result(30)
    produce = ProduceRequest(acks=0, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=make_batch([b"last words"]))])])
    host, port = endpoint(secure_broker, "SSL").split(":")
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _client_ssl(pki, None).wrap_bio(incoming, outgoing, server_hostname=host)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        while True:  # the handshake
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        sock.sendall(outgoing.read())
        tls.write(encode_request(produce, 9, 1))
        with pytest.raises(ssl.SSLWantReadError):
            tls.unwrap()  # our close_notify, after the request
        sock.sendall(outgoing.read())
        while data := sock.recv(65536):  # until the broker closes
            incoming.write(data)
        tls.unwrap()  # the broker's close_notify came: a clean TLS close
    consumer = confluent_kafka.Consumer({"bootstrap.servers": endpoint(secure_broker, "PLAINTEXT"),
                                         "group.id": topic})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                   timeout=20)
    finally:
        consumer.close()
    assert (low, high) == (0, 1)
