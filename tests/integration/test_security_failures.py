"""What the broker does with clients that fail to authenticate, or that are not Kafka
clients at all: each gets an authentication error or a closed connection, and the
broker goes on serving everyone else. Also SASL on the wire (v0 raw tokens, v1+
SaslAuthenticate), the SCRAM credential APIs' errors, credentials across a restart,
and security settings refused at startup naming the key."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time

import confluent_kafka
import pytest

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.config import BrokerConfig, ConfigError
from kbroker.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kbroker.server import authentication_gate

from .security_support import (
    PLAIN_JAAS,
    add_scram_users,
    endpoint,
    librdkafka_config,
    produce_for,
    security_props,
)
from .tls_support import KEY_PASSWORD
from .wire import WireClient, encode_request

pytestmark = pytest.mark.integration


def _client_ssl(pki, cert: str | None = None, ca: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca) if ca else None)
    if not ca:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(str(pki.cert(cert)), str(pki.key(cert)))
    return ctx


def _still_serves(broker, pki) -> None:
    with WireClient(endpoint(broker, "PLAINTEXT")) as c:
        assert c.call(ApiVersionsRequest(), 0).error_code == 0
    with WireClient(endpoint(broker, "SSL"), ssl_context=_client_ssl(pki)) as c:
        assert c.call(ApiVersionsRequest(), 0).error_code == 0


def _auth_error(conf: dict) -> confluent_kafka.KafkaError:
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer({**conf, "error_cb": errors.append,
                                         "message.timeout.ms": 3000, "log_level": 0})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), [
    ("SASL_PLAINTEXT", "PLAIN", "alice", "wrong"),
    ("SASL_PLAINTEXT", "PLAIN", "mallory", "alice-secret"),
    ("SASL_SSL", "SCRAM-SHA-256", "alice", "wrong"),
    ("SASL_SSL", "SCRAM-SHA-512", "mallory", "x"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-scram"),  # bob has SHA-512 only
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "admin-secret"),  # a PLAIN user only
])
def test_wrong_credentials_get_an_authentication_error(secure_broker, pki, listener, mechanism,
                                                       user, password) -> None:
    conf = librdkafka_config(secure_broker, pki, listener, mechanism, user, password)
    err = _auth_error(conf)
    assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION, err
    assert "Authentication failed" in err.str()
    _still_serves(secure_broker, pki)


@pytest.mark.parametrize("cert", ["rogue", "expired", None])
def test_mutual_tls_refuses_untrusted_expired_and_missing_certificates(secure_broker, pki,
                                                                      cert) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with WireClient(endpoint(secure_broker, "MTLS"), ssl_context=_client_ssl(pki, cert)) as c:
            c.call(ApiVersionsRequest(), 0)  # TLS 1.3: the refusal arrives after the handshake
    _still_serves(secure_broker, pki)


def test_an_untrusted_certificate_on_a_requested_listener_is_refused(secure_broker, pki) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with WireClient(endpoint(secure_broker, "SSL"), ssl_context=_client_ssl(pki, "rogue")) as c:
            c.call(ApiVersionsRequest(), 0)


@pytest.mark.parametrize("listener", ["SSL", "MTLS", "SASL_SSL"])
def test_a_plaintext_client_on_a_tls_port_is_closed(secure_broker, pki, listener) -> None:
    with WireClient(endpoint(secure_broker, listener)) as c:
        c.send(ApiVersionsRequest(), 0)
        assert c.is_closed_by_peer()
    _still_serves(secure_broker, pki)


@pytest.mark.parametrize("listener", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_garbage_before_the_handshake_closes_the_connection(secure_broker, pki, listener) -> None:
    with WireClient(endpoint(secure_broker, listener)) as c:
        c.send_raw(os.urandom(3000) + b"\x16\x03\x01\xff\xff" + os.urandom(100))
        assert c.is_closed_by_peer()
    _still_serves(secure_broker, pki)


def test_requests_before_authentication_close_the_connection(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(ApiVersionsRequest(), 0).error_code == 0  # allowed before SASL
        c.send(MetadataRequest(topics=None), 1)
        assert c.is_closed_by_peer()
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        c.send(MetadataRequest(topics=None), 1)  # the first request
        assert c.bytes_before_close() == b""


@pytest.mark.parametrize("after_api_versions", [False, True])
def test_sasl_authenticate_before_the_handshake_closes_unanswered(
        secure_broker, pki, after_api_versions: bool) -> None:
    """Kafka's SaslServerAuthenticator throws IllegalSaslStateException in its handshake
    state before any answer: the connection closes with nothing sent."""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        if after_api_versions:
            assert c.call(ApiVersionsRequest(), 2).error_code == 0
        c.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
        assert c.bytes_before_close() == b""
    _still_serves(secure_broker, pki)


def test_a_second_api_versions_before_the_handshake_closes_unanswered(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        # a version kbroker does not serve is answered UNSUPPORTED_VERSION (v0) and may be
        # retried, as librdkafka does; once one is served a second closes (Kafka:
        # IllegalStateException in handleApiVersionsRequest)
        too_new = bytearray(encode_request(ApiVersionsRequest(), 0, 7))
        struct.pack_into(">h", too_new, 6, 99)
        c.send_raw(bytes(too_new))
        assert c.recv(18, 0)[1].error_code == ErrorCode.UNSUPPORTED_VERSION
        assert c.call(ApiVersionsRequest(), 0).error_code == 0
        c.send(ApiVersionsRequest(), 0)
        assert c.bytes_before_close() == b""


def test_requests_after_a_v1_handshake_but_sasl_authenticate_are_refused_then_closed(
        secure_broker) -> None:
    """After SaslHandshake v1 only SaslAuthenticate is served: another request gets its
    error answer with ILLEGAL_SASL_STATE (Kafka's handleSaslToken), then the close."""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert (r.error_code, r.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert c.bytes_before_close() == b""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert c.call(ApiVersionsRequest(), 0).error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.bytes_before_close() == b""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 1)
        assert r.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.bytes_before_close() == b""


def test_sasl_authenticate_framing_follows_the_handshake_version(secure_broker) -> None:
    """After SaslHandshake v0 every frame is a bare token, a SaslAuthenticate request
    included (PLAIN cannot read it: closed unanswered, as Kafka's raw-token failure);
    after v1 SaslAuthenticate v0 (no session lifetime) authenticates."""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        c.send(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 0)
        assert c.bytes_before_close() == b""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 0)
        assert (r.error_code, r.auth_bytes) == (0, b"")
        assert c.call(MetadataRequest(topics=[]), 4).brokers


