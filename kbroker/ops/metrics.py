"""/metrics: the broker's figures in Prometheus' text format, through prometheus-client.

Names are those the Prometheus JMX exporter gives Kafka's MBeans with its Kafka rules
(lowercased, `kafka_<domain>_<type>_<name>`, `PerSec` meters as `_total` counters), so
dashboards made for Kafka need few changes; the one difference of kind: Kafka's time
histograms (RequestMetrics, LogFlushStats) are Prometheus histograms here (`_bucket`,
`_sum`, `_count`), which add up across brokers, where the JMX exporter gives quantile
gauges (`histogram_quantile(0.99, rate(..._bucket[1m]))` replaces `{quantile="0.99"}`).
Consumer lag is named as kafka-exporter names it. METRICS lists every family but the
metrics clients push (KIP-714), named by kbroker.ops.client_metrics.

Nothing is counted here: a scrape reads what its owners keep (BrokerTopicStats,
RequestMetrics, the SocketServer's connection counts, ReplicaManager, LogManager, the
group coordinator, the controller) on the event loop, into plain prometheus-client
families, in steps of STEP partitions or groups between which the loop serves others;
the text is formatted off the loop (kbroker.ops.listener).
Before the broker runs (starting, loading logs) only the broker state and the process
figures are there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.metrics_core import Metric

from kbroker.cluster.broker_topic_stats import TopicStats
from kbroker.coordinator.group_metadata import GroupState
from kbroker.ops import client_metrics
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_json import api_name, error_name
from kbroker.server.request_metrics import TIMES
from kbroker.utils.histogram import Histogram

if TYPE_CHECKING:
    from kbroker.ops.served_broker import ServedBroker
    from kbroker.server.request_services import RequestServices


@dataclass(frozen=True)
class MetricName:
    name: str  # as exposed (counters with their _total)
    kind: str  # counter, gauge, histogram
    labels: str
    kafka: str  # the MBean (or tool) it stands for
    doc: str


def _m(name: str, kind: str, labels: str, kafka: str, doc: str) -> MetricName:
    return MetricName(name, kind, labels, kafka, doc)


_BTM = "kafka.server:type=BrokerTopicMetrics,name="
_TOPIC_COUNTERS = {  # TopicStats attribute -> metric
    "messages_in": _m("kafka_server_brokertopicmetrics_messagesin_total", "counter", "[topic]",
                      _BTM + "MessagesInPerSec", "Records appended by producers."),
    "bytes_in": _m("kafka_server_brokertopicmetrics_bytesin_total", "counter", "[topic]",
                   _BTM + "BytesInPerSec", "Bytes of record batches appended by producers."),
    "bytes_out": _m("kafka_server_brokertopicmetrics_bytesout_total", "counter", "[topic]",
                    _BTM + "BytesOutPerSec", "Bytes of records sent to consumers."),
    "bytes_rejected": _m("kafka_server_brokertopicmetrics_bytesrejected_total", "counter",
                         "[topic]", _BTM + "BytesRejectedPerSec",
                         "Bytes of produced batches refused for their size."),
    "replication_bytes_out": _m("kafka_server_brokertopicmetrics_replicationbytesout_total",
                                "counter", "[topic]", _BTM + "ReplicationBytesOutPerSec",
                                "Bytes of records sent to followers."),
    "total_produce_requests": _m("kafka_server_brokertopicmetrics_totalproducerequests_total",
                                 "counter", "[topic]", _BTM + "TotalProduceRequestsPerSec",
                                 "Partitions of Produce requests."),
    "total_fetch_requests": _m("kafka_server_brokertopicmetrics_totalfetchrequests_total",
                               "counter", "[topic]", _BTM + "TotalFetchRequestsPerSec",
                               "Partition reads of Fetch requests."),
    "failed_produce_requests": _m("kafka_server_brokertopicmetrics_failedproducerequests_total",
                                  "counter", "[topic]", _BTM + "FailedProduceRequestsPerSec",
                                  "Partitions of Produce requests whose append failed."),
    "failed_fetch_requests": _m("kafka_server_brokertopicmetrics_failedfetchrequests_total",
                                "counter", "[topic]", _BTM + "FailedFetchRequestsPerSec",
                                "Partition reads of Fetch requests that failed."),
}
_RM = "kafka.network:type=RequestMetrics,name="
_TIME_METRICS = {  # RequestMetrics histogram -> metric
    "request_queue": ("kafka_network_requestmetrics_requestqueuetimems", "RequestQueueTimeMs",
                      "From the request read whole to its handler (ms)."),
    "local": ("kafka_network_requestmetrics_localtimems", "LocalTimeMs",
              "The handler's own run (ms)."),
    "remote": ("kafka_network_requestmetrics_remotetimems", "RemoteTimeMs",
               "The handler waiting: long-poll Fetch, acks=all, a rebalance (ms)."),
    "response_queue": ("kafka_network_requestmetrics_responsequeuetimems", "ResponseQueueTimeMs",
                       "From the response ready to its turn on the connection (ms)."),
    "send": ("kafka_network_requestmetrics_responsesendtimems", "ResponseSendTimeMs",
             "From its turn to its last byte written (ms)."),
    "total": ("kafka_network_requestmetrics_totaltimems", "TotalTimeMs",
              "From the request read whole to its response written (ms)."),
}
_RMGR = "kafka.server:type=ReplicaManager,name="
_LOG = "kafka.log:type=Log,name="
_PART = "kafka.cluster:type=Partition,name="
_CTRL = "kafka.controller:type=KafkaController,name="
_GMM = "kafka.coordinator.group:type=GroupMetadataManager,name="
_SSM = "kafka.server:type=socket-server-metrics,listener=L,networkProcessor=0 "
_GROUP_STATES = {  # GroupMetadataManager gauge per state
    GroupState.STABLE: "stable", GroupState.PREPARING_REBALANCE: "preparingrebalance",
    GroupState.COMPLETING_REBALANCE: "completingrebalance", GroupState.EMPTY: "empty",
    GroupState.DEAD: "dead",
}

METRICS: tuple[MetricName, ...] = (
    *_TOPIC_COUNTERS.values(),
    _m("kafka_network_requestmetrics_requests_total", "counter", "request, version",
       _RM + "RequestsPerSec", "Requests answered, per API and version."),
    _m("kafka_network_requestmetrics_errors_total", "counter", "request, error",
       _RM + "ErrorsPerSec", "Error codes in responses (per partition included; NONE too)."),
    *(_m(name, "histogram", "request", _RM + mbean, doc)
      for name, mbean, doc in _TIME_METRICS.values()),
    _m("kafka_network_requestchannel_requestqueuesize", "gauge", "",
       "kafka.network:type=RequestChannel,name=RequestQueueSize",
       "Requests read and not yet answered."),
    _m("kafka_server_socket_server_metrics_connection_count", "gauge",
       "listener, networkProcessor", _SSM + "connection-count", "Open connections."),
    _m("kafka_server_socket_server_metrics_connection_creation_total", "counter",
       "listener, networkProcessor", _SSM + "connection-creation-total", "Connections accepted."),
    _m("kafka_server_socket_server_metrics_connection_close_total", "counter",
       "listener, networkProcessor", _SSM + "connection-close-total", "Connections closed."),
    _m("kafka_log_log_size", "gauge", "topic, partition", _LOG + "Size",
       "Bytes of the partition's segments on disk."),
    _m("kafka_log_log_logstartoffset", "gauge", "topic, partition", _LOG + "LogStartOffset",
       "The partition's log start offset."),
    _m("kafka_log_log_logendoffset", "gauge", "topic, partition", _LOG + "LogEndOffset",
       "The partition's log end offset."),
    _m("kafka_log_log_numlogsegments", "gauge", "topic, partition", _LOG + "NumLogSegments",
       "The partition's segments."),
    _m("kafka_cluster_partition_underreplicated", "gauge", "topic, partition",
       _PART + "UnderReplicated", "1 when this broker leads the partition and its ISR is "
       "smaller than its replicas."),
    _m("kafka_cluster_partition_underminisr", "gauge", "topic, partition",
       _PART + "UnderMinIsr", "1 when this broker leads the partition and its ISR is smaller "
       "than min.insync.replicas."),
    _m("kafka_cluster_partition_insyncreplicascount", "gauge", "topic, partition",
       _PART + "InSyncReplicasCount", "The ISR's size (partitions led here)."),
    _m("kafka_cluster_partition_replicascount", "gauge", "topic, partition",
       _PART + "ReplicasCount", "The replicas (partitions led here)."),
    _m("kafka_server_replicamanager_partitioncount", "gauge", "", _RMGR + "PartitionCount",
       "Partitions with a replica on this broker."),
    _m("kafka_server_replicamanager_leadercount", "gauge", "", _RMGR + "LeaderCount",
       "Partitions this broker leads."),
    _m("kafka_server_replicamanager_underreplicatedpartitions", "gauge", "",
       _RMGR + "UnderReplicatedPartitions", "Partitions led here with a short ISR."),
    _m("kafka_server_replicamanager_underminisrpartitioncount", "gauge", "",
       _RMGR + "UnderMinIsrPartitionCount", "Partitions led here under min.insync.replicas."),
    _m("kafka_server_replicamanager_offlinereplicacount", "gauge", "",
       _RMGR + "OfflineReplicaCount", "Replicas in offline log dirs."),
    _m("kafka_server_replicamanager_isrshrinks_total", "counter", "", _RMGR + "IsrShrinksPerSec",
       "ISR shrinks this broker made as leader (cluster mode)."),
    _m("kafka_server_replicamanager_isrexpands_total", "counter", "", _RMGR + "IsrExpandsPerSec",
       "ISR expansions this broker made as leader (cluster mode)."),
    _m("kafka_controller_kafkacontroller_activecontrollercount", "gauge", "",
       _CTRL + "ActiveControllerCount", "1 on the controller (a single broker is its own)."),
    _m("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", "",
       _CTRL + "OfflinePartitionsCount", "Partitions without a leader (on the controller)."),
    _m("kafka_controller_kafkacontroller_globaltopiccount", "gauge", "",
       _CTRL + "GlobalTopicCount", "Topics in the cluster (on the controller)."),
    _m("kafka_controller_kafkacontroller_globalpartitioncount", "gauge", "",
       _CTRL + "GlobalPartitionCount", "Partitions in the cluster (on the controller)."),
    _m("kafka_coordinator_group_groupmetadatamanager_numgroups", "gauge", "", _GMM + "NumGroups",
       "Groups this broker coordinates."),
    *(_m(f"kafka_coordinator_group_groupmetadatamanager_numgroups{suffix}", "gauge", "",
         _GMM + f"NumGroups{state.value}", f"Groups coordinated here in state {state.value}.")
      for state, suffix in _GROUP_STATES.items()),
    _m("kafka_coordinator_group_groupmetadatamanager_numoffsets", "gauge", "",
       _GMM + "NumOffsets", "Committed offsets of the groups coordinated here."),
    _m("kafka_server_group_coordinator_metrics_group_completed_rebalance_count", "gauge", "",
       "kafka.server:type=group-coordinator-metrics group-completed-rebalance-count",
       "Rebalances completed (a generation with members) since start."),
    _m("kafka_consumergroup_current_offset", "gauge", "consumergroup, topic, partition",
       "kafka-exporter", "A group's committed offset."),
    _m("kafka_consumergroup_lag", "gauge", "consumergroup, topic, partition", "kafka-exporter",
       "High watermark minus committed offset (partitions with a replica here)."),
    _m("kafka_consumergroup_lag_sum", "gauge", "consumergroup, topic", "kafka-exporter",
       "A group's lag summed over a topic's partitions."),
    _m("kafka_consumergroup_members", "gauge", "consumergroup", "kafka-exporter",
       "A group's members."),
    _m("kafka_log_logflushstats_logflushrateandtimems", "histogram", "",
       "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs", "Each fsync of a log (ms)."),
    _m("kafka_log_logmanager_offlinelogdirectorycount", "gauge", "",
       "kafka.log:type=LogManager,name=OfflineLogDirectoryCount", "Log dirs offline."),
    _m("kafka_log_logmanager_logdirectoryoffline", "gauge", "logDirectory",
       "kafka.log:type=LogManager,name=LogDirectoryOffline", "1 for an offline log dir."),
    _m("kafka_log_logcleaner_max_buffer_utilization_percent", "gauge", "",
       "kafka.log:type=LogCleaner,name=max-buffer-utilization-percent",
       "How full the offset map of the last cleaning got (% of log.cleaner.dedupe.buffer.size "
       "per thread)."),
    _m("kafka_log_logcleaner_cleaner_recopy_percent", "gauge", "",
       "kafka.log:type=LogCleaner,name=cleaner-recopy-percent",
       "Bytes written over bytes read by the last cleaning (%)."),
    _m("kafka_log_logcleaner_max_clean_time_secs", "gauge", "",
       "kafka.log:type=LogCleaner,name=max-clean-time-secs", "How long the last cleaning took."),
    _m("kafka_log_logcleanermanager_max_dirty_percent", "gauge", "",
       "kafka.log:type=LogCleanerManager,name=max-dirty-percent",
       "The largest dirty share of a compacted log at the cleaner's last look (%)."),
    _m("kafka_log_logcleanermanager_uncleanable_partitions_count", "gauge", "logDirectory",
       "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count",
       "Compacted logs whose cleaning failed (left alone until a restart)."),
    _m("kbroker_log_cleaner_cleanings_total", "counter", "", "kbroker's own",
       "Cleanings done since start."),
    _m("kbroker_log_cleaner_read_bytes_total", "counter", "", "kbroker's own",
       "Bytes of log the cleanings read (the rewrite, the offset map not counted)."),
    _m("kbroker_log_cleaner_written_bytes_total", "counter", "", "kbroker's own",
       "Bytes the cleanings wrote."),
    _m("kbroker_log_cleaner_removed_records_total", "counter", "", "kbroker's own",
       "Records the cleanings removed."),
    _m("kbroker_log_manager_load_time_ms", "gauge", "", "kbroker's own",
       "How long the start took to load (and recover) the logs."),
    _m("kbroker_log_manager_recovered_logs", "gauge", "", "kbroker's own",
       "Logs recovered at start (after an unclean shutdown)."),
    *(_m(f"kafka_server_client_metrics_{n.replace('-', '_')}" + ("_total" if k == "counter" else ""),
         k, "", f"kafka.server:type=client-metrics,name={n}", doc) for n, k, doc in (
        ("instance-count", "gauge", "Client instances known from their GetTelemetrySubscriptions "
         "and PushTelemetry (KIP-714), expired max(60 s, 3 x push interval) after their last."),
        ("throttle-count", "counter", "Telemetry requests refused for coming before the push "
         "interval."),
        ("unknown-subscription-request-count", "counter", "Pushes with a subscription id the "
         "instance no longer has."),
        ("plugin-error-count", "counter", "Pushes whose metrics did not decode as OTLP (Kafka: "
         "its plugin failed)."))),
    _m("kafka_server_kafkaserver_brokerstate", "gauge", "",
       "kafka.server:type=KafkaServer,name=BrokerState",
       "0 not running, 1 starting, 2 recovery (loading logs), 3 running, 6 pending "
       "controlled shutdown, 7 shutting down."),
    _m("process_cpu_seconds_total", "counter", "", "JMX exporter's process collector",
       "CPU time of the broker process (user + system)."),
    _m("process_resident_memory_bytes", "gauge", "", "JMX exporter's process collector", "RSS."),
    _m("process_open_fds", "gauge", "", "JMX exporter's process collector",
       "Open file descriptors."),
    _m("python_gc_collections_total", "counter", "generation", "(jvm_gc_collection_seconds)",
       "Garbage collections per generation (also python_gc_objects_collected_total, ...)."),
)


def _family(name: str, kind: str, doc: str) -> Metric:
    base = name.removesuffix("_total") if kind == "counter" else name
    return Metric(base, doc, kind)


class Families:
    """The families of one scrape, made on first use."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}
        self._docs = {m.name: m for m in METRICS}

    def add(self, name: str, labels: dict[str, str], value: float) -> None:
        family = self.by_name.get(name)
        if family is None:
            spec = self._docs[name]
            family = self.by_name[name] = _family(name, spec.kind, spec.doc)
        family.add_sample(name, labels, value)

    def histogram(self, name: str, labels: dict[str, str], histogram: Histogram) -> None:
        family = self.by_name.get(name)
        if family is None:
            family = self.by_name[name] = _family(name, "histogram", self._docs[name].doc)
        running = 0
        for le, count in histogram.cumulative():
            family.add_sample(name + "_bucket", {**labels, "le": le}, count)
            running = count
        family.add_sample(name + "_count", labels, running)
        family.add_sample(name + "_sum", labels, histogram.sum)


