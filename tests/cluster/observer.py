"""A thread that watches a cluster while faults hit it, and the invariants it checks.

Every `interval` it asks each broker (from the test's namespace, with a short timeout)
for Metadata of the topic, then asks each broker for the high watermark (ListOffsets,
latest) of the partitions that broker says it leads, naming the leader epoch it
believes in. From the answers:

  * a broker's view of a partition's leader epoch never goes back (the controller's
    LeaderAndIsr/UpdateMetadata are applied in order, stale ones refused);
  * at most one leader per partition and leader epoch: every broker that names a leader
    for (partition, epoch) names the same one, and only that broker answers ListOffsets
    as leader at that epoch;
  * a leader's high watermark never goes back while it leads at one epoch (in one life
    of its process: `incarnation(broker)` tells lives apart).

High watermarks that are lower after a leader change are counted, not failed: a new
leader learns the high watermark from its followers' fetches, as Kafka's does. So are
those of a leader that restarted and leads again at the same epoch (its high
watermark restarts from its checkpoint): a controller that takes over after the
restart cannot tell that the leader bounced, as Kafka's ZooKeeper controller cannot.

Lock: the observer's own thread writes; the test reads after stop().
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse

LATEST = -1
LIST_OFFSETS_VERSION = 7
METADATA_VERSION = 12


@dataclass
class Observations:
    polls: int = 0
    violations: list[str] = field(default_factory=list)
    # (partition, leader epoch) -> brokers named leader or answering as leader
    leaders: dict[tuple[int, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    epochs_seen: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    hw_lower_after_leader_change: int = 0
    hw_lower_after_leader_restart: int = 0


class ClusterObserver:
    """See the module docstring."""

    def __init__(self, brokers: dict[int, tuple[str, int]], topic: str,
                 incarnation: Callable[[int], object], interval: float = 0.2,
                 timeout_s: float = 1.0) -> None:
        self.brokers = brokers
        self.incarnation = incarnation
        self.topic = topic
        self.interval = interval
        self.timeout_s = timeout_s
        self.seen = Observations()
        self._epoch: dict[tuple[int, int], int] = {}  # (observer, partition) -> last epoch
        # partition -> (epoch, (leader, its incarnation), high watermark)
        self._hw: dict[int, tuple[int, tuple[int, object], int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cluster-observer", daemon=True)

    def start(self) -> ClusterObserver:
        self._thread.start()
        return self

    def stop(self) -> Observations:
        self._stop.set()
        self._thread.join(60)
        return self.seen

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        self.seen.polls += 1
        for broker_id, (host, port) in self.brokers.items():
            try:
                with BrokerConnection(host, port, "fault-observer", timeout_s=self.timeout_s) as conn:
                    md: MetadataResponse = conn.request(MetadataRequest(
                        topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)],
                        allow_auto_topic_creation=False), METADATA_VERSION)
                    led = self._metadata(broker_id, md)
                    if led:
                        self._high_watermarks(broker_id, conn, led)
            except (KafkaClientError, OSError):
                continue

    def _metadata(self, observer: int, md: MetadataResponse) -> dict[int, int]:
        """Record the broker's view; the partitions it says it leads -> their epoch."""
        led = {}
        for t in md.topics:
            if t.name != self.topic or t.error_code != 0:
                continue
            for p in t.partitions:
                if p.leader_id < 0:
                    continue
                key = (observer, p.partition_index)
                last = self._epoch.get(key, -1)
                if p.leader_epoch < last:
                    self.seen.violations.append(
                        f"broker {observer}: leader epoch of partition {p.partition_index} "
                        f"went back from {last} to {p.leader_epoch}")
                self._epoch[key] = max(last, p.leader_epoch)
                self._leader(p.partition_index, p.leader_epoch, p.leader_id,
                             f"named by broker {observer}")
                if p.leader_id == observer:
                    led[p.partition_index] = p.leader_epoch
        return led

    def _leader(self, partition: int, epoch: int, leader: int, how: str) -> None:
        self.seen.epochs_seen[partition].add(epoch)
        leaders = self.seen.leaders[(partition, epoch)]
        if leaders and leader not in leaders:
            self.seen.violations.append(
                f"partition {partition} epoch {epoch}: leader {leader} ({how}) besides {sorted(leaders)}")
        leaders.add(leader)

    def _high_watermarks(self, broker_id: int, conn: BrokerConnection, led: dict[int, int]) -> None:
        response: ListOffsetsResponse = conn.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=self.topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=p, current_leader_epoch=epoch, timestamp=LATEST)
                    for p, epoch in sorted(led.items())])]), LIST_OFFSETS_VERSION)
        life = (broker_id, self.incarnation(broker_id))
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    continue
                epoch = led[p.partition_index]
                self._leader(p.partition_index, epoch, broker_id, "answering ListOffsets")
                previous = self._hw.get(p.partition_index)
                if previous is not None and p.offset < previous[2]:
                    if (previous[0], previous[1]) == (epoch, life):
                        self.seen.violations.append(
                            f"partition {p.partition_index} epoch {epoch}: high watermark went "
                            f"back from {previous[2]} to {p.offset} on leader {broker_id}")
                    elif epoch == previous[0]:
                        self.seen.hw_lower_after_leader_restart += 1
                    elif epoch > previous[0]:
                        self.seen.hw_lower_after_leader_change += 1
                if previous is None or epoch >= previous[0]:
                    self._hw[p.partition_index] = (epoch, life, p.offset)