def test_unsupported_mechanism_is_answered_then_closed(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        r = c.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert r.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert r.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()


def test_sasl_v1_plain_then_requests_are_served(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert (r.error_code, r.session_lifetime_ms) == (0, 0)
        assert c.call(MetadataRequest(topics=[]), 4).brokers


def test_sasl_requests_after_authentication_are_answered_and_the_connection_stays(
        secure_broker) -> None:
    """Once authenticated the requests reach KafkaApis: SaslAuthenticate answers
    ILLEGAL_SASL_STATE "... after successful authentication" (handleSaslAuthenticateRequest),
    and so does a SaslHandshake when the session has no end to renew
    (handleSaslHandshakeRequest); neither closes the connection."""
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2).error_code == 0
        for version in (0, 1, 2):
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), version)
            assert (r.error_code, r.error_message) == (
                ErrorCode.ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received after successful authentication")
        r = c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert (r.error_code, r.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        assert c.call(MetadataRequest(topics=[]), 4).brokers


def test_sasl_authenticate_after_authentication_leaves_reauthentication_working(
        pki, tmp_path) -> None:
    """With connections.max.reauth.ms a stray SaslAuthenticate is answered ILLEGAL_SASL_STATE
    and the client can still re-authenticate (KIP-368) as itself, but not as another user."""
    broker = Broker(security_props(pki, tmp_path / "logs", **{
        "connections.max.reauth.ms": "600000"})).start()
    try:
        with WireClient(endpoint(broker, "SASL_PLAINTEXT")) as c:
            assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
            assert (r.error_code, r.session_lifetime_ms) == (0, 600000)
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
            assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
            assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
            assert (r.error_code, r.session_lifetime_ms) == (0, 600000)
            assert c.call(MetadataRequest(topics=[]), 4).brokers
            assert c.call(SaslAuthenticateRequest(auth_bytes=b"x"), 2).error_code == \
                ErrorCode.ILLEGAL_SASL_STATE
            assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 1)
            assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert c.is_closed_by_peer()
    finally:
        broker.stop()


def test_sasl_failure_answers_with_kafkas_message_then_closes(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"alice\0alice\0nope"), 1)
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert r.error_message == "Authentication failed: Invalid username or password"
        assert c.is_closed_by_peer()