STEP = 500  # partitions or groups read between two yields of collect_steps


def collect(broker: ServedBroker) -> list[Metric]:
    """The broker's families, in one go (on its event loop)."""
    out = Families()
    for _ in collect_steps(broker, out):
        pass
    return list(out.by_name.values())


def collect_steps(broker: ServedBroker, out: Families) -> Iterator[None]:
    """Fill `out`, yielding every STEP partitions or groups, so that the loop may serve
    the Kafka listeners between steps (kbroker.ops.listener awaits between them)."""
    out.add("kafka_server_kafkaserver_brokerstate", {}, broker.phase.value)
    state, server = broker.services, broker.server
    if state is None or server is None or not broker.running:
        return
    _topic_stats(out, state)
    if broker.request_metrics is not None:
        _request_metrics(out, broker)
    out.add("kafka_network_requestchannel_requestqueuesize", {}, server.request_queue.requests)
    _connections(out, broker)
    yield from _partitions(out, state)
    _controller(out, state)
    yield from _groups(out, state)
    _logs(out, state)
    yield from _client_metrics(out, state)


def _topic_stats(out: Families, state: RequestServices) -> None:
    def add(labels: dict[str, str], stats: TopicStats) -> None:
        for attr, spec in _TOPIC_COUNTERS.items():
            out.add(spec.name, labels, getattr(stats, attr))

    add({}, state.topic_stats.all_topics())
    for topic, stats in state.topic_stats.topics():
        add({"topic": topic}, stats)


