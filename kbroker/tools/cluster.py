"""`kbroker cluster`: run a local cluster, and look at and steer any Kafka cluster over
the Kafka protocol.

    kbroker cluster up [--brokers N] [--dir D] [--override KEY=VALUE]... [--zookeeper-port P]
    kbroker cluster status         [--bootstrap-server HOST:PORT]
    kbroker cluster elect-leaders  [--preferred | --unclean] [--topic T [--partition P]]

`up` is cluster_up.py. `status` asks one broker for Metadata (kbroker's own client:
librdkafka keeps no offline replicas) and prints the cluster id, the controller, the
live brokers (id, host:port, rack) and the brokers named in replica assignments but not
alive, the topic and partition counts, and the under-replicated partitions (ISR smaller
than the replicas) and offline ones (no leader) in `kbroker topics describe`'s layout:

    ClusterId: kS1...  Controller: 2  Brokers: 3  Topics: 2  Partitions: 53
        Broker: 1  Host: 127.0.0.1:41235  Rack: none
        Broker: 4  Host: none  Rack: none  (not alive; holds replicas)
    UnderReplicatedPartitions: 1
        Topic: orders  Partition: 0  Leader: 1  Replicas: 1,2,4  Isr: 1,2  Offline: 4
    OfflinePartitions: 0

Its exit status is 3 when a partition is offline (the cluster cannot serve it: a health
check can tell this from 1, the broker could not be asked); under-replicated partitions
alone still exit 0.

`elect-leaders` drives ElectLeaders (confluent-kafka's AdminClient, which sends it to
the controller) as kafka-leader-election.sh does: --preferred (the default) moves
leadership back to each partition's first replica, --unclean elects a live replica
outside the ISR for a partition without a leader. Without --topic it covers every
partition. One line per partition with its outcome:

    Topic: orders  Partition: 0  Election: PREFERRED  Result: elected
    Topic: orders  Partition: 1  Election: PREFERRED  Result: ELECTION_NOT_NEEDED

Exit status 1 when a partition's election failed (ELECTION_NOT_NEEDED is no failure).

The `kbroker` CLI wires it in as SUBCOMMANDS["cluster"] = (HELP, configure_parser, run).
"""

from __future__ import annotations

import argparse
from typing import Any

from kbroker.client.client import error_name
from kbroker.common.error_code import ErrorCode
from kbroker.tools import cluster_up, protocol_admin
from kbroker.tools.common import (
    EXIT_BROKER_ERROR,
    Action,
    UsageError,
    connection_options,
    error_code,
    error_text,
    run_action,
    security,
)
from kbroker.tools.topics import partition_line

HELP = "run a local cluster (up), show its state (status), elect leaders"
EXIT_OFFLINE_PARTITIONS = 3


def configure_parser(cluster: argparse.ArgumentParser) -> None:
    common = connection_options()
    cluster.set_defaults(func=run)
    actions = cluster.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)

    p = actions.add_parser("up", help="start ZooKeeper and N brokers here, in the foreground",
                           description=cluster_up.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    cluster_up.configure_parser(p)

    p = actions.add_parser("status", parents=[common],
                           help="brokers, controller, under-replicated and offline partitions")
    p.set_defaults(needs_client=True)

    p = actions.add_parser("elect-leaders", parents=[common],
                           help="elect preferred (or, unclean, any live) replicas as leaders")
    p.set_defaults(needs_client=True)
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--preferred", action="store_true",
                      help="move leadership to the first replica (the default)")
    kind.add_argument("--unclean", action="store_true",
                      help="elect a live replica outside the ISR where there is no leader")
    p.add_argument("--topic", help="only this topic's partitions (default: every partition)")
    p.add_argument("--partition", type=int, help="only this partition of --topic")


def run(args: argparse.Namespace) -> int:
    """Entry point for `kbroker cluster ...`."""
    if args.cluster_action == "up":
        return cluster_up.run(args)
    return run_action("cluster", _ACTIONS, args.cluster_action, args)


def _status(admin: Any, args: argparse.Namespace) -> int:
    md = protocol_admin.metadata(args.bootstrap_server, None, args.timeout, security(args))
    partitions = sorted(((t.name or "", p) for t in md.topics for p in t.partitions),
                        key=lambda tp: (tp[0], tp[1].partition_index))
    brokers = protocol_admin.live_brokers(args.bootstrap_server, args.timeout, security(args))
    live = {b.broker_id for b in brokers}
    named = {r for _, p in partitions for r in p.replica_nodes}
    controller = md.controller_id if md.controller_id >= 0 else "none"
    print(f"ClusterId: {md.cluster_id}\tController: {controller}\tBrokers: {len(brokers)}\t"
          f"Topics: {len(md.topics)}\tPartitions: {len(partitions)}")
    for b in sorted(brokers, key=lambda b: b.broker_id):
        print(f"\tBroker: {b.broker_id}\tHost: {b.host}:{b.port}\tRack: {b.rack or 'none'}")
    for missing in sorted(named - live):
        print(f"\tBroker: {missing}\tHost: none\tRack: none\t(not alive; holds replicas)")
    under = [(t, p) for t, p in partitions if len(p.isr_nodes) < len(p.replica_nodes)]
    offline = [(t, p) for t, p in partitions if p.leader_id < 0]
    for title, found in (("UnderReplicatedPartitions", under), ("OfflinePartitions", offline)):
        print(f"{title}: {len(found)}")
        for topic, p in found:
            print(partition_line(topic, p))
    return EXIT_OFFLINE_PARTITIONS if offline else 0


def _elect_leaders(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    election = ElectionType.UNCLEAN if args.unclean else ElectionType.PREFERRED
    partitions: list[Any] | None = None
    if args.topic is not None:
        indexes = [args.partition] if args.partition is not None else _partitions(args)
        partitions = [TopicPartition(args.topic, p) for p in indexes]
    # confluent-kafka 2.16's elect_leaders refuses its documented request_timeout and
    # operation_timeout keywords (a C argument-format error): bound the wait on the future
    results = admin.elect_leaders(election, partitions).result(timeout=args.timeout)
    status = 0
    for tp, error in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        if error is None:
            outcome = "elected"
        elif error_code(error) == KafkaError.ELECTION_NOT_NEEDED:
            outcome = "ELECTION_NOT_NEEDED"
        else:
            outcome = error_text(error)
            status = EXIT_BROKER_ERROR
        print(f"Topic: {tp.topic}\tPartition: {tp.partition}\tElection: {election.name}\t"
              f"Result: {outcome}")
    return status


def _partitions(args: argparse.Namespace) -> list[int]:
    md = protocol_admin.metadata(args.bootstrap_server, [args.topic], args.timeout, security(args))
    for topic in md.topics:
        if topic.error_code != ErrorCode.NONE:
            raise LookupError(f"{args.topic}: {error_name(topic.error_code)}")
        return sorted(p.partition_index for p in topic.partitions)
    raise LookupError(f"{args.topic}: {error_name(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}")


_ACTIONS: dict[str, Action] = {
    "status": _status,
    "elect-leaders": _elect_leaders,
}
