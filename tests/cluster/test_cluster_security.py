"""Security in a cluster: every broker has a PLAINTEXT listener (between brokers) and a
SASL_PLAINTEXT one (for clients). SCRAM credentials live in ZooKeeper under
/config/users, as in Kafka's ZooKeeper mode: set through one broker, every broker
authenticates with them; Metadata on the SASL listener names every broker's SASL
endpoint. ACLs and client quotas in a cluster: test_cluster_acls.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.config import BrokerConfig, ConfigError

from .sasl_support import JAAS, SaslCluster
from .support import wait_until

pytestmark = pytest.mark.timeout(180)

@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslCluster]:
    chroot = f"/kbroker-{uuid.uuid4().hex[:8]}"
    c = SaslCluster(3, Path(tmp_path_factory.mktemp("security")), None, zookeeper=zookeeper,
                    chroot=chroot)
    c.sasl_ports = {}
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _sasl_conf(cluster: SaslCluster, broker_id: int, user: str, password: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{cluster.sasl_ports[broker_id]}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password, "log_level": 0}


def _can_authenticate(conf: dict) -> bool:
    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=3)
        return not errors
    except confluent_kafka.KafkaException:
        return False


def test_scram_credentials_live_in_zookeeper_and_reach_every_broker(cluster: SaslCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    up = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                   4096), b"carol-pw")
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=30)
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    try:
        data, _ = zk.get("/config/users/carol")
    finally:
        zk.stop()
        zk.close()
    stored = json.loads(data)
    assert stored["version"] == 1
    assert stored["config"]["SCRAM-SHA-256"].startswith("salt=")
    assert "carol-pw" not in data.decode()
    for broker_id in (1, 2, 3):
        conf = _sasl_conf(cluster, broker_id, "carol", "carol-pw")
        wait_until(lambda c=conf: _can_authenticate(c), f"carol on broker {broker_id}", timeout=30)
    # clients on the SASL listener learn every broker's SASL endpoint and produce through them
    conf = _sasl_conf(cluster, 2, "carol", "carol-pw")
    md = AdminClient(conf).list_topics(timeout=15)
    assert sorted(b.port for b in md.brokers.values()) == sorted(cluster.sasl_ports.values())
    producer = confluent_kafka.Producer({**conf, "acks": "all"})
    errors: list = []
    for i in range(30):
        producer.produce("sasl-cluster", f"{i}".encode(), partition=i % 1,
                         on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(60) == 0 and set(errors) == {None}
    # a deletion reaches every broker too
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(timeout=30)
    for broker_id in (1, 2, 3):
        conf = _sasl_conf(cluster, broker_id, "carol", "carol-pw")
        wait_until(lambda c=conf: not _can_authenticate(c), f"carol refused on {broker_id}",
                   timeout=30)


def test_cluster_mode_refuses_what_it_cannot_do(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """Brokers reach each other over PLAINTEXT or SASL_PLAINTEXT (their client has no
    TLS): an SSL or SASL_SSL inter-broker listener is refused, and a SASL one needs the
    username and password the broker logs in with. ACLs are accepted; without the
    brokers' principal in super.users a warning says what replication needs."""
    base = {"zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path)}
    acls = {**base, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with caplog.at_level("WARNING", logger="kbroker.config"):
        BrokerConfig.from_props(acls)
    assert "CLUSTER_ACTION on the cluster to User:ANONYMOUS" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="kbroker.config"):
        BrokerConfig.from_props({**acls, "super.users": "User:admin;User:ANONYMOUS"})
    assert "User:ANONYMOUS" not in caplog.text
    sasl = {**base, "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    with pytest.raises(ConfigError, match="needs username and password"):
        BrokerConfig.from_props({**sasl, "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    login = JAAS.replace("required ", 'required username="admin" password="admin-secret" ')
    caplog.clear()
    with caplog.at_level("WARNING", logger="kbroker.config"):
        config = BrokerConfig.from_props({
            **sasl, **acls, "listener.name.sasl_plaintext.plain.sasl.jaas.config": login})
    assert config.inter_broker_login is not None
    assert (config.inter_broker_login.principal, config.inter_broker_login.mechanism) == (
        "User:admin", "PLAIN")
    assert "admin-secret" not in repr(config) and "to User:admin" in caplog.text
    with pytest.raises(ConfigError, match="inter.broker.listener.name.*SASL_SSL"):
        BrokerConfig.from_props({
            **base, "listeners": "PLAINTEXT://:0,SASL_SSL://:0",
            "inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": login, "ssl.keystore.type": "PEM",
            "ssl.truststore.type": "PEM", "ssl.keystore.location": str(tmp_path / "k.pem")})