def _request_metrics(out: Families, broker: ServedBroker) -> None:
    assert broker.request_metrics is not None
    for api_key, m in sorted(broker.request_metrics.apis.items()):
        request = api_name(api_key)
        for version, n in sorted(m.requests.items()):
            out.add("kafka_network_requestmetrics_requests_total",
                    {"request": request, "version": str(version)}, n)
        for code, n in sorted(m.errors.items()):
            out.add("kafka_network_requestmetrics_errors_total",
                    {"request": request, "error": error_name(code)}, n)
        for time_name in TIMES:
            out.histogram(_TIME_METRICS[time_name][0], {"request": request},
                          m.histogram(time_name))


def _connections(out: Families, broker: ServedBroker) -> None:
    server = broker.server
    open_by_listener: dict[str, int] = {bl.name: 0 for bl in server.listeners}
    for conn in server.connections:
        open_by_listener[conn.listener_name] = open_by_listener.get(conn.listener_name, 0) + 1
    names = set(open_by_listener) | set(server.connections_created)
    for name in sorted(names):
        labels = {"listener": name, "networkProcessor": "0"}
        out.add("kafka_server_socket_server_metrics_connection_count", labels,
                open_by_listener.get(name, 0))
        out.add("kafka_server_socket_server_metrics_connection_creation_total", labels,
                server.connections_created.get(name, 0))
        out.add("kafka_server_socket_server_metrics_connection_close_total", labels,
                server.connections_closed.get(name, 0))


