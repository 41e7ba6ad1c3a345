"""SASL/OAUTHBEARER with real clients (KIP-255, KIP-768).

The broker: a PLAINTEXT listener (User:ANONYMOUS, a super user, for setup), UNSECURED
(OAUTHBEARER with Kafka's unsecured validator) and OIDC (OAUTHBEARER with the OIDC
validator, its JWKS served by an in-test HTTP server on 127.0.0.1 that is also the
token endpoint librdkafka's `sasl.oauthbearer.method=oidc` asks with its client id and
secret); ACLs on (AclAuthorizer). librdkafka's unsecured tokens
(`sasl.oauthbearer.config=principal=...`) produce and consume as User:<principal>, an
ACL allowing one principal and not another; an expired token is refused. OIDC tokens
signed by the JWKS key work; a wrong audience, wrong issuer, bad signature or expired
token is refused (RFC 7628's JSON challenge, then SASL_AUTHENTICATION_FAILED and the
connection closed, seen on the wire and by librdkafka). kafka-python's and aiokafka's token
providers. The Node.js client @platformatic/kafka: an unsecured token under ACLs, a signed
token, and refused tokens (wrong audience, expired) failing its connect.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography.hazmat.primitives.asymmetric import rsa

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

from .node_support import needs_node_client, run_node
from .security_support import endpoint, produce_for
from .wire import WireClient

pytestmark = pytest.mark.integration

ISSUER, AUDIENCE = "https://idp.test", "kafka-broker"
CLIENT_ID, CLIENT_SECRET = "kbroker-test", "s3cret"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


class IdentityProvider:
    """A JWKS (kid k1) at /jwks and a client-credentials token endpoint at /token whose
    tokens `claims` and `signing_key` shape (a test changes them to make bad tokens)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.signing_key, self.kid = self.key, "k1"
        self.claims: dict[str, Any] = {}
        self.tokens_issued = 0
        self.jwks = self._jwks({"k1": self.key})
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: str) -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/jwks":
                    self._send(200, idp.jwks)
                else:
                    self._send(404, "{}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length).decode()
                expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                if self.path != "/token" or "grant_type=client_credentials" not in form \
                        or self.headers.get("Authorization") != f"Basic {expected}":
                    self._send(401, '{"error":"invalid_client"}')
                    return
                self._send(200, json.dumps({"access_token": idp.token(), "token_type": "bearer",
                                            "expires_in": 300}))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def _jwks(keys: dict[str, Any]) -> str:
        return json.dumps({"keys": [
            {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid,
             "use": "sig", "alg": "RS256"} for kid, key in keys.items()]})

    def rotate(self) -> None:
        """A new key k2 in the JWKS, signing from now on (k1 stays published)."""
        old, self.key = self.key, rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.signing_key, self.kid = self.key, "k2"
        self.jwks = self._jwks({"k1": old, "k2": self.key})

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        base = {"sub": "carol", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300,
                **self.claims, **claims}
        self.tokens_issued += 1
        return jwt.encode({k: v for k, v in base.items() if v is not None}, self.signing_key,
                          algorithm="RS256", headers={"kid": self.kid})

    def fetch_token(self) -> str:
        """A token from /token, as a client gets it."""
        request = urllib.request.Request(
            f"{self.url}/token", data=b"grant_type=client_credentials", headers={
                "Authorization": "Basic " + base64.b64encode(
                    f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["access_token"]


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    provider.thread.start()
    try:
        yield provider
    finally:
        provider.httpd.shutdown()
        provider.httpd.server_close()
        provider.thread.join(10)


@pytest.fixture(scope="module")
def broker(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,UNSECURED://127.0.0.1:0,OIDC://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,"
                                          "OIDC:SASL_PLAINTEXT",
        "log.dirs": str(tmp_path_factory.mktemp("logs")),
        "group.initial.rebalance.delay.ms": "0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.unsecured.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredValidatorAllowableClockSkewMs="1000";',
        "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
        "listener.name.oidc.sasl.oauthbearer.jwks.endpoint.url": f"{idp.url}/jwks",
        "listener.name.oidc.sasl.oauthbearer.expected.audience": AUDIENCE,
        "listener.name.oidc.sasl.oauthbearer.expected.issuer": ISSUER,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:carol",
    }
    b = Broker(props).start()
    try:
        yield b
    finally:
        b.stop()


def _admin(broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": endpoint(broker, "PLAINTEXT")})


def _topic(broker: Broker, name: str) -> str:
    admin = _admin(broker)  # kept alive until its futures are done
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(timeout=30)
    return name


def unsecured_conf(broker: Broker, principal: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": endpoint(broker, "UNSECURED"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.config": f"principal={principal}",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "log_level": 0, **extra}


def oidc_conf(broker: Broker, idp: IdentityProvider, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": endpoint(broker, "OIDC"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT_ID,
            "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token", "log_level": 0, **extra}


def produce_and_consume(conf: dict[str, Any], topic: str, group: str) -> list[bytes]:
    producer = Producer(conf)
    values = [f"v{i}".encode() for i in range(5)]
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        return got
    finally:
        consumer.close()


def authentication_error(conf: dict[str, Any]) -> KafkaError:
    """The first authentication error librdkafka reports with these settings."""
    errors: list[KafkaError] = []
    got = threading.Event()

    def on_error(err: KafkaError) -> None:
        errors.append(err)
        if err.code() == KafkaError._AUTHENTICATION:
            got.set()

    producer = Producer({**conf, "error_cb": on_error})
    deadline = time.monotonic() + 30
    while not got.is_set() and time.monotonic() < deadline:
        producer.poll(0.2)
    assert got.is_set(), f"no authentication error, only {errors}"
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


def grant(broker: Broker, principal: str, topic: str, group: str) -> None:
    lit, allow = ResourcePatternType.LITERAL, AclPermissionType.ALLOW
    bindings = [AclBinding(ResourceType.TOPIC, topic, lit, principal, "*", op, allow)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, group, lit, principal, "*",
                               AclOperation.READ, allow))
    admin = _admin(broker)
    for f in admin.create_acls(bindings).values():
        f.result(timeout=15)


# -- the unsecured validator


def test_unsecured_tokens_produce_and_consume_under_acls(broker: Broker) -> None:
    topic, group = _topic(broker, "oauth-unsecured"), "oauth-unsecured-g"
    grant(broker, "User:alice", topic, group)
    got = produce_and_consume(unsecured_conf(broker, "alice"), topic, group)
    assert got == [f"v{i}".encode() for i in range(5)]
    producer = Producer(unsecured_conf(broker, "bob"))  # authenticated, but no ACL
    failures: list[KafkaError] = []
    producer.produce(topic, b"x", on_delivery=lambda err, msg: failures.append(err))
    producer.flush(30)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_an_expired_unsecured_token_is_refused(broker: Broker) -> None:
    def expired_token(_config: str) -> tuple[str, float]:
        def b64(o: dict) -> str:
            return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
        now = time.time()
        return f"{b64({'alg': 'none'})}.{b64({'sub': 'alice', 'exp': now - 60})}.", now + 3600

    conf = unsecured_conf(broker, "alice", oauth_cb=expired_token)
    del conf["sasl.oauthbearer.config"], conf["enable.sasl.oauthbearer.unsecure.jwt"]
    err = authentication_error(conf)
    assert "invalid_token" in err.str()


def test_unsecured_exchange_on_the_wire(broker: Broker) -> None:
    def b64(o: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    token = f"{b64({'alg': 'none'})}.{b64({'sub': 'dave', 'exp': time.time() + 120})}."
    with WireClient(endpoint(broker, "UNSECURED")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(
            auth_bytes=f"n,a=dave,\x01auth=Bearer {token}\x01\x01".encode()), 1)
        assert (r.error_code, r.auth_bytes) == (0, b"")
        assert 0 < r.session_lifetime_ms <= 120_000  # the token's exp bounds the session
    with WireClient(endpoint(broker, "UNSECURED")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"n,,\x01auth=Bearer\x01\x01"), 1)
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert c.is_closed_by_peer()


# -- the OIDC validator


def test_oidc_tokens_from_the_token_endpoint_work(broker: Broker, idp: IdentityProvider) -> None:
    topic = _topic(broker, "oauth-oidc")
    before = idp.tokens_issued
    got = produce_and_consume(oidc_conf(broker, idp), topic, "oauth-oidc-g")
    assert got == [f"v{i}".encode() for i in range(5)]
    assert idp.tokens_issued > before  # librdkafka fetched its token from the endpoint


BAD_TOKENS = {
    "wrong audience": {"aud": "someone-else"},
    "wrong issuer": {"iss": "https://evil.test"},
    "bad signature": "other_key",
    "expired": {"exp": 1_000_000_000, "iat": 999_999_000},
}


@pytest.fixture
def bad_idp(idp: IdentityProvider, request: pytest.FixtureRequest) -> Iterator[IdentityProvider]:
    bad = BAD_TOKENS[request.param]
    if bad == "other_key":
        idp.signing_key = idp.other_key
    else:
        idp.claims = dict(bad)
    try:
        yield idp
    finally:
        idp.signing_key, idp.claims = idp.key, {}


@pytest.mark.parametrize("bad_idp", list(BAD_TOKENS), indirect=True)
def test_bad_oidc_tokens_are_refused(broker: Broker, bad_idp: IdentityProvider) -> None:
    token = bad_idp.fetch_token()
    with WireClient(endpoint(broker, "OIDC")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 1)
        assert (r.error_code, r.auth_bytes) == (0, b'{"status":"invalid_token"}')
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
        assert (r.error_code, r.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                   '{"status":"invalid_token"}')
        assert c.is_closed_by_peer()
    conf = oidc_conf(broker, bad_idp)
    if bad_idp.claims.get("exp") == 1_000_000_000:
        return  # librdkafka itself refuses to use a token it sees expired
    assert "invalid_token" in authentication_error(conf).str()


def test_a_good_oidc_token_on_the_unsecured_listener_is_refused(
        broker: Broker, idp: IdentityProvider) -> None:
    token = idp.fetch_token()  # signed: not alg none
    with WireClient(endpoint(broker, "UNSECURED")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = c.call(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 1)
        assert r.auth_bytes == b'{"status":"invalid_token"}'


# -- kafka-python


def test_kafka_python_token_provider(broker: Broker, idp: IdentityProvider) -> None:
    import kafka
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return idp.fetch_token()

    topic = _topic(broker, "oauth-kafka-python")
    common = {"bootstrap_servers": endpoint(broker, "OIDC"), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    producer = kafka.KafkaProducer(**common)
    try:
        producer.send(topic, b"from-kafka-python").get(timeout=30)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=f"kp-{uuid.uuid4().hex[:6]}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=30000,
                                   **common)
    try:
        assert next(iter(consumer)).value == b"from-kafka-python"
    finally:
        consumer.close()


def test_aiokafka_token_provider_with_extensions(broker: Broker, idp: IdentityProvider) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        async def token(self) -> str:
            return await asyncio.get_running_loop().run_in_executor(None, idp.fetch_token)

        def extensions(self) -> dict[str, str]:
            return {"traceId": "abc-123"}  # a KIP-342 extension: accepted

    topic = _topic(broker, "oauth-aiokafka")
    common = {"bootstrap_servers": endpoint(broker, "OIDC"), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}

    async def run() -> bytes:
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id="aiokafka-oauth",
                                    auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), 30)
            return msg.value
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == b"from-aiokafka"


def test_oidc_listener_with_an_unreachable_jwks_does_not_start(tmp_path: Path) -> None:
    props = {"listeners": "OIDC://127.0.0.1:0", "listener.security.protocol.map": "OIDC:SASL_PLAINTEXT",
             "log.dirs": str(tmp_path), "sasl.enabled.mechanisms": "OAUTHBEARER",
             "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
             "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "no-such-jwks.json").as_uri(),
             "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "1",
             "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "8"}
    with pytest.raises(Exception, match="sasl.oauthbearer.jwks.endpoint.url: cannot read"):
        Broker(props).start()




# -- kbroker acls with a Java client's OAUTHBEARER settings


@pytest.mark.parametrize("listener", ["UNSECURED", "OIDC"])
def test_kbroker_acls_with_oauthbearer_settings(broker: Broker, idp: IdentityProvider,
                                                tmp_path: Path, listener: str) -> None:
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
    config = tmp_path / "client.properties"
    text = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
    if listener == "UNSECURED":
        text += f'sasl.jaas.config={module} required unsecuredLoginStringClaim_sub="carol";\n'
    else:
        text += (f'sasl.jaas.config={module} required clientId="{CLIENT_ID}" '
                 f'clientSecret="{CLIENT_SECRET}";\n'
                 f"sasl.oauthbearer.token.endpoint.url={idp.url}/token\n"
                 "sasl.login.callback.handler.class=org.apache.kafka.common.security."
                 "oauthbearer.OAuthBearerLoginCallbackHandler\n")
    config.write_text(text)
    topic = f"oauth-cli-{listener.lower()}"
    run = subprocess.run([sys.executable, "-m", "kbroker", "acls", "add", "--bootstrap-server",
                          endpoint(broker, listener), "--command-config", str(config),
                          "--allow-principal", "User:erin", "--operation", "Read",
                          "--topic", topic], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    listed = subprocess.run([sys.executable, "-m", "kbroker", "acls", "list", "--bootstrap-server",
                             endpoint(broker, listener), "--command-config", str(config),
                             "--topic", topic], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "(principal=User:erin, host=*, operation=READ, permissionType=ALLOW)" in listed.stdout


def _authenticate(broker: Broker, listener: str, token: str) -> tuple[WireClient, Any]:
    c = WireClient(endpoint(broker, listener))
    assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    return c, c.call(SaslAuthenticateRequest(
        auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 1)


def test_a_rotated_key_is_fetched_when_a_token_names_it(tmp_path: Path) -> None:
    """A token signed by a key id the broker's JWKS does not hold yet is refused, and
    makes the broker read the JWKS again at once (its refresh.ms is an hour): a token of
    the new key is then accepted."""
    provider = IdentityProvider()
    provider.thread.start()
    props = {"listeners": "OIDC://127.0.0.1:0",
             "listener.security.protocol.map": "OIDC:SASL_PLAINTEXT",
             "log.dirs": str(tmp_path), "sasl.enabled.mechanisms": "OAUTHBEARER",
             "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
             "sasl.oauthbearer.jwks.endpoint.url": f"{provider.url}/jwks",
             "sasl.oauthbearer.expected.audience": AUDIENCE}
    b = Broker(props).start()
    try:
        c, r = _authenticate(b, "OIDC", provider.token())
        c.close()
        assert (r.error_code, r.auth_bytes) == (0, b"")
        provider.rotate()
        c, r = _authenticate(b, "OIDC", provider.token())
        c.close()
        assert r.auth_bytes == b'{"status":"invalid_token"}'  # not known yet: refused
        deadline = time.monotonic() + 30
        while True:  # until the early refresh has brought k2
            c, r = _authenticate(b, "OIDC", provider.token())
            c.close()
            if r.auth_bytes == b"" or time.monotonic() > deadline:
                break
        assert (r.error_code, r.auth_bytes) == (0, b"")
    finally:
        b.stop()
        provider.httpd.shutdown()
        provider.httpd.server_close()
        provider.thread.join(10)


def test_the_session_ends_when_the_token_expires(broker: Broker) -> None:
    def b64(o: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    exp = time.time() + 2
    token = f"{b64({'alg': 'none'})}.{b64({'sub': 'frank', 'exp': exp})}."
    c, r = _authenticate(broker, "UNSECURED", token)
    with c:
        assert r.error_code == 0 and 0 < r.session_lifetime_ms <= 2000
        assert c.call(MetadataRequest(topics=[]), 9).topics == []  # served while it lasts
        while time.time() <= exp + 0.05:  # the named condition: the token's exp has passed
            time.sleep(0.05)
        c.send(MetadataRequest(topics=[]), 9)
        assert c.is_closed_by_peer()  # Kafka's session expiry: the connection closes


def test_librdkafka_reauthenticates_on_its_connections(tmp_path: Path) -> None:
    """connections.max.reauth.ms=1500 (shorter than the hour-long tokens): the broker
    tells librdkafka the session's lifetime and librdkafka re-authenticates (KIP-368)
    with its token on the same connections, so over three sessions of producing no
    connection is made again (one left to expire would be closed by the broker, and
    reconnected)."""
    b = Broker({"listeners": "UNSECURED://127.0.0.1:0",
                "listener.security.protocol.map": "UNSECURED:SASL_PLAINTEXT",
                "log.dirs": str(tmp_path), "sasl.enabled.mechanisms": "OAUTHBEARER",
                "connections.max.reauth.ms": "1500"}).start()
    try:
        producer = Producer(unsecured_conf(b, "gina", **{"message.timeout.ms": 10000}))
        assert set(produce_for(producer, "reauth", 0.1)) == {None}  # connected, authenticated
        made = b.server.connections_created["UNSECURED"]
        errors = produce_for(producer, "reauth", 4.5)
        assert errors and set(errors) == {None}
        assert b.server.connections_created["UNSECURED"] == made
        del producer
    finally:
        b.stop()


# -- the Node.js client @platformatic/kafka


def unsecured_jws(sub: str, exp_in_s: float) -> str:
    """An unsecured JWS (alg none, RFC 7515 with an empty signature) for `sub`."""
    def b64(o: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    now = time.time()
    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': now, 'exp': now + exp_in_s})}."


def node_oauth(broker: Broker, listener: str, token: str, action: str, **args: Any) -> dict[str, Any]:
    return run_node("oauthbearer.mjs", endpoint(broker, listener), timeout=90, token=token,
                    action=action, **args)


@needs_node_client
def test_node_client_unsecured_token_produces_and_consumes_under_acls(broker: Broker) -> None:
    topic, group = _topic(broker, "oauth-node"), "oauth-node-g"
    grant(broker, "User:erin", topic, group)
    r = node_oauth(broker, "UNSECURED", unsecured_jws("erin", 300), "produce-consume",
                   topic=topic, group=group, count=4)
    assert r == {"sent": 4, "consumed": ["v0", "v1", "v2", "v3"]}, r
    denied = node_oauth(broker, "UNSECURED", unsecured_jws("frank", 300), "produce", topic=topic)
    assert ErrorCode.TOPIC_AUTHORIZATION_FAILED in denied["error"]["codes"], denied


@needs_node_client
def test_node_client_signed_token_of_the_identity_provider_works(
        broker: Broker, idp: IdentityProvider) -> None:
    topic = _topic(broker, "oauth-node-oidc")  # carol: a super user
    r = node_oauth(broker, "OIDC", idp.fetch_token(), "produce-consume", topic=topic,
                   group="oauth-node-oidc-g", count=2, validate=True)
    assert r == {"sent": 2, "consumed": ["v0", "v1"]}, r


@needs_node_client
@pytest.mark.parametrize("bad_idp", ["wrong audience", "expired"], indirect=True)
def test_node_client_refused_token_fails_its_connect(broker: Broker, bad_idp: IdentityProvider) -> None:
    """The broker answers RFC 7628's invalid_token challenge: the client's validator turns it
    into its SASL authentication error; without the validator the client's next request is
    refused (ILLEGAL_SASL_STATE, as Kafka's handleSaslToken answers it) and the connection
    closes. Either way the connect fails; nothing is served."""
    token = bad_idp.fetch_token()
    validated = node_oauth(broker, "OIDC", token, "connect", validate=True)
    assert "error" in validated, validated
    names = " | ".join(validated["names"])
    assert "AuthenticationError: SASL authentication failed." in names, validated
    assert "Invalid SASL/OAUTHBEARER token." in names, validated
    unvalidated = node_oauth(broker, "OIDC", token, "connect")
    assert "error" in unvalidated and "topics" not in unvalidated, unvalidated
    assert ErrorCode.ILLEGAL_SASL_STATE in unvalidated["error"]["codes"], unvalidated


@needs_node_client
def test_node_client_expired_unsecured_token_fails_its_connect(broker: Broker) -> None:
    r = node_oauth(broker, "UNSECURED", unsecured_jws("erin", -60), "connect", validate=True)
    assert "Invalid SASL/OAUTHBEARER token." in " | ".join(r.get("names", [])), r
