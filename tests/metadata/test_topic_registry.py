"""TopicRegistry: topics in memory and on disk agree, even when the disk refuses a write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbroker.metadata.topic_registry import InvalidTopicError, TopicRegistry


def registry(tmp_path: Path) -> TopicRegistry:
    r = TopicRegistry(str(tmp_path / "kbroker-topics.json"))
    r.load()
    return r


def test_changes_survive_a_reload(tmp_path: Path) -> None:
    r = registry(tmp_path)
    a = r.create("a", 3, {"retention.ms": "1000"})
    r.create("b", 1)
    r.set_partitions("a", 5)
    r.set_configs("b", {"cleanup.policy": "compact"})
    r.delete("b")
    again = registry(tmp_path)
    assert again.names() == ["a"]
    info = again.get("a")
    assert info is not None and info.partitions == 5 and info.topic_id == a.topic_id
    assert info.configs == {"retention.ms": "1000"} and again.get_by_id(a.topic_id) is info


def test_invalid_requests_are_refused(tmp_path: Path) -> None:
    r = registry(tmp_path)
    r.create("a", 2)
    with pytest.raises(KeyError):
        r.create("a", 1)
    with pytest.raises(InvalidTopicError):
        r.create("bad name!", 1)
    with pytest.raises(ValueError):
        r.set_partitions("a", 1)  # only grows


def test_a_failed_save_leaves_memory_as_it_was(tmp_path: Path) -> None:
    r = registry(tmp_path)
    r.create("kept", 2)
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):  # root ignores the mode: make the write fail otherwise
            (tmp_path / "kbroker-topics.json.tmp").mkdir()
        with pytest.raises(OSError):
            r.create("lost", 1)
        assert r.get("lost") is None
        with pytest.raises(OSError):
            r.set_partitions("kept", 4)
        kept = r.get("kept")
        assert kept is not None and kept.partitions == 2
        with pytest.raises(OSError):
            r.delete("kept")
        assert r.get("kept") is not None
    finally:
        os.chmod(tmp_path, 0o700)
    assert registry(tmp_path).names() == ["kept"]
