"""The console behind Kafka's authentication and ACLs: a user signs in with a name and
password the SASL listeners accept (PLAIN's JAAS users, SCRAM credentials), and sees
and does what the broker's authorizer lets that user do through the Kafka APIs, with
real clients making the ACLs, topics, records and groups.

The broker: a SASL_PLAINTEXT listener only (so nobody is ANONYMOUS), AclAuthorizer,
super.users=User:admin, writes enabled; a second broker adds a PLAINTEXT listener."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kbroker import Broker

from .support import call, get, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')
SECRET, SHARED, GROUP = "secret-topic", "shared-topic", "shared-group"


def _props(log_dir: Path, listeners: str) -> dict[str, str]:
    return {"listeners": listeners, "log.dirs": str(log_dir),
            "group.initial.rebalance.delay.ms": "0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin", "operations.listener": "127.0.0.1:0",
            "operations.write.enable": "true"}


def _sasl(broker: Broker) -> str:
    return next(f"127.0.0.1:{bl.port}" for bl in broker.server.listeners
                if bl.name == "SASL_PLAINTEXT")


def _conf(broker: Broker, user: str = "admin") -> dict[str, Any]:
    return {"bootstrap.servers": _sasl(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret", "log_level": 0}


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _get(broker: Broker, path: str, user: str | None = None,
         password: str | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON body, headers) of a GET as `user` (None: no credentials)."""
    assert broker.operations_url is not None
    headers = _basic(user, password or f"{user}-secret") if user is not None else {}
    request = urllib.request.Request(broker.operations_url + path, headers=headers)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as r:
            body, status, got = r.read(), r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        body, status, got = e.read(), e.code, dict(e.headers)
    try:
        return status, json.loads(body), got
    except ValueError:
        return status, body, got


def _acl(broker: Broker, rtype: Any, name: str, op: Any, user: str = "alice",
         pattern: Any = ResourcePatternType.LITERAL) -> None:
    admin = AdminClient(_conf(broker))
    binding = AclBinding(rtype, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding]).values():
        f.result(timeout=15)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(_props(tmp_path_factory.mktemp("logs"), "SASL_PLAINTEXT://127.0.0.1:0")).start()
    try:
        admin = AdminClient(_conf(b))
        for f in admin.create_topics([NewTopic(SECRET, 1, 1, config={"retention.ms": "3600000"}),
                                      NewTopic(SHARED, 2, 1)]).values():
            f.result(timeout=15)
        producer = confluent_kafka.Producer(_conf(b))
        for i in range(5):
            producer.produce(SECRET, f"secret-{i}".encode(), partition=0)
            producer.produce(SHARED, f"shared-{i}".encode(), partition=0)
        assert producer.flush(15) == 0
        consumer = confluent_kafka.Consumer({**_conf(b), "group.id": GROUP})
        consumer.commit(offsets=[TopicPartition(SHARED, 0, 2)], asynchronous=False)
        consumer.close()
        upsert = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=15)
        yield b
    finally:
        b.stop()


def test_every_console_url_asks_who_it_is_and_refuses_a_wrong_password(broker: Broker) -> None:
    for path in ("/", "/api/overview", "/api/topics", "/api/groups", "/api/live",
                 f"/api/messages?topic={SHARED}", "/login"):
        status, body, headers = _get(broker, path)
        assert status == 401, (path, status)
        assert headers["WWW-Authenticate"].startswith('Basic realm="kbroker console"'), path
        status, body, headers = _get(broker, path, "alice", "wrong")
        assert status == 401 and "WWW-Authenticate" in headers, (path, status)
        assert _get(broker, path, "mallory", "mallory-secret")[0] == 401, path
    # figures and health ask no one, as a JMX exporter beside Kafka does not
    assert broker.operations_url is not None
    for path in ("/metrics", "/healthz", "/readyz"):
        assert get(broker.operations_url + path)[0] == 200, path
    # PLAIN's JAAS users and SCRAM credentials both sign in
    status, overview, _ = _get(broker, "/api/overview", "alice")
    assert status == 200 and overview["principal"] == "User:alice" and overview["authorizer"]
    status, overview, _ = _get(broker, "/api/overview", "carol", "carol-secret")
    assert status == 200 and overview["principal"] == "User:carol"
    assert _get(broker, "/api/overview", "carol", "carol-wrong")[0] == 401
    assert _get(broker, "/", "admin")[0] == 200


