"""Checkpoint files, partition.metadata and the leader epoch cache, in Kafka's formats."""

from __future__ import annotations

import os
import uuid

import pytest

from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.checkpoints import OffsetCheckpointFile
from kbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from kbroker.storage.partition_metadata import read_partition_metadata, write_partition_metadata


def test_offset_checkpoint_format(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "recovery-point-offset-checkpoint")
    f = OffsetCheckpointFile(path)
    assert f.read() == {}
    offsets = {TopicPartition("a-b", 1): 10, TopicPartition("a", 0): 5}
    f.write(offsets)
    assert open(path).read() == "0\n2\na 0 5\na-b 1 10\n"
    assert f.read() == offsets
    assert not os.path.exists(path + ".tmp")
    with open(path, "w") as out:
        out.write("0\n3\na 0 1\n")
    with pytest.raises(ValueError):
        f.read()


def test_partition_metadata(tmp_path: object) -> None:
    tid = uuid.uuid4()
    write_partition_metadata(str(tmp_path), tid)
    text = open(os.path.join(str(tmp_path), "partition.metadata")).read()
    assert text == f"version: 0\ntopic_id: {uuid_to_base64(tid)}"
    assert read_partition_metadata(str(tmp_path)) == tid


def test_topic_partition_dir_names() -> None:
    assert TopicPartition.from_dir_name("my-topic-12") == TopicPartition("my-topic", 12)
    assert TopicPartition("t", 3).dir_name == "t-3"
    for bad in ("nodash", "t-", "t-x", "-1"):
        with pytest.raises(ValueError):
            TopicPartition.from_dir_name(bad)


def test_leader_epoch_cache(tmp_path: object) -> None:
    c = LeaderEpochFileCache(str(tmp_path))
    c.assign(0, 0)
    c.assign(2, 100)
    c.assign(1, 50)  # stale epoch: ignored
    c.assign(5, 300)
    assert c.end_offset_for(-1, 400) == (-1, -1)
    assert c.entries == [(0, 0), (2, 100), (5, 300)]
    assert c.end_offset_for(0, 400) == (0, 100)
    assert c.end_offset_for(1, 400) == (0, 100)
    assert c.end_offset_for(3, 400) == (2, 300)
    assert c.end_offset_for(5, 400) == (5, 400)
    assert c.end_offset_for(7, 400) == (-1, -1)  # above the latest: unknown (Kafka's answer)
    assert c.epoch_for_offset(150) == 2
    c.flush()
    assert open(c.path).read() == "0\n3\n0 0\n2 100\n5 300\n"
    assert LeaderEpochFileCache(str(tmp_path)).entries == c.entries
    c.truncate_from_end(200)
    assert c.entries == [(0, 0), (2, 100)]
    c.truncate_from_start(120)
    assert c.entries == [(2, 120)]
