"""Group configs (the GROUP config resource of KIP-932) in a 3-broker cluster: set on one
broker with confluent-kafka's AdminClient (IncrementalAlterConfigs), stored in ZooKeeper
(/config/groups/<group> and a change notification), so every broker answers them in
DescribeConfigs, the leader of the topic's partition (the share-partition leader) starts
the group where `share.auto.offset.reset` says, and they survive a broker's restart."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.admin import ResourceType as CkResourceType

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.server.config_describe import ConfigSource
from tests.integration.groups_support import produce, set_group_configs

from .support import described, new_cluster, shows, wait_for_leader, wait_until

pytestmark = pytest.mark.timeout(240)

RESET = "share.auto.offset.reset"


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, tmp_path, 3, {"group.share.heartbeat.interval.ms": "500",
                                             "group.share.min.heartbeat.interval.ms": "500"})
    try:
        yield c
    finally:
        c.stop()


def read_all(bootstrap: str, group: str, topic: str, count: int) -> list[str]:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        got: list[str] = []
        deadline = time.monotonic() + 90
        while len(got) < count:
            assert time.monotonic() < deadline, f"timed out: {len(got)} of {count} records"
            got += [m.value().decode() for m in consumer.poll(0.5) if m.error() is None]
        return got
    finally:
        consumer.close()


def test_a_group_config_set_on_one_broker_holds_on_every_broker_and_survives_a_restart(cluster: Cluster) -> None:
    topic, group = "group-configs", f"sg-{uuid.uuid4().hex[:8]}"
    assert all(shows(cluster, b, group, "latest") for b in cluster.brokers)  # the default
    set_group_configs(cluster.brokers[1].bootstrap, group, **{RESET: "earliest"})
    # the broker that took the IncrementalAlterConfigs (librdkafka picks one), as its log says
    altered_on = next(b for b, p in cluster.brokers.items() if f"group {group} configs now" in p.output())
    leader, third = [b for b in sorted(cluster.brokers) if b != altered_on]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, third, altered_on]])])[topic].result(60)
    wait_until(lambda: wait_for_leader(cluster, topic, 0).leader == leader, "the preferred leader")
    sent = [f"before-{i}" for i in range(50)]  # produced before the group has a member
    produce(cluster.bootstrap_servers, topic, [(0, v) for v in sent], acks="all")
    for b in cluster.brokers:  # the change notification reaches every broker
        wait_until(lambda b=b: shows(cluster, b, group, "earliest"), f"broker {b} to see the group config")
    assert described(cluster, third, group)[RESET] == ("earliest", ConfigSource.DYNAMIC_GROUP_CONFIG)

    # the share-partition leader, not the broker the config was set on, starts at the log start
    got = read_all(cluster.brokers[third].bootstrap, group, topic, len(sent))
    assert sorted(got) == sorted(sent)

    cluster.stop_broker(third)
    cluster.restart(third)  # loaded from ZooKeeper at start
    wait_until(lambda: shows(cluster, third, group, "earliest"), "the restarted broker to see the group config")
    cluster.kill(leader)
    cluster.restart(leader)
    wait_until(lambda: shows(cluster, leader, group, "earliest"), "the restarted leader to see the group config")
    assert shows(cluster, leader, f"{group}-2", "latest")  # a group with no override: the default


def test_deleting_a_group_config_reverts_it_on_every_broker(cluster: Cluster) -> None:
    group = f"sg-{uuid.uuid4().hex[:8]}"
    set_group_configs(cluster.brokers[1].bootstrap, group, **{RESET: "earliest",
                                                               "share.record.lock.duration.ms": "20000"})
    for b in cluster.brokers:
        wait_until(lambda b=b: shows(cluster, b, group, "earliest"), f"broker {b} to see the group config")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    entry = ConfigEntry(RESET, None, incremental_operation=AlterConfigOpType.DELETE)
    for f in admin.incremental_alter_configs([ConfigResource(CkResourceType.GROUP, group,
                                                             incremental_configs=[entry])]).values():
        f.result(30)
    for b in cluster.brokers:
        wait_until(lambda b=b: shows(cluster, b, group, "latest"), f"broker {b} to see the deletion")
        assert described(cluster, b, group)["share.record.lock.duration.ms"][0] == "20000"
    bad = ConfigEntry("share.isolation.level", "sometimes", incremental_operation=AlterConfigOpType.SET)
    with pytest.raises(Exception, match="INVALID_CONFIG|sometimes"):
        for f in admin.incremental_alter_configs([ConfigResource(CkResourceType.GROUP, group,
                                                                 incremental_configs=[bad])]).values():
            f.result(30)