def _partitions(out: Families, state: RequestServices) -> Iterator[None]:
    manager = state.log_manager
    replica_manager = state.replica_manager
    leaders = under_replicated = under_min_isr = offline = 0
    logs = list(manager.all_logs().items())
    for i, (tp, lg) in enumerate(logs):
        if i % STEP == STEP - 1:
            yield
        labels = {"topic": tp.topic, "partition": str(tp.partition)}
        if lg.closed:
            offline += 1
            continue
        out.add("kafka_log_log_size", labels, lg.size_in_bytes)
        out.add("kafka_log_log_logstartoffset", labels, lg.log_start_offset)
        out.add("kafka_log_log_logendoffset", labels, lg.log_end_offset)
        out.add("kafka_log_log_numlogsegments", labels, len(lg.segments))
        partition = replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            continue
        leaders += 1
        isr, replicas = len(partition.isr), len(partition.state.replicas)
        under = int(isr < replicas)
        short = int(isr < lg.config.min_insync_replicas)
        under_replicated += under
        under_min_isr += short
        out.add("kafka_cluster_partition_underreplicated", labels, under)
        out.add("kafka_cluster_partition_underminisr", labels, short)
        out.add("kafka_cluster_partition_insyncreplicascount", labels, isr)
        out.add("kafka_cluster_partition_replicascount", labels, replicas)
    out.add("kafka_server_replicamanager_partitioncount", {}, len(logs))
    out.add("kafka_server_replicamanager_leadercount", {}, leaders)
    out.add("kafka_server_replicamanager_underreplicatedpartitions", {}, under_replicated)
    out.add("kafka_server_replicamanager_underminisrpartitioncount", {}, under_min_isr)
    out.add("kafka_server_replicamanager_offlinereplicacount", {}, offline)
    out.add("kafka_server_replicamanager_isrshrinks_total", {}, replica_manager.isr_shrinks)
    out.add("kafka_server_replicamanager_isrexpands_total", {}, replica_manager.isr_expands)