def test_sasl_v0_raw_tokens(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0admin\0admin-secret"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""  # PLAIN's empty challenge, size-prefixed
        assert c.call(MetadataRequest(topics=[]), 1).brokers
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0admin\0wrong"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()


def test_sasl_handshake_on_a_plaintext_listener_is_illegal(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "PLAINTEXT")) as c:
        r = c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert c.call(SaslAuthenticateRequest(auth_bytes=b"x"), 1).error_code == \
            ErrorCode.ILLEGAL_SASL_STATE


def test_oversized_token_before_authentication_closes(secure_broker) -> None:
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as c:
        c.send_raw(struct.pack(">i", 524288 + 1) + b"\0" * 1024)  # sasl.server.max.receive.size
        assert c.is_closed_by_peer()


def test_unauthenticated_connections_are_closed_after_the_timeout(
        secure_broker, pki, monkeypatch) -> None:
    monkeypatch.setattr(authentication_gate, "AUTHENTICATION_TIMEOUT_S", 0.5)
    with WireClient(endpoint(secure_broker, "SASL_PLAINTEXT")) as sasl_conn, \
            socket.create_connection(("127.0.0.1", int(endpoint(secure_broker, "SSL").split(":")[1]))) as tls_conn:
        assert sasl_conn.call(ApiVersionsRequest(), 0).error_code == 0
        assert sasl_conn.is_closed_by_peer(timeout=5)
        tls_conn.settimeout(5)
        assert tls_conn.recv(100) == b""  # a TLS client that never sends its hello


