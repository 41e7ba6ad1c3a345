"""`kbroker topics`: manage the topics of any Kafka-compatible broker over the Kafka
protocol (confluent-kafka's AdminClient), in the spirit of Kafka's kafka-topics.sh
and kafka-configs.sh.

    kbroker topics list            [--bootstrap-server HOST:PORT] [--exclude-internal]
    kbroker topics describe        [TOPIC...] [--bootstrap-server HOST:PORT]
    kbroker topics create TOPIC    [--partitions N] [--replication-factor N]
                                   [--config KEY=VALUE]... [--if-not-exists] [--validate-only]
    kbroker topics delete TOPIC... [--if-exists]
    kbroker topics alter-configs TOPIC [--add-config KEY=VALUE]... [--delete-config KEY]...
    kbroker topics add-partitions TOPIC --partitions N

`describe` prints kafka-topics.sh's layout: one line per topic (id, partition
count, replication factor, configs that are not defaults) and one per partition.
`alter-configs` changes only the named keys (IncrementalAlterConfigs SET and
DELETE). Exit status: 0 on success, 1 when the broker reports an error, 2 for
bad arguments.

The `kbroker` CLI wires it in as SUBCOMMANDS["topics"] = (HELP, configure_parser, run).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.tools.common import (
    EXIT_BROKER_ERROR,
    Action,
    UsageError,
    connection_options,
    error_code,
    error_text,
    run_action,
)

HELP = "list, describe, create, delete topics and alter their configs"


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
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ResourceType

    names = list(args.topic) or sorted(admin.list_topics(timeout=args.timeout).topics)
    if not names:
        return 0
    described = admin.describe_topics(TopicCollection(names), request_timeout=args.timeout)
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    configs = admin.describe_configs(resources, request_timeout=args.timeout)
    status = 0
    for name, res in zip(names, resources, strict=True):
        try:
            desc = described[name].result()
            entries = configs[res].result()
        except Exception as e:
            print(f"kbroker topics: {name}: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
            continue
        overrides = ",".join(f"{k}={e.value}" for k, e in sorted(entries.items()) if not e.is_default)
        rf = len(desc.partitions[0].replicas) if desc.partitions else 0
        print(f"Topic: {name}\tTopicId: {desc.topic_id}\tPartitionCount: {len(desc.partitions)}\t"
              f"ReplicationFactor: {rf}\tConfigs: {overrides}")
        for p in desc.partitions:
            leader = p.leader.id if p.leader is not None else -1
            replicas = ",".join(str(n.id) for n in p.replicas)
            isr = ",".join(str(n.id) for n in p.isr)
            print(f"\tTopic: {name}\tPartition: {p.id}\tLeader: {leader}\t"
                  f"Replicas: {replicas}\tIsr: {isr}")
    return status


def _create(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(args.topic, num_partitions=args.partitions,
                     replication_factor=args.replication_factor, config=_pairs(args.config))
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


_ACTIONS: dict[str, Action] = {
    "list": _list,
    "describe": _describe,
    "create": _create,
    "delete": _delete,
    "alter-configs": _alter_configs,
    "add-partitions": _add_partitions,
}


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out