def controller_figures(state: RequestServices) -> tuple[int, int, int, int]:
    """(active, offline partitions, topics, partitions) as the controller counts them; a
    broker that is not the controller reports zeros, as in Kafka."""
    try:
        controller = state.support.require_zk().controller
    except ZkRequired:  # a single broker is the controller of its cluster
        topics = list(state.topics)
        offline = sum(1 for tp, lg in state.log_manager.all_logs().items() if lg.closed)
        return 1, offline, len(topics), sum(t.partitions for t in topics)
    if not controller.active:
        return 0, 0, 0, 0
    ctx = controller.ctx
    live = ctx.live
    offline = sum(1 for s in ctx.states.values() if s.leader < 0 or s.leader not in live)
    return 1, offline, len(ctx.assignments), len(ctx.states)


def _controller(out: Families, state: RequestServices) -> None:
    active, offline, topics, partitions = controller_figures(state)
    out.add("kafka_controller_kafkacontroller_activecontrollercount", {}, active)
    out.add("kafka_controller_kafkacontroller_offlinepartitionscount", {}, offline)
    out.add("kafka_controller_kafkacontroller_globaltopiccount", {}, topics)
    out.add("kafka_controller_kafkacontroller_globalpartitioncount", {}, partitions)


def group_lag(state: RequestServices, group: Any) -> Iterator[tuple[str, int, int, int | None]]:
    """(topic, partition, committed offset, lag or None) of each committed offset of a
    group; lag = high watermark - committed, where this broker holds a replica."""
    for (topic, partition), om in sorted(group.offsets.items()):
        lg = state.get_log(topic, partition)
        lag = None if lg is None or lg.closed else max(lg.high_watermark - om.offset, 0)
        yield topic, partition, om.offset, lag


