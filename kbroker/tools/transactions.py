"""`kbroker transactions`: transactions of any Kafka-compatible broker over the Kafka
protocol, in the spirit of kafka-transactions.sh (its subcommands and columns).

    kbroker transactions list [--state STATE]... [--producer-id ID]... [--duration-filter MS]
    kbroker transactions describe --transactional-id ID
    kbroker transactions describe-producers --topic TOPIC --partition N
    kbroker transactions abort --topic TOPIC --partition N
                               (--start-offset OFFSET |
                                --producer-id ID --producer-epoch E --coordinator-epoch C)

`list` asks every broker (ListTransactions); `describe` the id's coordinator (found with
FindCoordinator, key type 1; DescribeTransactions); `describe-producers` the
partition's leader (DescribeProducers). `abort` has the partition's leader write an
ABORT marker for a transaction whose coordinator will not (a hanging transaction), as
Kafka's Admin.abortTransaction does with WriteTxnMarkers; with --start-offset, the
producer whose transaction starts there is looked up with DescribeProducers first.
On success it prints which producer's transaction it aborted (Kafka's tool prints
nothing). Absent values print as Kafka's tool prints them: "None" for a start offset or
time no transaction has, -1 for a coordinator epoch the leader does not know.

confluent-kafka's AdminClient has none of these APIs, so the tool speaks them itself
through kbroker's own client (kbroker.client). Exit status: 0 on success, 1 when a
broker reports an error, 2 for bad arguments.

The `kbroker` CLI wires it in as SUBCOMMANDS["transactions"] = (HELP, configure_parser, run).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kbroker.client.connection import BrokerConnection, KafkaClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.protocol.messages.describe_producers import DescribeProducersRequest
from kbroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.list_transactions import ListTransactionsRequest
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kbroker.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kbroker.tools import protocol_admin
from kbroker.tools.common import (
    EXIT_BROKER_ERROR,
    EXIT_USAGE,
    UsageError,
    connection_options,
    explain_transport_failure,
    print_table,
    security,
)

HELP = "list, describe and abort transactions, describe a partition's producers"
TRANSACTION = 1


def configure_parser(txns: argparse.ArgumentParser) -> None:
    common = connection_options()
    txns.set_defaults(func=run)
    actions = txns.add_subparsers(dest="transactions_action", metavar="ACTION", required=True)

    p = actions.add_parser("list", parents=[common], help="transactions on every broker")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only transactions in this state (Ongoing, PrepareCommit, ...; repeatable)")
    p.add_argument("--producer-id", action="append", type=int, default=[], metavar="ID",
                   help="only transactions of this producer id (repeatable)")
    p.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                   help="only transactions running longer than this")

    p = actions.add_parser("describe", parents=[common], help="one transactional id's state")
    p.add_argument("--transactional-id", required=True)

    p = actions.add_parser("describe-producers", parents=[common], help="a partition's active producers")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)

    p = actions.add_parser("abort", parents=[common], help="abort a hanging transaction of a partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start-offset", type=int, help="the first offset of the transaction")
    p.add_argument("--producer-id", type=int)
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)


def run(args: argparse.Namespace) -> int:
    """Entry point for `kbroker transactions ...`."""
    try:
        return int(_ACTIONS[args.transactions_action](args))
    except UsageError as e:
        print(f"kbroker transactions: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaClientError as e:
        print(f"kbroker transactions: {_error_name(e.error_code)}: {e}", file=sys.stderr)
        explain_transport_failure("transactions", e, args)
        return EXIT_BROKER_ERROR


class _Cluster:
    """Connections to the brokers of the cluster behind --bootstrap-server."""

    def __init__(self, args: argparse.Namespace) -> None:
        host, _, port = args.bootstrap_server.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"--bootstrap-server {args.bootstrap_server!r} is not HOST:PORT")
        self.timeout = args.timeout
        self.security = security(args)  # --command-config
        self.bootstrap = BrokerConnection(host, int(port), "kbroker-transactions", self.timeout,
                                          self.security)
        self._connections: dict[int, BrokerConnection] = {}

    def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        version = self.bootstrap.version_for(ApiKey.METADATA, 1, 12)
        request = MetadataRequest(topics=None if topics is None else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False)
        response: MetadataResponse = self.bootstrap.request(request, version)
        return response

    def live_broker_ids(self) -> list[int]:
        """DescribeCluster's brokers: a Metadata answer lists a departed broker for a few
        seconds more (kbroker/cluster/metadata_cache.py)."""
        return sorted(b.broker_id for b in protocol_admin.live_brokers_on(self.bootstrap))

    def broker(self, broker_id: int) -> BrokerConnection:
        conn = self._connections.get(broker_id)
        if conn is None:
            for b in self.metadata([]).brokers:
                if b.node_id == broker_id:
                    conn = BrokerConnection(b.host, b.port, "kbroker-transactions", self.timeout,
                                            self.security)
                    break
            else:
                raise KafkaClientError(f"broker {broker_id} is not in the cluster", ErrorCode.BROKER_NOT_AVAILABLE)
            self._connections[broker_id] = conn
        return conn

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        for t in self.metadata([topic]).topics:
            if t.error_code:
                raise KafkaClientError(f"topic {topic}", t.error_code)
            for p in t.partitions:
                if p.partition_index == partition:
                    if p.leader_id < 0:
                        raise KafkaClientError(f"{topic}-{partition} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
                    return self.broker(p.leader_id)
        raise KafkaClientError(f"no partition {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def call(self, conn: BrokerConnection, request: Any, highest: int) -> Any:
        return conn.request(request, conn.version_for(request.API_KEY, 0, highest))

    def close(self) -> None:
        for conn in (self.bootstrap, *self._connections.values()):
            conn.close()


def _with_cluster(action: Any) -> Any:
    def run_with(args: argparse.Namespace) -> int:
        cluster = _Cluster(args)
        try:
            return int(action(cluster, args))
        finally:
            cluster.close()
    return run_with


@_with_cluster
def _list(cluster: _Cluster, args: argparse.Namespace) -> int:
    rows: list[tuple[str, ...]] = [("TransactionalId", "Coordinator", "ProducerId", "TransactionState")]
    status = 0
    for broker_id in cluster.live_broker_ids():
        response = cluster.call(cluster.broker(broker_id), ListTransactionsRequest(
            state_filters=args.state, producer_id_filters=args.producer_id,
            duration_filter=args.duration_filter), 1)
        if response.error_code:
            print(f"kbroker transactions: broker {broker_id}: {_error_name(response.error_code)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
            continue
        for unknown in response.unknown_state_filters:
            print(f"kbroker transactions: unknown state {unknown!r}", file=sys.stderr)
        rows += [(t.transactional_id, str(broker_id), str(t.producer_id), t.transaction_state)
                 for t in sorted(response.transaction_states, key=lambda t: t.transactional_id)]
    print_table(rows)
    return status


@_with_cluster
def _describe(cluster: _Cluster, args: argparse.Namespace) -> int:
    found = cluster.call(cluster.bootstrap, FindCoordinatorRequest(
        key=args.transactional_id, key_type=TRANSACTION, coordinator_keys=[args.transactional_id]), 4)
    coordinator = found.coordinators[0] if found.coordinators else found
    if coordinator.error_code:
        raise KafkaClientError(f"the coordinator of {args.transactional_id}", coordinator.error_code)
    response = cluster.call(cluster.broker(coordinator.node_id),
                            DescribeTransactionsRequest(transactional_ids=[args.transactional_id]), 0)
    state = response.transaction_states[0]
    if state.error_code:
        raise KafkaClientError(f"transactional id {args.transactional_id}", state.error_code)
    start = state.transaction_start_time_ms
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    print_table([
        ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
        (str(coordinator.node_id), state.transactional_id, str(state.producer_id), str(state.producer_epoch),
         state.transaction_state, str(state.transaction_timeout_ms), str(start) if start >= 0 else "None",
         duration, partitions)])
    return 0


def _producers(cluster: _Cluster, topic: str, partition: int) -> tuple[BrokerConnection, list[Any]]:
    leader = cluster.leader(topic, partition)
    response = cluster.call(leader, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]), 0)
    result = response.topics[0].partitions[0]
    if result.error_code:
        raise KafkaClientError(f"{topic}-{partition}: {result.error_message or ''}", result.error_code)
    return leader, list(result.active_producers)


@_with_cluster
def _describe_producers(cluster: _Cluster, args: argparse.Namespace) -> int:
    _leader, producers = _producers(cluster, args.topic, args.partition)
    rows: list[tuple[str, ...]] = [("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                    "LastTimestamp", "CurrentTransactionStartOffset")]
    rows += [(str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
              str(p.last_timestamp), str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None")
             for p in sorted(producers, key=lambda p: p.producer_id)]
    print_table(rows)
    return 0


@_with_cluster
def _abort(cluster: _Cluster, args: argparse.Namespace) -> int:
    by_id = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    given = [v is not None for v in by_id]
    if (args.start_offset is not None and any(given)) or (args.start_offset is None and not all(given)):
        raise UsageError("give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
    leader = cluster.leader(args.topic, args.partition)
    if args.start_offset is not None:
        leader, producers = _producers(cluster, args.topic, args.partition)
        match = [p for p in producers if p.current_txn_start_offset == args.start_offset]
        if not match:
            raise UsageError(f"no transaction of {args.topic}-{args.partition} starts at {args.start_offset}")
        by_id = (match[0].producer_id, match[0].producer_epoch, match[0].coordinator_epoch)
    producer_id, producer_epoch, coordinator_epoch = by_id
    # Kafka's tool: a hanging transaction of a new producer id has coordinator epoch -1
    # (DescribeProducers); 0 is at most any epoch a coordinator had
    coordinator_epoch = max(coordinator_epoch, 0)
    response = cluster.call(leader, WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=coordinator_epoch, topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
            name=args.topic, partition_indexes=[args.partition])])]), 1)
    for marker in response.markers:
        for t in marker.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaClientError(f"aborting {args.topic}-{args.partition}", p.error_code)
    print(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}, "
          f"coordinator epoch {coordinator_epoch}) on {args.topic}-{args.partition}: its "
          f"leader wrote an abort marker")
    return 0


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


_ACTIONS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
            "abort": _abort}
