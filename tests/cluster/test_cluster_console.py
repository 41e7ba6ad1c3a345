"""The console of a cluster with a dead broker shows what the CLI shows: its Brokers
table lists the dead broker as `kbroker cluster status` does ("not alive; holds
replicas"), its under-replicated card counts the cluster's partitions (as the Topics
page and `cluster status` do, not only those this broker leads), and a topic's configs
are those `kbroker topics describe` prints. JSON from the operations listener, and the
page in Debian's chromium."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from tests.ops.browser import browser_pids, chromium
from tests.ops.support import get_json

from .cli_support import run_cli
from .support import create_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.timeout(240)]


def _cli_configs(bootstrap: str, topic: str) -> dict[str, str]:
    described = run_cli("topics", "describe", topic, bootstrap=bootstrap)
    assert described.returncode == 0, described.stderr
    found = re.search(r"\tConfigs: (\S*)", described.stdout)
    assert found is not None, described.stdout
    return dict(pair.split("=", 1) for pair in found.group(1).split(",") if pair)


def _under_replicated(bootstrap: str) -> int:
    status = run_cli("cluster", "status", bootstrap=bootstrap)
    found = re.search(r"^UnderReplicatedPartitions: (\d+)$", status.stdout, re.M)
    assert found is not None, status.stdout + status.stderr
    return int(found.group(1))


def test_console_of_a_cluster_with_a_dead_broker(zookeeper: ZooKeeperServer,
                                                 tmp_path: Path) -> None:
    cluster = Cluster(3, tmp_path, {"replica.lag.time.max.ms": "3000", "min.insync.replicas": "2"},
                      zookeeper=zookeeper, chroot=f"/kbroker-{uuid.uuid4().hex[:8]}",
                      operations=True)
    cluster.start()
    try:
        create_topic(cluster, "shown", partitions=3, rf=3, config={"retention.ms": "3600000"})
        url = str(cluster.brokers[1].operations_url)
        cluster.kill(3)
        bootstrap = cluster.brokers[1].bootstrap

        def dead_listed() -> bool:
            o = get_json(url + "/api/overview")
            return any(b["id"] == 3 and b["alive"] is False for b in o["brokers"]) \
                and o["under_replicated_partitions"] == 3
        wait_until(dead_listed, "broker 3 listed as not alive, all 3 partitions under-replicated")
        overview = get_json(url + "/api/overview")
        dead = next(b for b in overview["brokers"] if b["id"] == 3)
        assert dead["status"] == "not alive; holds replicas"
        assert [b["id"] for b in overview["brokers"] if b["alive"]] == [1, 2]
        shown = next(t for t in get_json(url + "/api/topics") if t["name"] == "shown")
        assert shown["under_replicated"] == overview["under_replicated_partitions"]
        assert _under_replicated(bootstrap) == overview["under_replicated_partitions"]
        cli = _cli_configs(bootstrap, "shown")
        assert cli["retention.ms"] == "3600000" and cli["min.insync.replicas"] == "2"
        assert shown["configs"] == cli

        profile = tmp_path / "chromium-profile"
        with chromium(profile) as context:
            page = context.new_page()
            page.goto(url + "/#overview")
            page.wait_for_selector("#brokers tbody tr.dead")
            rows = page.locator("#brokers tbody tr")
            assert rows.count() == 3
            assert rows.nth(2).inner_text().split("\t") == ["3", "–", "–", "not alive; holds replicas"]
            card = page.locator(".card", has_text="under-replicated").locator(".value")
            assert card.inner_text() == "3"
            page.click("nav a[data-page=topics]")
            page.wait_for_selector("#topics tr[data-topic=shown]")
            row = page.inner_text("#topics tr[data-topic=shown]")
            assert "min.insync.replicas=2" in row and "retention.ms=3600000" in row
        assert browser_pids(profile) == []
    finally:
        cluster.stop()
