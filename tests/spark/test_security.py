"""The kbroker source and sink on secured listeners, with Spark's Kafka security options.

A broker with every kind of listener (tests/integration/security_support: SSL, SSL with
required client certificates, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512), certificates made with openssl. For each way in, records produced
by confluent-kafka over that listener are read by Spark with the options as Spark
users write them (`kafka.sasl.jaas.config`, PEM stores by file or inline), then
written back by the kbroker sink over the same listener and consumed by
confluent-kafka. Wrong credentials and missing certificates fail the query at once
with an authentication error naming what failed; unsupported settings are refused
naming the key.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.client import AuthenticationError, ConnectionSecurity, KafkaClient
from kbroker.spark.options import OptionError, sink_options, source_options
from kbroker.spark.security import connection_security, security_options
from tests.integration.security_support import endpoint, librdkafka_config
from tests.integration.tls_support import KEY_PASSWORD, Pki
from tests.spark.test_spark_source import produce, read

ck = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(module: str, user: str, password: str) -> str:
    return f'{module} required username="{user}" password="{password}";'


def spark_options(pki: Pki, way: str) -> tuple[str, dict[str, str]]:
    """(listener, Spark options) for each way in the tests use."""
    ca = {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(pki.ca)}
    if way == "sasl_ssl_plain":
        return "SASL_SSL", {**ca, "kafka.security.protocol": "SASL_SSL",
                            "kafka.sasl.mechanism": "PLAIN",
                            "kafka.sasl.jaas.config": jaas(PLAIN, "alice", "alice-secret")}
    if way == "sasl_ssl_scram_512_inline_ca":
        return "SASL_SSL", {"kafka.security.protocol": "SASL_SSL",
                            "kafka.ssl.truststore.type": "PEM",
                            "kafka.ssl.truststore.certificates": pki.ca.read_text(),
                            "kafka.sasl.mechanism": "SCRAM-SHA-512",
                            "kafka.sasl.jaas.config": jaas(SCRAM, "bob", "bob-scram")}
    if way == "sasl_plaintext_scram_256":
        return "SASL_PLAINTEXT", {"kafka.security.protocol": "SASL_PLAINTEXT",
                                  "kafka.sasl.mechanism": "SCRAM-SHA-256",
                                  "kafka.sasl.jaas.config": jaas(SCRAM, "alice", "alice-scram")}
    if way == "mtls_keystore_file":
        return "MTLS", {**ca, "kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
                        "kafka.ssl.keystore.location": str(pki.encrypted_keystore("alice")),
                        "kafka.ssl.key.password": KEY_PASSWORD}
    if way == "mtls_inline_no_hostname_check":
        return "MTLS", {**ca, "kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
                        "kafka.ssl.keystore.key": pki.key("bob").read_text(),
                        "kafka.ssl.keystore.certificate.chain": pki.cert("bob").read_text(),
                        "kafka.ssl.endpoint.identification.algorithm": ""}
    raise KeyError(way)


def consume_values(conf: dict[str, Any], topic: str, n: int, timeout_s: float = 60) -> list[bytes]:
    consumer = ck.Consumer({**conf, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while len(values) < n and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                values.append(m.value())
        return values
    finally:
        consumer.close()


WAYS = ["sasl_ssl_plain", "sasl_ssl_scram_512_inline_ca", "sasl_plaintext_scram_256",
        "mtls_keystore_file", "mtls_inline_no_hostname_check"]


@pytest.mark.parametrize("way", WAYS)
def test_source_and_sink_on_a_secured_listener(spark: Any, secure_broker: Broker, pki: Pki,
                                               way: str) -> None:
    listener, options = spark_options(pki, way)
    servers = endpoint(secure_broker, listener)
    client_conf = {
        "sasl_ssl_plain": librdkafka_config(secure_broker, pki, listener, "PLAIN", "alice",
                                            "alice-secret"),
        "sasl_ssl_scram_512_inline_ca": librdkafka_config(secure_broker, pki, listener,
                                                          "SCRAM-SHA-512", "bob", "bob-scram"),
        "sasl_plaintext_scram_256": librdkafka_config(secure_broker, pki, listener,
                                                      "SCRAM-SHA-256", "alice", "alice-scram"),
    }.get(way) or librdkafka_config(secure_broker, pki, listener, cert="alice")
    topic = f"secure-{way.replace('_', '-')}"
    acked = produce(servers, topic, 200, headers=False, **client_conf)

    df = read(spark, servers, subscribe=topic, **options)
    got = sorted(bytes(r.value) for r in df.select("value").collect())
    assert got == sorted(v["value"] for v in acked.values())

    out = f"{topic}-copy"
    writer = df.selectExpr("key", "value").write.format("kbroker").mode("append")
    for k, v in {"kafka.bootstrap.servers": servers, "topic": out, **options}.items():
        writer = writer.option(k, v)
    writer.save()
    assert sorted(consume_values(client_conf, out, 200)) == got


@pytest.mark.parametrize("way", ["sasl_ssl_plain", "sasl_plaintext_scram_256"])
def test_large_batches_over_tls_and_plaintext(secure_broker: Broker, pki: Pki, way: str) -> None:
    """The sink's Produce requests carry batches of SHARE_RECORDS_BYTES and more as parts of
    their own: gathered by sendmsg in plaintext, joined for TLS (no sendmsg there)."""
    pa = pytest.importorskip("pyarrow")
    from kbroker.protocol.codec import SHARE_RECORDS_BYTES
    from kbroker.spark.sink import RecordBatchProducer

    listener, options = spark_options(pki, way)
    servers = endpoint(secure_broker, listener)
    client_conf = librdkafka_config(secure_broker, pki, listener, *{
        "sasl_ssl_plain": ("PLAIN", "alice", "alice-secret"),
        "sasl_plaintext_scram_256": ("SCRAM-SHA-256", "alice", "alice-scram")}[way])
    topic = f"large-{way.replace('_', '-')}"
    n = 3 * SHARE_RECORDS_BYTES // 100
    values = [b"%08d" % i + bytes(92) for i in range(n)]
    producer = RecordBatchProducer(sink_options({"kafka.bootstrap.servers": servers, "topic": topic,
                                                 "kafka.batch.size": str(4 * SHARE_RECORDS_BYTES),
                                                 **options}))
    try:
        producer.write(pa.RecordBatch.from_arrays(  # one partition: one batch of ~200 KiB
            [pa.array(values, pa.binary()), pa.array([0] * n, pa.int32())],
            names=["value", "partition"]))
    finally:
        producer.close()
    assert producer.batches == 1 and producer.records == n
    assert sorted(consume_values(client_conf, topic, n)) == values


@pytest.mark.parametrize(("listener", "mechanism", "module", "user", "password"), [
    ("SASL_SSL", "SCRAM-SHA-256", SCRAM, "alice", "wrong"),
    ("SASL_PLAINTEXT", "PLAIN", PLAIN, "alice", "wrong"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", SCRAM, "mallory", "x"),
])
def test_wrong_credentials_fail_the_query_with_an_authentication_error(
        spark: Any, secure_broker: Broker, pki: Pki, listener: str, mechanism: str, module: str,
        user: str, password: str) -> None:
    servers = endpoint(secure_broker, listener)
    options = {"kafka.security.protocol": listener, "kafka.sasl.mechanism": mechanism,
               "kafka.sasl.jaas.config": jaas(module, user, password),
               "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(pki.ca)}
    # not retried as a network error would be: the failure is the broker's answer itself,
    # not a request given up "after N retries" (kbroker.client.client)
    with pytest.raises(Exception, match=f"SASL {mechanism} authentication of '{user}'.*"
                                        "Authentication failed") as read_failed:
        read(spark, servers, subscribe="secure-any", **options).count()
    assert " retries" not in str(read_failed.value)
    writer = (spark.range(3).selectExpr("CAST(id AS STRING) AS value").write.format("kbroker")
              .mode("append").option("kafka.bootstrap.servers", servers)
              .option("topic", "secure-any"))
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match="Authentication failed") as write_failed:
        writer.save()
    assert " retries" not in str(write_failed.value)


def test_client_authentication_errors_are_not_retried(secure_broker: Broker, pki: Pki,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """kbroker's client: the broker's own message, at once (a metadata request would
    otherwise retry 20 times), for a bad password, a missing client certificate on a
    listener that requires one, and a broker certificate nobody told it to trust: one
    connection attempt each, never a second."""
    import kbroker.client.client as client_module
    from kbroker.client.connection import BrokerConnection

    attempts: list[tuple[str, int]] = []

    class CountedConnection(BrokerConnection):
        def __init__(self, host: str, port: int, *args: Any, **kwargs: Any) -> None:
            attempts.append((host, port))
            super().__init__(host, port, *args, **kwargs)

    monkeypatch.setattr(client_module, "BrokerConnection", CountedConnection)
    cases = [
        ("SASL_PLAINTEXT", {"kafka.security.protocol": "SASL_PLAINTEXT",
                            "kafka.sasl.mechanism": "SCRAM-SHA-256",
                            "kafka.sasl.jaas.config": jaas(SCRAM, "alice", "nope")},
         "Authentication failed during authentication due to invalid credentials"),
        ("MTLS", {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PEM",
                  "kafka.ssl.truststore.location": str(pki.ca)}, "SSL handshake"),
        ("SSL", {"kafka.security.protocol": "SSL"}, "CERTIFICATE_VERIFY_FAILED"),
        ("SASL_PLAINTEXT", {"kafka.security.protocol": "SASL_PLAINTEXT",
                            "kafka.sasl.mechanism": "SCRAM-SHA-256",
                            "kafka.sasl.jaas.config": jaas(SCRAM, "bob", "bob-scram")},
         "invalid credentials"),  # bob has SCRAM-SHA-512 credentials only
    ]
    for listener, options, message in cases:
        security = connection_security(security_options(options))
        attempts.clear()
        with KafkaClient(endpoint(secure_broker, listener), security=security) as client:
            with pytest.raises(AuthenticationError, match=message):
                client.all_topics()
        assert len(attempts) == 1, (listener, attempts)
    for mechanism, user, password in (("SCRAM-SHA-512", "bob", "bob-scram"),
                                      ("SCRAM-SHA-256", "alice", "alice-scram"),
                                      ("PLAIN", "admin", "admin-secret")):
        security = connection_security(security_options({
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": jaas(SCRAM, user, password)}))
        assert isinstance(security, ConnectionSecurity)
        with KafkaClient(endpoint(secure_broker, "SASL_PLAINTEXT"), security=security) as client:
            assert isinstance(client.all_topics(), list)


SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


@pytest.mark.parametrize(("options", "message"), [
    ({"kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism=GSSAPI \\(Kafka's default\\)"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER"},
     "kafka.sasl.mechanism=OAUTHBEARER is not supported"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
     "kafka.sasl.jaas.config is required"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required '
                                'useKeyTab=true;'}, "kafka.sasl.jaas.config: login module"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": f'{PLAIN} required username="u";'}, "needs username"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="secret-pw"'},
     "kafka.sasl.jaas.config"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/ca.jks"},
     "kafka.ssl.truststore.type defaults to JKS"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PKCS12"},
     "kafka.ssl.truststore.type=PKCS12 is not supported"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "JKS",
      "kafka.ssl.keystore.location": "/k.jks"}, "kafka.ssl.keystore.type=JKS"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
      "kafka.ssl.keystore.location": "/k.pem", "kafka.ssl.keystore.password": "secret-pw"},
     "kafka.ssl.keystore.password is not supported"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
      "kafka.ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"},
     "kafka.ssl.keystore.certificate.chain is required"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PEM",
      "kafka.ssl.truststore.location": "/does/not/exist.pem"},
     "kafka.ssl.truststore.location: cannot load the trust store"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.endpoint.identification.algorithm": "ldaps"},
     "kafka.ssl.endpoint.identification.algorithm=ldaps"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.enabled.protocols": "TLSv1.1"},
     "kafka.ssl.enabled.protocols: TLSv1.1"),
    ({"kafka.security.protocol": "KERBEROS"}, "kafka.security.protocol=KERBEROS"),
    ({"kafka.sasl.login.class": "com.example.Login"}, "kafka.sasl.login.class is not supported"),
])
def test_unsupported_security_settings_are_refused_naming_the_key(
        options: dict[str, str], message: str) -> None:
    lowered = {k.lower(): v for k, v in {**SERVERS, **options}.items()}
    for parse in (lambda: source_options(lowered, False), lambda: sink_options(lowered)):
        with pytest.raises(OptionError, match=message) as e:
            parse()
        assert "secret-pw" not in str(e.value)


def test_security_settings_are_parsed_and_never_shown(pki: Pki,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    opts = source_options({**SERVERS, "kafka.security.protocol": "sasl_ssl",
                           "kafka.sasl.mechanism": "scram-sha-512",
                           "kafka.sasl.jaas.config": jaas(SCRAM, "bob", "pw-123"),
                           "kafka.ssl.truststore.type": "pem",
                           "kafka.ssl.truststore.location": str(pki.ca)}, False).client.security
    assert (opts.protocol, opts.sasl_mechanism, opts.username, opts.password) == \
        ("SASL_SSL", "SCRAM-SHA-512", "bob", "pw-123")
    assert opts.check_hostname and "pw-123" not in repr(opts)
    with caplog.at_level(logging.WARNING, logger="kbroker.spark.options"):
        plain = sink_options({**SERVERS, "kafka.sasl.mechanism": "PLAIN",
                              "kafka.ssl.truststore.location": "/x.pem"}).client.security
    assert plain.protocol == "PLAINTEXT"
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "kafka.sasl.mechanism" in warned and "kafka.ssl.truststore.location" in warned
