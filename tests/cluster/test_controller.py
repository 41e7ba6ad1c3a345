"""The controller against a fake ZooKeeper and fake broker channels, in process (as
Kafka's ControllerIntegrationTest / PartitionStateMachineTest run it against a mocked
KafkaZkClient): election and resignation, a broker's failure, controlled shutdown,
AlterPartition's checks, a reassignment from start to end. No process is started; the
tests wait for the controller's event queue to empty (controller.idle()), never for time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from kbroker.cluster import zk_data
from kbroker.cluster.controller.controller import ControllerConfig, KafkaController
from kbroker.cluster.controller.events import PREFERRED
from kbroker.cluster.controller.partition_state_machine import ControllerMovedError
from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.timers import Timers
from kbroker.utils.time import MockTime
from tests.cluster.fake_zookeeper import FakeChannels, FakeZkClient, FakeZooKeeper

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@dataclass
class Cluster:
    """A fake ZooKeeper, brokers registered in it (each its own session) and their
    controllers."""

    zk: FakeZooKeeper = field(default_factory=FakeZooKeeper)
    sessions: dict[int, FakeZkClient] = field(default_factory=dict)
    controllers: dict[int, KafkaController] = field(default_factory=dict)
    channels: dict[int, FakeChannels] = field(default_factory=dict)
    time: MockTime = field(default_factory=MockTime)
    timers: Timers = field(init=False)

    def __post_init__(self) -> None:
        self.timers = Timers(self.time)  # no loop: they fire when a test calls run_due()
        for path in zk_data.PERSISTENT_PATHS:
            self.zk.ensure(path)

    def register(self, broker_id: int) -> None:
        """The broker's session and its ephemeral /brokers/ids/<id>."""
        session = self.zk.client()
        self.sessions[broker_id] = session
        reg = BrokerRegistration(broker_id, (("PLAINTEXT", "127.0.0.1", 9090 + broker_id),), None)
        self.zk.apply([("create", zk_data.broker_path(broker_id), reg.encode(0), True)], session.session)

    def kill(self, broker_id: int) -> None:
        """The broker's session expires: its ephemeral znodes go."""
        self.zk.expire(self.sessions[broker_id].session)

    def start_controller(self, broker_id: int, **config: bool) -> KafkaController:
        channels = FakeChannels()
        config.setdefault("auto_leader_rebalance_enable", False)
        controller = KafkaController(ControllerConfig(broker_id=broker_id, listener="PLAINTEXT", **config),
                                     self.sessions[broker_id], channels, self.timers)
        self.controllers[broker_id] = controller
        self.channels[broker_id] = channels
        controller.startup()
        return controller

    def take_over(self, broker_id: int) -> None:
        """`broker_id` wins a later election: /controller goes and comes back naming it,
        the epoch moves (no controller of it runs)."""
        epoch = self.zk.read(zk_data.CONTROLLER_EPOCH_PATH)
        assert epoch is not None
        self.zk.apply([("delete", zk_data.CONTROLLER_PATH, -1)])
        self.zk.apply([("create", zk_data.CONTROLLER_PATH, zk_data.encode_controller(broker_id, 0), True),
                       ("set", zk_data.CONTROLLER_EPOCH_PATH, str(int(epoch[0]) + 1).encode(),
                        epoch[1].version)], self.sessions[broker_id].session)

    def create_topic(self, topic: str, replicas: dict[int, list[int]],
                     states: dict[int, LeaderAndIsr] | None = None) -> None:
        self.zk.apply([("create", zk_data.topic_path(topic),
                        TopicAssignment(topic, uuid.uuid4(), replicas).encode())])
        for p, state in (states or {}).items():
            self.zk.ensure(f"{zk_data.partitions_path(topic)}/{p}")
            self.zk.apply([("create", zk_data.partition_state_path(topic, p), state.encode())])

    def state(self, tp: TopicPartition) -> LeaderAndIsr:
        found = self.zk.read(zk_data.partition_state_path(tp.topic, tp.partition))
        assert found is not None
        return LeaderAndIsr.decode(found[0], found[1].version)

    def assignment(self, topic: str) -> TopicAssignment:
        found = self.zk.read(zk_data.topic_path(topic))
        assert found is not None
        return TopicAssignment.decode(topic, found[0])

    def controller_epoch(self) -> int:
        found = self.zk.read(zk_data.CONTROLLER_EPOCH_PATH)
        assert found is not None
        return int(found[0])

    async def idle(self) -> None:
        """Until no controller has an event left (one's events may queue another's)."""
        while True:
            for c in list(self.controllers.values()):
                await c.idle()
            if not any(c.pending_events for c in self.controllers.values()):
                return

    async def stop(self) -> None:
        for c in self.controllers.values():
            await c.shutdown()


