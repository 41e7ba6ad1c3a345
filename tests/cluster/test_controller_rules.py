"""The controller's pure rules: leader elections (Kafka's PartitionLeaderElectionAlgorithms),
replica placement (Kafka's assignReplicasToBrokers, with the example of its own
documentation) and the znode formats (Kafka's ZkData JSON)."""

from __future__ import annotations

import random
import uuid

import pytest

from kbroker.cluster import zk_data
from kbroker.cluster.controller import election
from kbroker.cluster.controller.replica_assignment import (
    AssignmentError,
    assign_replicas,
    rack_alternated,
)
from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.kafka_uuid import uuid_to_base64


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    assert election.offline_leader([3, 1, 2], [1, 2, 3], {1, 2}, unclean=False) == (1, (1, 2))
    assert election.offline_leader([3, 1, 2], [3], {1, 2}, unclean=False) is None
    assert election.offline_leader([3, 1, 2], [3], {1, 2}, unclean=True) == (1, (1,))
    assert election.offline_leader([3, 1, 2], [2, 3], {1, 2, 3}, unclean=False) == (3, (2, 3))


def test_controlled_shutdown_and_preferred_elections() -> None:
    assert election.controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, (2, 3))
    assert election.controlled_shutdown_leader([1, 2], [1], {1, 2}, {1}) is None
    assert election.preferred_leader([2, 1], [1, 2], {1, 2}) == (2, (1, 2))
    assert election.preferred_leader([2, 1], [1], {1, 2}) is None  # not in the ISR
    assert election.preferred_leader([2, 1], [1, 2], {1}) is None  # not alive
    assert election.reassignment_leader([4, 5], [1, 5, 4], {1, 4, 5}) == (4, (1, 5, 4))


def test_assignment_matches_kafkas_documented_example() -> None:
    # AdminUtils' comment: 5 brokers, 10 partitions, replication factor 3, start index 0
    got = assign_replicas({b: None for b in range(5)}, 10, 3, start_index=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3] and got[9] == [4, 1, 2]
    leaders = [r[0] for r in got.values()]
    assert sorted(leaders) == sorted(list(range(5)) * 2)


def test_assignment_spreads_racks_and_refuses_what_cannot_be() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]
    got = assign_replicas(racks, 12, 3, rng=random.Random(7))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3  # one copy per rack
    with pytest.raises(AssignmentError):
        assign_replicas({1: None, 2: None}, 1, 3)
    with pytest.raises(AssignmentError):
        assign_replicas({1: "a", 2: None}, 1, 2)  # racks on some brokers only


def test_znode_formats_are_kafkas() -> None:
    reg = BrokerRegistration(2, (("PLAINTEXT", "10.0.0.2", 9092),), "r1")
    data = reg.encode(1700000000000)
    back = BrokerRegistration.decode(2, data, epoch=77)
    assert back.endpoint("PLAINTEXT") == ("10.0.0.2", 9092) and back.rack == "r1" and back.epoch == 77
    assert b'"endpoints":["PLAINTEXT://10.0.0.2:9092"]' in data and b'"version":5' in data

    tid = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    topic = TopicAssignment("t", tid, {0: [1, 2], 1: [2, 3]}, adding={1: [3]})
    text = topic.encode()
    assert b'"partitions":{"0":[1,2],"1":[2,3]}' in text
    again = TopicAssignment.decode("t", text)
    assert again.topic_id == tid and again.partitions == topic.partitions and again.adding == {1: [3]}
    assert f'"topic_id":"{uuid_to_base64(tid)}"'.encode() in text

    state = LeaderAndIsr(1, 4, (1, 2), 3)
    parsed = LeaderAndIsr.decode(state.encode(), zk_version=9)
    assert (parsed.leader, parsed.leader_epoch, parsed.isr, parsed.zk_version) == (1, 4, (1, 2), 9)
    # as Kafka writes it (a state znode written by Kafka 3.x reads back)
    kafka = b'{"controller_epoch":2,"leader":3,"version":1,"leader_epoch":7,"isr":[3,1]}'
    assert LeaderAndIsr.decode(kafka, 0).isr == (3, 1)
    assert zk_data.decode_controller(zk_data.encode_controller(5, 1)) == 5
    assert zk_data.decode_config_change(zk_data.encode_config_change("topics", "t")) == ("topics", "t")
    moves = {("t", 0): [1, 2]}
    assert zk_data.decode_reassignment(zk_data.encode_reassignment(moves)) == moves
