"""`kbroker groups` against `kbroker serve`: list, describe, reset-offsets, delete."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from .groups_support import Member, poll_until, produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


def groups(bs: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", "groups", *args, "--bootstrap-server", bs],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_groups_cli(broker_process: Any) -> None:
    bs, topic, group = broker_process.bootstrap_servers, f"cli-{uuid.uuid4().hex[:8]}", "cli-group"
    produce(bs, topic, [(p, f"v{p}-{i}") for p in range(3) for i in range(5)])
    m = Member(bs, group, topic, **{"client.id": "cli-member"})
    try:
        poll_until([m], lambda: len(m.values) >= 15)
        m.commit()
        listed = groups(bs, "list")
        assert listed.returncode == 0, listed.stderr
        assert f"{group}\tStable\tClassic" in listed.stdout.splitlines()
        described = groups(bs, "describe", group)
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert any(line.split()[:6] == [group, topic, "0", "5", "5", "0"] for line in lines), lines
        assert "cli-member" in described.stdout
        busy = groups(bs, "delete", group)
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stderr
    finally:
        m.close()
    assert f"{group}\tEmpty\tClassic" in groups(bs, "list", "--state", "Empty").stdout.splitlines()
    plan = groups(bs, "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert plan.returncode == 0 and "dry run" in plan.stdout
    done = groups(bs, "reset-offsets", group, "--topic", topic, "--to-offset", "2", "--execute")
    assert done.returncode == 0, done.stderr
    after = groups(bs, "describe", group).stdout.splitlines()
    assert any(line.split()[:6] == [group, topic, "1", "2", "5", "3"] for line in after), after
    deleted = groups(bs, "delete", group)
    assert deleted.returncode == 0 and f"Deleted group {group}" in deleted.stdout
    assert group not in groups(bs, "list").stdout


def test_describing_a_group_that_does_not_exist_fails(broker_process: Any) -> None:
    described = groups(broker_process.bootstrap_servers, "describe", "nosuch-group")
    assert described.returncode == 1
    assert "consumer group 'nosuch-group' does not exist" in described.stderr
    assert "nosuch-group" not in described.stdout