def _groups(out: Families, state: RequestServices) -> Iterator[None]:
    coordinator = state.group_coordinator
    groups = list(coordinator.groups.values())
    out.add("kafka_coordinator_group_groupmetadatamanager_numgroups", {}, len(groups))
    for group_state, suffix in _GROUP_STATES.items():
        out.add(f"kafka_coordinator_group_groupmetadatamanager_numgroups{suffix}", {},
                sum(1 for g in groups if g.state is group_state))
    out.add("kafka_coordinator_group_groupmetadatamanager_numoffsets", {},
            sum(len(g.offsets) for g in groups))
    out.add("kafka_server_group_coordinator_metrics_group_completed_rebalance_count", {},
            coordinator.completed_rebalances)
    for i, group in enumerate(groups):
        if i % STEP == STEP - 1:
            yield
        out.add("kafka_consumergroup_members", {"consumergroup": group.group_id},
                len(group.members))
        sums: dict[str, int] = {}
        for topic, partition, offset, lag in group_lag(state, group):
            labels = {"consumergroup": group.group_id, "topic": topic,
                      "partition": str(partition)}
            out.add("kafka_consumergroup_current_offset", labels, offset)
            if lag is not None:
                out.add("kafka_consumergroup_lag", labels, lag)
                sums[topic] = sums.get(topic, 0) + lag
        for topic, total in sums.items():
            out.add("kafka_consumergroup_lag_sum", {"consumergroup": group.group_id,
                                                    "topic": topic}, total)