def test_scram_credential_api_errors(secure_broker) -> None:
    Up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    Del = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    with WireClient(endpoint(secure_broker, "PLAINTEXT")) as c:
        r = c.call(AlterUserScramCredentialsRequest(deletions=[
            Del(name="nobody", mechanism=1), Del(name="carol", mechanism=9)], upsertions=[
            Up(name="dave", mechanism=1, iterations=100, salt=b"s", salted_password=b"p"),
            Up(name="erin", mechanism=2, iterations=99999, salt=b"s", salted_password=b"p"),
            Up(name="frank", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
            Up(name="frank", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
        ]), 0)
        codes = {x.user: x.error_code for x in r.results}
        assert codes == {"nobody": ErrorCode.RESOURCE_NOT_FOUND,
                         "carol": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                         "dave": ErrorCode.UNACCEPTABLE_CREDENTIAL,
                         "erin": ErrorCode.UNACCEPTABLE_CREDENTIAL,
                         "frank": ErrorCode.DUPLICATE_RESOURCE}
        D = DescribeUserScramCredentialsRequest
        r = c.call(D(users=[D.UserName(name="alice"), D.UserName(name="nobody")]), 0)
        got = {x.user: (x.error_code, [(i.mechanism, i.iterations) for i in x.credential_infos])
               for x in r.results}
        assert got == {"alice": (0, [(1, 4096), (2, 4096)]),
                       "nobody": (ErrorCode.RESOURCE_NOT_FOUND, [])}
        assert {x.user for x in c.call(D(users=None), 0).results} >= {"alice", "bob"}


def test_scram_credentials_survive_a_restart_and_deletion_takes_effect(pki, tmp_path) -> None:
    props = security_props(pki, tmp_path / "logs")
    broker = Broker(props).start()
    try:
        add_scram_users(broker)
    finally:
        broker.stop()
    stored = (tmp_path / "logs" / "kbroker-scram-credentials.json").read_text()
    assert "bob-scram" not in stored and "salt=" in stored
    broker = Broker(props).start()
    try:
        conf = librdkafka_config(broker, pki, "SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-scram")
        admin = confluent_kafka.admin.AdminClient(conf)
        assert admin.list_topics(timeout=15).brokers  # authenticated after the restart
        Del = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        with WireClient(endpoint(broker, "PLAINTEXT")) as c:
            r = c.call(AlterUserScramCredentialsRequest(
                deletions=[Del(name="bob", mechanism=2)], upsertions=[]), 0)
            assert r.results[0].error_code == 0
        err = _auth_error(conf)
        assert err.code() == confluent_kafka.KafkaError._AUTHENTICATION
    finally:
        broker.stop()


def test_reauthentication_keeps_a_client_connected(pki, tmp_path) -> None:
    """connections.max.reauth.ms: librdkafka re-authenticates (KIP-368) and keeps producing;
    a raw client that does not is closed at its next request after the session ends."""
    broker = Broker(security_props(pki, tmp_path / "logs", **{
        "connections.max.reauth.ms": "1500"})).start()
    try:
        add_scram_users(broker)
        conf = librdkafka_config(broker, pki, "SASL_SSL", "SCRAM-SHA-256", "alice", "alice-scram")
        producer = confluent_kafka.Producer({**conf, "message.timeout.ms": 10000})
        errors = produce_for(producer, "reauth", 4.5)
        assert errors and set(errors) == {None}
        with WireClient(endpoint(broker, "SASL_PLAINTEXT")) as c:
            assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
            assert r.session_lifetime_ms == 1500
            time.sleep(1.7)
            c.send(MetadataRequest(topics=[]), 4)
            assert c.is_closed_by_peer()
    finally:
        broker.stop()


@pytest.mark.parametrize(("extra", "key"), [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"listener.name.ssl.ssl.truststore.type": "PKCS12"}, "listener.name.ssl.ssl.truststore.type"),
    ({"ssl.key.password": "not-it"}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.password": "x"}, "ssl.keystore.password"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
    ({"ssl.cipher.suites": "NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.unknown.thing": "1"}, "ssl.unknown.thing"),
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
    ({"sasl.jaas.config": PLAIN_JAAS}, "sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;"},
     "listener.name.sasl_ssl.plain.sasl.jaas.config"),
    ({"listener.name.nope.ssl.client.auth": "required"}, "listener.name.nope.ssl.client.auth"),
    ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name"),
    ({"inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "GSSAPI"},
     "sasl.mechanism.inter.broker.protocol"),
])
def test_security_settings_kbroker_cannot_use_are_refused_naming_the_key(
        pki, tmp_path, extra, key) -> None:
    props = security_props(pki, tmp_path / "logs", **extra)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        Broker(props).start()


def test_ssl_settings_inline_and_per_listener(pki, tmp_path) -> None:
    props = security_props(pki, tmp_path / "logs")
    del props["ssl.keystore.location"], props["ssl.key.password"]
    props["ssl.keystore.key"] = pki.key("server").read_text()
    props["ssl.keystore.certificate.chain"] = pki.cert("server").read_text()
    props["listener.name.mtls.ssl.keystore.key"] = pki.dir.joinpath("server.enc.key").read_text()
    props["listener.name.mtls.ssl.key.password"] = KEY_PASSWORD
    props["ssl.cipher.suites"] = "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,ECDHE-RSA-AES128-GCM-SHA256"
    config = BrokerConfig.from_props(props)
    assert config.listener_security["MTLS"].ssl.client_auth == "required"
    assert config.listener_security["SSL"].ssl.client_auth == "requested"
    broker = Broker(props).start()
    try:
        _still_serves(broker, pki)
        with WireClient(endpoint(broker, "MTLS"), ssl_context=_client_ssl(pki, "alice")) as c:
            assert c.call(ApiVersionsRequest(), 0).error_code == 0
    finally:
        broker.stop()


def test_passwords_are_neither_shown_in_errors_nor_described(pki, tmp_path) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_props({"ssl.keystore.password": "hunter2-secret"})
    assert "hunter2" not in str(e.value) and "[hidden]" in str(e.value)
    from kbroker.server.config_describe import describe_broker

    config = BrokerConfig.from_props(security_props(pki, tmp_path / "logs"))
    (entry,) = describe_broker(config, keys=["ssl.key.password"])
    assert entry.is_sensitive and entry.value is None
    assert all(s.value is None for s in entry.synonyms)
    assert KEY_PASSWORD not in repr(config) and "admin-secret" not in repr(config)