def test_a_user_sees_what_the_acls_let_them_describe_and_read(broker: Broker) -> None:
    def visible() -> dict[str, Any]:
        status, listed, _ = _get(broker, "/api/topics", "alice")
        assert status == 200
        return {t["name"]: t for t in listed}

    status, admin_view, _ = _get(broker, "/api/topics", "admin")
    assert {SECRET, SHARED} <= {t["name"] for t in admin_view}
    assert next(t for t in admin_view if t["name"] == SECRET)["configs"] == {
        "retention.ms": "3600000"}
    assert visible() == {} and _get(broker, "/api/overview", "alice")[1]["topics"] == 0
    for path in (f"/api/topics/{SECRET}", "/api/topics/no-such-topic",
                 f"/api/messages?topic={SECRET}&partition=0&offset=0"):
        status, body, _ = _get(broker, path, "alice")
        assert status == 403 and "TOPIC_AUTHORIZATION_FAILED" in body["error"], (path, body)

    _acl(broker, ResourceType.TOPIC, "shared-", AclOperation.DESCRIBE,
         pattern=ResourcePatternType.PREFIXED)
    # an answer is computed at most once a second per user and URL (console_api.CACHE_S)
    wait_until(lambda: visible(), "alice sees a topic")
    shown = visible()
    assert set(shown) == {SHARED} and shown[SHARED]["configs"] is None  # no DESCRIBE_CONFIGS
    assert _get(broker, f"/api/topics/{SHARED}", "alice")[0] == 200
    status, body, _ = _get(broker, f"/api/messages?topic={SHARED}&partition=0&offset=0", "alice")
    assert status == 403 and "READ" in body["error"]
    _acl(broker, ResourceType.TOPIC, SHARED, AclOperation.READ)
    messages = f"/api/messages?topic={SHARED}&partition=0&offset=0"
    wait_until(lambda: _get(broker, messages, "alice")[0] == 200, "alice may read")
    status, body, _ = _get(broker, messages, "alice")
    assert [base64.b64decode(r["value"]) for r in body["records"]] == [
        f"shared-{i}".encode() for i in range(5)]
    # groups: only those the user may DESCRIBE
    assert _get(broker, "/api/groups", "alice")[1] == []
    assert GROUP in {g["group_id"] for g in _get(broker, "/api/groups", "admin")[1]}
    _acl(broker, ResourceType.GROUP, GROUP, AclOperation.DESCRIBE)
    wait_until(lambda: _get(broker, "/api/groups", "alice")[1], "alice sees the group")
    groups = _get(broker, "/api/groups", "alice")[1]
    assert [g["group_id"] for g in groups] == [GROUP]
    assert [(o["topic"], o["partition"], o["committed_offset"]) for o in groups[0]["offsets"]] \
        == [(SHARED, 0, 2)]


def test_the_pushed_client_metrics_need_describe_configs_on_the_cluster(broker: Broker) -> None:
    status, body, _ = _get(broker, "/api/client-metrics", "alice")
    assert status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in body["error"]
    status, view, _ = _get(broker, "/api/client-metrics", "admin")
    assert status == 200 and set(view) == {"subscriptions", "instances"}


def test_the_live_stream_holds_only_the_topics_the_user_may_describe(broker: Broker) -> None:
    _acl(broker, ResourceType.TOPIC, SHARED, AclOperation.DESCRIBE)
    assert broker.operations_url is not None
    seen: dict[str, set[str]] = {}
    for user in ("admin", "alice"):
        request = urllib.request.Request(broker.operations_url + "/api/live",
                                         headers=_basic(user, f"{user}-secret"))
        with urllib.request.urlopen(request, timeout=30) as stream:
            line = stream.readline()
            while not line.startswith(b"data: "):
                line = stream.readline()
        seen[user] = set(json.loads(line[6:])["topics"])
    assert {SECRET, SHARED} <= seen["admin"]
    assert SHARED in seen["alice"] and SECRET not in seen["alice"]


