"""`kbroker topics`: manage the topics of any Kafka-compatible broker over the Kafka
protocol (confluent-kafka's AdminClient), in the spirit of Kafka's kafka-topics.sh
and kafka-configs.sh.

    kbroker topics list            [--bootstrap-server HOST:PORT] [--exclude-internal]
    kbroker topics describe        [TOPIC...] [--bootstrap-server HOST:PORT]
    kbroker topics create TOPIC    [--partitions N] [--replication-factor N]
                                   [--replica-assignment 1:2,2:3]
                                   [--config KEY=VALUE]... [--if-not-exists] [--validate-only]
    kbroker topics delete TOPIC... [--if-exists]
    kbroker topics alter-configs TOPIC [--add-config KEY=VALUE]... [--delete-config KEY]...
    kbroker topics add-partitions TOPIC --partitions N
    kbroker topics reassign --topic TOPIC --partition P (--replicas 1,2,3 [--wait] | --cancel)
    kbroker topics reassign --list [--topic TOPIC [--partition P]]

`describe` prints kafka-topics.sh's layout: one line per topic (id, partition
count, replication factor, configs that are not defaults) and one per partition
(leader, replicas, ISR and offline replicas, from Metadata as the broker sent it):

    Topic: orders  TopicId: 3fV...  PartitionCount: 2  ReplicationFactor: 3  Configs: retention.ms=60000
        Topic: orders  Partition: 0  Leader: 1  Replicas: 1,2,3  Isr: 1,2  Offline: 3
        Topic: orders  Partition: 1  Leader: none  Replicas: 3  Isr: 3  Offline: 3

`create --replica-assignment` takes kafka-topics.sh's syntax: partitions separated by
commas, each one's replicas (broker ids, the preferred leader first) by colons; it
excludes --partitions and --replication-factor. `reassign` moves one partition's
replicas (KIP-455's AlterPartitionReassignments, sent to the controller: the new
replicas are added, catch up, then the ones left out are removed), cancels such a move,
or lists the moves under way (ListPartitionReassignments), as kafka-reassign-partitions.sh
does; --wait returns once the move is complete.
`alter-configs` changes only the named keys (IncrementalAlterConfigs SET and
DELETE). Exit status: 0 on success, 1 when the broker reports an error, 2 for
bad arguments.

The `kbroker` CLI wires it in as SUBCOMMANDS["topics"] = (HELP, configure_parser, run).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.client.client import error_name
from kbroker.common.error_code import ErrorCode
from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.tools import protocol_admin, reassign
from kbroker.tools.common import (
    EXIT_BROKER_ERROR,
    Action,
    UsageError,
    connection_options,
    error_code,
    error_text,
    id_list,
    run_action,
    security,
)

HELP = "list, describe, create, delete topics, alter their configs, move their replicas"


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `topics` (with its actions) to an argparse subparsers object."""
    topics = subparsers.add_parser("topics", help=HELP, description=HELP)
    configure_parser(topics)
    return topics


def configure_parser(topics: argparse.ArgumentParser) -> None:
    common = connection_options()
    topics.set_defaults(func=run)
    actions = topics.add_subparsers(dest="topics_action", metavar="ACTION", required=True)

    p = actions.add_parser("list", parents=[common], help="list topic names")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")

    p = actions.add_parser("describe", parents=[common], help="partitions and configs of topics")
    p.add_argument("topic", nargs="*", help="topics to describe (default: all)")

    p = actions.add_parser("create", parents=[common], help="create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="default: the broker's default.replication.factor")
    p.add_argument("--replica-assignment", metavar="1:2,2:3",
                   help="each partition's replicas: partitions separated by commas, broker ids "
                        "by colons (excludes --partitions and --replication-factor)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists")
    p.add_argument("--validate-only", action="store_true", help="check only; create nothing")

    p = actions.add_parser("delete", parents=[common], help="delete topics")
    p.add_argument("topic", nargs="+")
    p.add_argument("--if-exists", action="store_true", help="succeed for topics that do not exist")

    p = actions.add_parser("alter-configs", parents=[common], help="set or delete config overrides")
    p.add_argument("topic")
    p.add_argument("--add-config", action="append", default=[], metavar="KEY=VALUE",
                   help="set an override (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="remove an override (repeatable)")

    p = actions.add_parser("add-partitions", parents=[common], help="grow a topic's partitions")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, required=True, help="the new total partition count")

    p = actions.add_parser("reassign", parents=[common],
                           help="move a partition's replicas to other brokers, cancel a move, "
                                "list moves under way")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--replicas", metavar="ID,ID,...",
                      help="the new replicas, the preferred leader first")
    what.add_argument("--cancel", action="store_true",
                      help="stop a move under way and go back to the replicas before it")
    what.add_argument("--list", action="store_true", help="the moves under way")
    p.add_argument("--wait", action="store_true",
                   help="with --replicas: return once the move is complete (within --timeout)")