def run(scenario: Callable[[Cluster], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster()
        try:
            await scenario(cluster)
        finally:
            await cluster.stop()
    asyncio.run(main())


async def three_brokers(cluster: Cluster, **config: bool) -> KafkaController:
    """Brokers 1, 2, 3; t-0 on [1, 2, 3], t-1 on [2, 3, 1]; broker 1's controller active."""
    for b in (1, 2, 3):
        cluster.register(b)
    cluster.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    controller = cluster.start_controller(1, **config)
    await cluster.idle()
    assert controller.active
    return controller


# -- election ---------------------------------------------------------------------------------------
def test_the_first_broker_becomes_the_controller_and_the_next_follows_it() -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.register(1)
        cluster.register(2)
        first = cluster.start_controller(1)
        await cluster.idle()
        second = cluster.start_controller(2)
        await cluster.idle()
        assert first.active and not second.active
        assert (first.active_controller_id, second.active_controller_id) == (1, 1)
        assert first.ctx.epoch == cluster.controller_epoch() == 1
        with pytest.raises(KafkaError) as refused:
            await second.controlled_shutdown(2, -1)
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
    run(scenario)


def test_when_the_controller_stops_another_broker_takes_over_with_the_next_epoch() -> None:
    async def scenario(cluster: Cluster) -> None:
        for b in (1, 2):
            cluster.register(b)
        cluster.create_topic("t", {0: [1, 2]})
        first, second = cluster.start_controller(1), cluster.start_controller(2)
        await cluster.idle()
        await first.shutdown()
        del cluster.controllers[1]
        cluster.kill(1)
        await cluster.idle()
        assert second.active and second.active_controller_id == 2
        assert second.ctx.epoch == cluster.controller_epoch() == 2
        state = cluster.state(T0)
        assert (state.leader, state.isr, state.controller_epoch) == (2, (2,), 2)
    run(scenario)


def test_a_controller_resigns_when_controller_names_another_broker() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        channels = cluster.channels[1]
        assert channels.brokers
        cluster.take_over(2)
        await cluster.idle()
        assert not controller.active and controller.active_controller_id == 2
        assert controller.ctx.states == {} and not channels.brokers
    run(scenario)


def test_a_write_after_another_controller_took_over_fails_and_the_controller_resigns() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        epoch = cluster.zk.read(zk_data.CONTROLLER_EPOCH_PATH)
        assert epoch is not None
        cluster.zk.apply([("set", zk_data.CONTROLLER_EPOCH_PATH, b"2", epoch[1].version)])
        before = cluster.state(T0)
        with pytest.raises(KafkaError) as refused:
            await controller.alter_partition(1, -1, [(T0, before.leader_epoch, before.zk_version, (1, 2))])
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        assert not controller.active
        assert cluster.state(T0) == before
    run(scenario)


def test_events_queued_before_a_resignation_are_not_processed_by_the_resigned_controller() -> None:
    """A broker change and a new topic seen while broker 1 still led, queued behind the
    ControllerChange that makes it resign: the resigned controller, its context reset,
    must neither write partition states (with controller epoch 0, past an epoch check
    that no longer holds) nor send requests (Kafka: each event's process() returns at
    once when the broker is not the active controller). A zombie's write moved leader
    epochs under the real controller, whose LeaderAndIsr the leaders then never got:
    ISRs stuck at one replica (test_random_faults)."""
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        before = {tp: cluster.state(tp) for tp in (T0, T1)}
        channels = cluster.channels[1]
        sent = len(channels.sent)
        cluster.take_over(2)
        cluster.kill(3)  # BrokerChange, queued while broker 1 is still active
        cluster.create_topic("t2", {0: [1, 2]})  # TopicChange, likewise
        await cluster.idle()
        assert not controller.active and controller.active_controller_id == 2
        assert {tp: cluster.state(tp) for tp in (T0, T1)} == before
        assert cluster.zk.read(zk_data.partition_state_path("t2", 0)) is None
        assert channels.sent[sent:] == []
        assert controller.ctx.states == {} and controller.ctx.brokers == {}
        # and whatever would still try is fenced: a reset context's epoch check matches no
        # /controller_epoch (ZooKeeper's -1 would match any)
        with pytest.raises(ControllerMovedError):
            await controller.partition_states.write_states(
                {TopicPartition("t2", 0): LeaderAndIsr(1, 0, (1, 2), 0)})
        assert cluster.zk.read(zk_data.partition_state_path("t2", 0)) is None
    run(scenario)


# -- broker failure ----------------------------------------------------------------------------------
def test_failover_elects_the_first_live_replica_and_tells_every_broker() -> None:
    async def scenario(cluster: Cluster) -> None:
        await three_brokers(cluster)
        assert cluster.state(T0) == LeaderAndIsr(1, 0, (1, 2, 3), 1, 0)
        assert cluster.state(T1) == LeaderAndIsr(2, 0, (2, 3, 1), 1, 0)
        sent = cluster.channels[1].take()
        leader_and_isr = {s.broker_id for s in FakeChannels.leader_and_isr(sent)}
        update_metadata = {s.broker_id for s in FakeChannels.update_metadata(sent)}
        assert leader_and_isr == update_metadata == {1, 2, 3}
    run(scenario)


def test_a_dead_brokers_leaderships_move_to_another_isr_member_and_it_leaves_the_isrs() -> None:
    async def scenario(cluster: Cluster) -> None:
        await three_brokers(cluster)
        cluster.channels[1].take()
        cluster.kill(2)
        await cluster.idle()
        assert cluster.state(T1) == LeaderAndIsr(3, 1, (3, 1), 1, 1)  # was led by 2
        assert cluster.state(T0) == LeaderAndIsr(1, 1, (1, 3), 1, 1)  # 2 leaves the ISR
        sent = cluster.channels[1].take()
        told = {(s.broker_id, ps.topic_name, p.partition_index, p.leader)
                for s in FakeChannels.leader_and_isr(sent)
                for ps in s.request.topic_states for p in ps.partition_states}
        assert told == {(1, "t", 0, 1), (3, "t", 0, 1), (1, "t", 1, 3), (3, "t", 1, 3)}
    run(scenario)


def test_a_state_write_whose_answer_was_lost_counts_as_written_and_the_brokers_are_told() -> None:
    """ZooKeeper committed the controller's write, then the connection dropped before the
    answer (ConnectionLoss). The state read back is the one written: the brokers must
    hear of it, or the leader stays at the old leader epoch while ZooKeeper has the new
    one, and every AlterPartition it sends is refused with FENCED_LEADER_EPOCH."""
    async def scenario(cluster: Cluster) -> None:
        await three_brokers(cluster)
        cluster.channels[1].take()
        cluster.sessions[1].lost_answers = 1
        cluster.kill(2)
        await cluster.idle()
        assert cluster.sessions[1].lost_answers == 0
        assert cluster.state(T1) == LeaderAndIsr(3, 1, (3, 1), 1, 1)
        assert cluster.state(T0) == LeaderAndIsr(1, 1, (1, 3), 1, 1)
        sent = cluster.channels[1].take()
        told = {(s.broker_id, ps.topic_name, p.partition_index, p.leader, p.leader_epoch)
                for s in FakeChannels.leader_and_isr(sent)
                for ps in s.request.topic_states for p in ps.partition_states}
        assert told == {(1, "t", 0, 1, 1), (3, "t", 0, 1, 1), (1, "t", 1, 3, 1), (3, "t", 1, 3, 1)}
    run(scenario)


@pytest.mark.parametrize(("unclean", "after"), [
    (False, (zk_data.NO_LEADER, 6, (2,))),  # offline: the ISR keeps its last member
    (True, (3, 6, (3,))),  # a live replica outside the ISR leads alone
])
def test_a_partition_whose_isr_is_all_dead_stays_offline_unless_unclean_election(
        unclean: bool, after: tuple[int, int, tuple[int, ...]]) -> None:
    async def scenario(cluster: Cluster) -> None:
        for b in (1, 2, 3):
            cluster.register(b)
        cluster.create_topic("u", {0: [2, 3]}, {0: LeaderAndIsr(2, 5, (2,), 0)})
        cluster.start_controller(1, unclean_leader_election_enable=unclean)
        await cluster.idle()
        cluster.kill(2)
        await cluster.idle()
        state = cluster.state(TopicPartition("u", 0))
        assert (state.leader, state.leader_epoch, state.isr) == after
    run(scenario)


# -- controlled shutdown ------------------------------------------------------------------------------
def test_controlled_shutdown_moves_the_brokers_leaderships_away() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        cluster.channels[1].take()
        epoch = controller.ctx.brokers[2].epoch
        with pytest.raises(KafkaError) as stale:
            await controller.controlled_shutdown(2, epoch - 1)
        assert stale.value.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert await controller.controlled_shutdown(2, epoch) == []
        assert cluster.state(T1) == LeaderAndIsr(3, 1, (3, 1), 1, 1)
        assert cluster.state(T0) == LeaderAndIsr(1, 1, (1, 3), 1, 1)
        stops = FakeChannels.stop_replica(cluster.channels[1].take())
        assert [(s.broker_id, [(t.topic_name, p.partition_index, p.delete_partition)
                               for t in s.request.topic_states for p in t.partition_states])
                for s in stops] == [(2, [("t", 0, False)])]
    run(scenario)


# -- AlterPartition -----------------------------------------------------------------------------------
def test_alter_partition_refuses_stale_epochs_and_writes_a_valid_change_version_checked() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        state = cluster.state(T0)  # leader 1, leader epoch 0, partition epoch 0

        async def alter(leader_epoch: int, partition_epoch: int, isr: tuple[int, ...],
                        broker: int = 1) -> tuple[int, LeaderAndIsr | None]:
            return (await controller.alter_partition(
                broker, -1, [(T0, leader_epoch, partition_epoch, isr)]))[T0]

        assert (await alter(0, 0, (1, 2), broker=2))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (await alter(1, 0, (1, 2)))[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert (await alter(0, 3, (1, 2)))[0] == ErrorCode.INVALID_UPDATE_VERSION
        assert (await alter(0, 0, (2, 3)))[0] == ErrorCode.INVALID_REQUEST  # without its leader
        code, written = await alter(0, 0, (1, 2))
        assert code == ErrorCode.NONE and written == LeaderAndIsr(1, 0, (1, 2), 1, 1)
        assert cluster.state(T0) == written
        assert (await alter(0, 0, (1, 2, 3)))[0] == ErrorCode.INVALID_UPDATE_VERSION
        # the znode changed behind the controller's back: its version-checked write fails
        cluster.zk.apply([("set", zk_data.partition_state_path("t", 0), state.encode(), 1)])
        code, _ = await alter(0, 1, (1, 2, 3))
        assert code == ErrorCode.INVALID_UPDATE_VERSION
        assert cluster.state(T0).isr == (1, 2, 3) and cluster.state(T0).zk_version == 2
        assert controller.ctx.states[T0].zk_version == 2  # it read the state again
    run(scenario)


def test_alter_partition_refuses_an_older_leader_epoch() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        cluster.kill(3)  # t-0: leader epoch 1, ISR (1, 2)
        await cluster.idle()
        answers = await controller.alter_partition(1, -1, [(T0, 0, 1, (1,))])
        assert answers[T0][0] == ErrorCode.FENCED_LEADER_EPOCH
        stale = await controller.alter_partition(1, 12345, [(T0, 1, 1, (1,))])
        assert stale[T0][0] == ErrorCode.STALE_BROKER_EPOCH
        assert cluster.state(T0).isr == (1, 2)
    run(scenario)


# -- reassignment --------------------------------------------------------------------------------------
def test_a_reassignment_adds_the_target_replicas_then_drops_the_removed_ones() -> None:
    async def scenario(cluster: Cluster) -> None:
        for b in (1, 2, 3):
            cluster.register(b)
        cluster.create_topic("r", {0: [1, 2]})
        controller = cluster.start_controller(1)
        await cluster.idle()
        tp = TopicPartition("r", 0)
        cluster.channels[1].take()
        assert await controller.alter_partition_reassignments({tp: [2, 3]}) == {tp: (ErrorCode.NONE, None)}
        a = cluster.assignment("r")
        assert (a.partitions[0], a.adding[0], a.removing[0]) == ([2, 3, 1], [3], [1])
        assert controller.list_partition_reassignments(None) == {tp: ([2, 3, 1], [3], [1])}
        state = cluster.state(tp)
        assert (state.leader, state.isr) == (1, (1, 2))
        # 3 caught up: the leader adds it to the ISR, and the move completes
        code, _ = (await controller.alter_partition(1, -1, [(tp, state.leader_epoch, state.zk_version,
                                                             (1, 2, 3))]))[tp]
        assert code == ErrorCode.NONE
        a = cluster.assignment("r")
        assert (a.partitions, a.adding, a.removing) == ({0: [2, 3]}, {}, {})
        state = cluster.state(tp)
        assert (state.leader, state.isr) == (2, (2, 3))
        assert controller.list_partition_reassignments(None) == {}
        stops = FakeChannels.stop_replica(cluster.channels[1].take())
        assert [(s.broker_id, [p.delete_partition for t in s.request.topic_states
                               for p in t.partition_states]) for s in stops] == [(1, [True])]
    run(scenario)


def test_a_reassignment_to_a_dead_broker_is_refused() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        answers = await controller.alter_partition_reassignments({T0: [1, 4], TopicPartition("x", 0): [1]})
        assert answers[T0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert answers[TopicPartition("x", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert cluster.assignment("t").partitions[0] == [1, 2, 3]
    run(scenario)


# -- preferred leaders ---------------------------------------------------------------------------------
async def broker_2_back_in_the_isr_of_t1(cluster: Cluster, controller: KafkaController) -> None:
    """Broker 2 dies (t-1 moves to 3), comes back and catches up: 3 adds it to the ISR."""
    cluster.kill(2)
    await cluster.idle()
    cluster.register(2)
    await cluster.idle()
    state = cluster.state(T1)
    assert (state.leader, state.isr) == (3, (3, 1))
    (code, _), = (await controller.alter_partition(3, -1, [(T1, state.leader_epoch, state.zk_version,
                                                           (3, 1, 2))])).values()
    assert code == ErrorCode.NONE


def test_elect_leaders_gives_a_partition_back_to_its_preferred_replica_once_in_the_isr() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        cluster.kill(2)
        await cluster.idle()
        cluster.register(2)
        await cluster.idle()
        results = await controller.elect_leaders(PREFERRED, [T0, T1, TopicPartition("x", 0)])
        assert {tp: r.error_code for tp, r in results.items()} == {
            T0: ErrorCode.ELECTION_NOT_NEEDED, T1: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            TopicPartition("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        state = cluster.state(T1)
        await controller.alter_partition(3, -1, [(T1, state.leader_epoch, state.zk_version, (3, 1, 2))])
        results = await controller.elect_leaders(PREFERRED, [T1])
        assert results[T1].error_code == ErrorCode.NONE
        assert (cluster.state(T1).leader, cluster.state(T1).isr) == (2, (3, 1, 2))
    run(scenario)


def test_the_preferred_election_znode_elects_the_preferred_leaders_it_names() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        await broker_2_back_in_the_isr_of_t1(cluster, controller)
        cluster.zk.apply([("create", zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                           b'{"version":1,"partitions":[{"topic":"t","partition":1}]}')])
        await cluster.idle()
        assert cluster.state(T1).leader == 2
        assert cluster.zk.read(zk_data.PREFERRED_REPLICA_ELECTION_PATH) is None
    run(scenario)


# -- topics ---------------------------------------------------------------------------------------------
def test_new_partitions_get_leaders_and_a_deleted_topic_leaves_zookeeper_and_the_brokers() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        a = cluster.assignment("t")
        a.partitions[2] = [3, 1, 2]
        cluster.zk.apply([("set", zk_data.topic_path("t"), a.encode(), -1)])
        await cluster.idle()
        assert cluster.state(TopicPartition("t", 2)) == LeaderAndIsr(3, 0, (3, 1, 2), 1, 0)
        cluster.channels[1].take()
        cluster.zk.apply([("create", f"{zk_data.DELETE_TOPICS_PATH}/t", b"")])
        await cluster.idle()
        assert [p for p in cluster.zk.nodes if p.startswith("/brokers/topics/t")
                or p.startswith(zk_data.DELETE_TOPICS_PATH + "/")] == []
        assert controller.ctx.assignments == {} and controller.ctx.states == {}
        sent = cluster.channels[1].take()
        deleted = {(s.broker_id, t.topic_name, p.partition_index, p.leader)
                   for s in FakeChannels.update_metadata(sent)
                   for t in s.request.topic_states for p in t.partition_states}
        assert deleted == {(b, "t", p, -2) for b in (1, 2, 3) for p in (0, 1, 2)}
        stops = {(s.broker_id, p.partition_index, p.delete_partition)
                 for s in FakeChannels.stop_replica(sent)
                 for t in s.request.topic_states for p in t.partition_states}
        assert stops == {(b, p, True) for b in (1, 2, 3) for p in (0, 1, 2)}
    run(scenario)


def test_a_reassignment_from_the_znode_whose_target_is_in_sync_completes_at_once() -> None:
    async def scenario(cluster: Cluster) -> None:
        controller = await three_brokers(cluster)
        cluster.zk.apply([("create", zk_data.REASSIGN_PARTITIONS_PATH,
                           zk_data.encode_reassignment({("t", 0): [2, 3]}))])
        await cluster.idle()
        assert controller.list_partition_reassignments(None) == {}
        assert cluster.zk.read(zk_data.REASSIGN_PARTITIONS_PATH) is None  # nothing left to do
        assert cluster.assignment("t").partitions[0] == [2, 3]
        state = cluster.state(T0)
        assert (state.leader, state.isr) == (2, (2, 3))
    run(scenario)


def test_the_auto_rebalance_runs_every_leader_imbalance_check_interval() -> None:
    async def scenario(cluster: Cluster) -> None:
        for b in (1, 2, 3):
            cluster.register(b)
        cluster.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
        controller = cluster.start_controller(1, auto_leader_rebalance_enable=True)
        await cluster.idle()
        await broker_2_back_in_the_isr_of_t1(cluster, controller)
        cluster.time.sleep(299_999)
        assert cluster.timers.run_due() == 0
        cluster.time.sleep(1)
        assert cluster.timers.run_due() == 1
        await cluster.idle()
        assert cluster.state(T1).leader == 2
        assert len(cluster.timers) == 1  # the next check, 300 s on
    run(scenario)