def test_writes_are_authorized_as_the_kafka_apis_authorize_them(broker: Broker) -> None:
    headers = _basic("alice", "alice-secret")
    assert broker.operations_url is not None
    url = broker.operations_url
    status, body = call(url, "POST", "/api/topics", {"name": "alice-made", "partitions": 1},
                        headers=headers)
    assert status == 403 and body["error_code"] == 29, body  # TOPIC_AUTHORIZATION_FAILED
    _acl(broker, ResourceType.TOPIC, "alice-", AclOperation.CREATE,
         pattern=ResourcePatternType.PREFIXED)
    status, body = call(url, "POST", "/api/topics", {"name": "alice-made", "partitions": 1},
                        headers=headers)
    assert status == 200, body
    listed = AdminClient(_conf(broker)).list_topics(timeout=15).topics
    assert "alice-made" in listed
    status, body = call(url, "DELETE", "/api/topics/alice-made", headers=headers)
    assert status == 403 and body["error_code"] == 29, body
    _acl(broker, ResourceType.TOPIC, "alice-made", AclOperation.DELETE)
    assert call(url, "DELETE", "/api/topics/alice-made", headers=headers)[0] == 200
    # resetting offsets: OffsetCommit needs READ on the group and on the topic
    _acl(broker, ResourceType.TOPIC, SHARED, AclOperation.READ)
    status, body = call(url, "POST", f"/api/groups/{GROUP}/offsets",
                        {"topic": SHARED, "to": "earliest"}, headers=headers)
    assert status == 403 and body["error_code"] == 30, body  # GROUP_AUTHORIZATION_FAILED
    _acl(broker, ResourceType.GROUP, GROUP, AclOperation.READ)
    status, body = call(url, "POST", f"/api/groups/{GROUP}/offsets",
                        {"topic": SHARED, "to": "latest"}, headers=headers)
    assert status == 200, body
    consumer = confluent_kafka.Consumer({**_conf(broker), "group.id": GROUP})
    try:
        committed = consumer.committed([TopicPartition(SHARED, 0)], timeout=15)
    finally:
        consumer.close()
    assert committed[0].offset == 5
    # a wrong password writes nothing
    status, _ = call(url, "POST", "/api/topics", {"name": "alice-other"},
                     headers=_basic("alice", "nope"))
    assert status == 401


def test_anonymous_where_a_listener_lets_anyone_in_and_login_asks(tmp_path: Path) -> None:
    listeners = "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"
    with Broker(_props(tmp_path / "logs", listeners)) as b:
        status, overview, _ = _get(b, "/api/overview")
        assert status == 200 and overview["principal"] == "User:ANONYMOUS"
        assert _get(b, "/api/topics")[1] == []  # no ACL lets ANONYMOUS describe anything
        status, _body, headers = _get(b, "/login")
        assert status == 401 and "WWW-Authenticate" in headers
        status, _body, headers = _get(b, "/login", "admin")
        assert status == 302 and headers["Location"] == "/"
        assert _get(b, "/api/overview", "admin")[1]["principal"] == "User:admin"


@pytest.mark.browser
def test_the_console_in_a_browser_signed_in_as_a_user_with_some_acls(
        broker: Broker, tmp_path: Path) -> None:
    """Chromium signs in with the user's name and password (as its dialog would send
    them) and shows only what the ACLs let alice see, without a console error."""
    from .test_console import _browser_pids, _shot, chromium

    _acl(broker, ResourceType.TOPIC, SHARED, AclOperation.DESCRIBE)
    url = broker.operations_url
    assert url is not None
    profile = tmp_path / "chromium-profile"
    errors: list[str] = []
    with chromium(profile, http_credentials={"username": "alice",
                                             "password": "alice-secret"}) as context:
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/#overview")
        page.wait_for_function(
            "document.querySelector('#summary').textContent.includes('User:alice')")
        page.click("nav a[data-page=topics]")
        page.wait_for_selector(f"#topics tr[data-topic={SHARED}]")
        assert page.locator(f"#topics tr[data-topic={SECRET}]").count() == 0
        assert "(not authorized)" in page.inner_text(f"#topics tr[data-topic={SHARED}]")
        _shot(page, "signed-in-topics")
    assert errors == []
    assert _browser_pids(profile) == []