def run(args: argparse.Namespace) -> int:
    """Entry point for `kbroker topics ...`."""
    return run_action("topics", _ACTIONS, args.topics_action, args)


def _list(admin: Any, args: argparse.Namespace) -> int:
    metadata = admin.list_topics(timeout=args.timeout)
    for name in sorted(metadata.topics):
        if args.exclude_internal and name.startswith("__"):
            continue
        print(name)
    return 0


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType

    md = protocol_admin.metadata(args.bootstrap_server, list(args.topic) or None, args.timeout,
                                 security(args))
    found = {t.name or "": t for t in md.topics}
    names = list(args.topic) or sorted(found)
    status = 0
    for name in names:
        topic = found.get(name)
        code = topic.error_code if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if code != ErrorCode.NONE:
            print(f"kbroker topics: {name}: {error_name(code)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
    present = [n for n in names if n in found and found[n].error_code == ErrorCode.NONE]
    if not present:
        return status
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in present]
    configs = admin.describe_configs(resources, request_timeout=args.timeout)
    for name, res in zip(present, resources, strict=True):
        topic = found[name]
        try:
            entries = configs[res].result()
        except Exception as e:
            print(f"kbroker topics: {name}: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
            continue
        overrides = ",".join(f"{k}={e.value}" for k, e in sorted(entries.items()) if not e.is_default)
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        rf = len(partitions[0].replica_nodes) if partitions else 0
        print(f"Topic: {name}\tTopicId: {uuid_to_base64(topic.topic_id)}\t"
              f"PartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {overrides}")
        for p in partitions:
            print(partition_line(name, p))
    return status


def partition_line(topic: str, p: Any) -> str:
    """One partition of a Metadata answer, as kafka-topics.sh --describe prints it (plus
    the offline replicas)."""
    leader = p.leader_id if p.leader_id >= 0 else "none"
    return (f"\tTopic: {topic}\tPartition: {p.partition_index}\tLeader: {leader}\t"
            f"Replicas: {id_list(p.replica_nodes)}\tIsr: {id_list(p.isr_nodes)}\t"
            f"Offline: {id_list(p.offline_replicas)}")


def _create(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    config = _pairs(args.config)
    if args.replica_assignment is not None:
        if args.partitions != -1 or args.replication_factor != -1:
            raise UsageError("--replica-assignment excludes --partitions and --replication-factor")
        assignment = parse_replica_assignment(args.replica_assignment)
        topic = NewTopic(args.topic, num_partitions=len(assignment),
                         replica_assignment=assignment, config=config)
    else:
        topic = NewTopic(args.topic, num_partitions=args.partitions,
                         replication_factor=args.replication_factor, config=config)
    future = admin.create_topics([topic], request_timeout=args.timeout,
                                 validate_only=args.validate_only)[args.topic]
    try:
        future.result()
    except Exception as e:
        if args.if_not_exists and error_code(e) == KafkaError.TOPIC_ALREADY_EXISTS:
            return 0
        raise
    verb = "Validated" if args.validate_only else "Created"
    print(f"{verb} topic {args.topic}.")
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError

    status = 0
    futures = admin.delete_topics(list(args.topic), request_timeout=args.timeout)
    for name in args.topic:
        try:
            futures[name].result()
            print(f"Deleted topic {name}.")
        except Exception as e:
            if args.if_exists and error_code(e) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            print(f"kbroker topics: {name}: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
    return status


def _alter_configs(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
           for k, v in _pairs(args.add_config).items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
            for k in args.delete_config]
    if not ops:
        raise UsageError("alter-configs needs --add-config or --delete-config")
    resource = ConfigResource(ResourceType.TOPIC, args.topic, incremental_configs=ops)
    admin.incremental_alter_configs([resource], request_timeout=args.timeout)[resource].result()
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def _add_partitions(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)],
                                      request_timeout=args.timeout)
    futures[args.topic].result()
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's `1:2,2:3` -> [[1, 2], [2, 3]] (partition 0's replicas first)."""
    try:
        assignment = [[int(r) for r in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--replica-assignment: expected broker ids like 1:2,2:3, got {text!r}"
                         ) from None
    for partition, replicas in enumerate(assignment):
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"--replica-assignment: partition {partition} lists a broker twice: "
                             f"{replicas}")
        if len(replicas) != len(assignment[0]):
            raise UsageError(f"--replica-assignment: partition {partition} has a different "
                             f"replication factor: {replicas}")
    return assignment


_ACTIONS: dict[str, Action] = {
    "list": _list,
    "describe": _describe,
    "create": _create,
    "delete": _delete,
    "alter-configs": _alter_configs,
    "add-partitions": _add_partitions,
    "reassign": reassign.run,
}


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out