def _logs(out: Families, state: RequestServices) -> None:
    manager = state.log_manager
    out.histogram("kafka_log_logflushstats_logflushrateandtimems", {}, manager.flush_times_ms)
    offline = [d for d in manager.log_dirs if manager.failures.is_offline(d)]
    out.add("kafka_log_logmanager_offlinelogdirectorycount", {}, len(offline))
    for d in manager.log_dirs:
        out.add("kafka_log_logmanager_logdirectoryoffline", {"logDirectory": d},
                int(d in offline))
    _cleaner(out, manager)
    out.add("kbroker_log_manager_load_time_ms", {}, manager.load_ms)
    out.add("kbroker_log_manager_recovered_logs", {}, len(manager.last_load_recovered))


def _cleaner(out: Families, manager: Any) -> None:
    """The log cleaner's figures (kbroker.storage.log_cleaner keeps them)."""
    cleaner = manager.cleaner
    if cleaner is None:
        return
    stats = cleaner.stats
    last = stats.latest
    out.add("kafka_log_logcleaner_max_buffer_utilization_percent", {},
            100 * last.map_utilization if last else 0)
    out.add("kafka_log_logcleaner_cleaner_recopy_percent", {},
            100 * last.bytes_written / max(last.bytes_read, 1) if last else 0)
    out.add("kafka_log_logcleaner_max_clean_time_secs", {}, last.elapsed if last else 0)
    ratios = cleaner.manager.last_ratios.values()
    out.add("kafka_log_logcleanermanager_max_dirty_percent", {}, 100 * max(ratios, default=0))
    for d in manager.log_dirs:
        out.add("kafka_log_logcleanermanager_uncleanable_partitions_count", {"logDirectory": d},
                sum(1 for tp in cleaner.manager.uncleanable if manager.dir_of(tp) == d))
    out.add("kbroker_log_cleaner_cleanings_total", {}, stats.cleanings)
    out.add("kbroker_log_cleaner_read_bytes_total", {}, stats.bytes_read)
    out.add("kbroker_log_cleaner_written_bytes_total", {}, stats.bytes_written)
    out.add("kbroker_log_cleaner_removed_records_total", {}, stats.messages_removed)


def _client_metrics(out: Families, state: RequestServices) -> Iterator[None]:
    """KIP-714: the manager's figures, then every series the clients pushed
    (kbroker.ops.client_metrics names them), in steps."""
    manager = state.client_metrics_manager
    out.add("kafka_server_client_metrics_instance_count", {}, len(manager.instances()))
    out.add("kafka_server_client_metrics_throttle_count_total", {}, manager.throttled)
    out.add("kafka_server_client_metrics_unknown_subscription_request_count_total", {},
            manager.unknown_subscription)
    out.add("kafka_server_client_metrics_plugin_error_count_total", {}, manager.plugin_errors)
    yield from client_metrics.family_steps(manager, out.by_name)


def process_registry() -> CollectorRegistry:
    """The process figures (CPU, RSS, open files, GC): prometheus-client's collectors, in
    a registry of this broker's own (no global state)."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry
