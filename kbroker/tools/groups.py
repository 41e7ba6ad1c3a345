"""`kbroker groups`: consumer groups of any Kafka-compatible broker over the Kafka
protocol (confluent-kafka's AdminClient), in the spirit of kafka-consumer-groups.sh.

    kbroker groups list                 [--bootstrap-server HOST:PORT] [--state STATE]...
                                        (GROUP, STATE, TYPE: Classic or Consumer, KIP-848)
    kbroker groups describe GROUP...    (members, assignments, committed offsets and lag)
    kbroker groups delete GROUP...
    kbroker groups reset-offsets GROUP --topic TOPIC
                   (--to-earliest | --to-latest | --to-offset N) [--execute]

`describe` prints kafka-consumer-groups.sh's columns: GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID, then its members as
`--members --verbose` does (CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT) with the
protocol each speaks (TYPE: classic or consumer; a consumer group being migrated has
both, KIP-848; from ConsumerGroupDescribe v1, protocol_admin.member_types). `reset-offsets`
prints the plan and changes nothing unless --execute is given (the group must have
no active members, as in Kafka). Exit status: 0 on success, 1 when the broker
reports an error or, as kafka-consumer-groups.sh says, a described group does not
exist, 2 for bad arguments.

The `kbroker` CLI wires it in as SUBCOMMANDS["groups"] = (HELP, configure_parser, run).
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
    error_text,
    librdkafka_config,
    print_table,
    run_action,
    security,
)

HELP = "list, describe, delete consumer groups and reset their offsets"
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "CONSUMER-ID", "HOST", "CLIENT-ID")
MEMBER_COLUMNS = ("CONSUMER-ID", "HOST", "CLIENT-ID", "TYPE", "#PARTITIONS", "ASSIGNMENT")


def configure_parser(groups: argparse.ArgumentParser) -> None:
    common = connection_options()
    groups.set_defaults(func=run)
    actions = groups.add_subparsers(dest="groups_action", metavar="ACTION", required=True)

    p = actions.add_parser("list", parents=[common], help="list groups and their states")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only groups in this state (Empty, Stable, ...; repeatable)")

    p = actions.add_parser("describe", parents=[common], help="members, offsets and lag")
    p.add_argument("group", nargs="+")

    p = actions.add_parser("delete", parents=[common], help="delete groups with no members")
    p.add_argument("group", nargs="+")

    p = actions.add_parser("reset-offsets", parents=[common], help="move a group's committed offsets")
    p.add_argument("group")
    p.add_argument("--topic", required=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    p.add_argument("--execute", action="store_true", help="apply (default: only print the plan)")


def run(args: argparse.Namespace) -> int:
    """Entry point for `kbroker groups ...`."""
    return run_action("groups", _ACTIONS, args.groups_action, args)


def _list(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState

    states = set()
    for s in args.state:
        try:
            states.add(ConsumerGroupState[_state_key(s)])
        except KeyError:
            raise UsageError(f"unknown group state {s!r}") from None
    kwargs: dict[str, Any] = {"request_timeout": args.timeout}
    if states:
        kwargs["states"] = states
    result = admin.list_consumer_groups(**kwargs).result()
    for g in sorted(result.valid, key=lambda g: g.group_id):
        print(f"{g.group_id}\t{_state_name(g.state)}\t{_type_name(g)}")
    for err in result.errors:
        print(f"kbroker groups: {error_text(err)}", file=sys.stderr)
    return EXIT_BROKER_ERROR if result.errors else 0


def _state_key(s: str) -> str:
    """"PreparingRebalance" -> "PREPARING_REBALANCE" (confluent-kafka's enum names)."""
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(s.replace("_", "")))
    return out.upper()


def _state_name(state: Any) -> str:
    return "".join(w.capitalize() for w in state.name.split("_"))


def _type_name(group: Any) -> str:
    """Classic or Consumer (KIP-848), as the broker's ListGroups/ConsumerGroupDescribe say."""
    kind = getattr(group, "type", None)
    return "Unknown" if kind is None else kind.name.capitalize()


def _describe(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions

    status = 0
    described = admin.describe_consumer_groups(list(args.group), request_timeout=args.timeout)
    for group in args.group:
        try:
            desc = described[group].result()
            if desc.state == ConsumerGroupState.DEAD:  # no members, no offsets: none at all
                print(f"kbroker groups: consumer group '{group}' does not exist", file=sys.stderr)
                status = EXIT_BROKER_ERROR
                continue
            offsets = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)[group].result()
        except Exception as e:
            print(f"kbroker groups: {group}: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
            continue
        owner = {}
        for m in desc.members:
            for tp in m.assignment.topic_partitions:
                owner[(tp.topic, tp.partition)] = (m.member_id, m.host, m.client_id)
        committed = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
        ends = _log_end_offsets(args, set(committed) | set(owner))
        print(f"\nGroup {group} ({_type_name(desc)}, {_state_name(desc.state)}, {len(desc.members)} members)")
        rows: list[tuple[str, ...]] = [COLUMNS]
        for topic, partition in sorted(set(committed) | set(owner)):
            current = committed.get((topic, partition), -1)
            end = ends.get((topic, partition), -1)
            lag = end - current if current >= 0 and end >= 0 else "-"
            member, host, client = owner.get((topic, partition), ("-", "-", "-"))
            rows.append((group, topic, str(partition), str(current) if current >= 0 else "-",
                         str(end) if end >= 0 else "-", str(lag), member, host, client))
        print_table(rows)
        _print_members(args, group, desc)
    return status


def _print_members(args: argparse.Namespace, group: str, desc: Any) -> None:
    """The members, each with its protocol and its partitions (`topic(0,1)`)."""
    if not desc.members:
        return
    from confluent_kafka import ConsumerGroupType

    from kbroker.client.connection import KafkaClientError
    from kbroker.tools.protocol_admin import member_types

    types: dict[str, str] = {}
    if getattr(desc, "type", None) == ConsumerGroupType.CONSUMER:
        try:
            types = member_types(args.bootstrap_server, group, args.timeout, security(args))
        except KafkaClientError as e:
            print(f"kbroker groups: {group}: member types: {error_text(e)}", file=sys.stderr)
    rows: list[tuple[str, ...]] = [MEMBER_COLUMNS]
    for m in sorted(desc.members, key=lambda m: m.member_id):
        by_topic: dict[str, list[int]] = {}
        for tp in m.assignment.topic_partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        assignment = ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))
        kind = types.get(m.member_id, "-") if types else (
            "classic" if getattr(desc, "type", None) == ConsumerGroupType.CLASSIC else "-")
        rows.append((m.member_id, m.host, m.client_id, kind, str(len(m.assignment.topic_partitions)),
                     assignment or "-"))
    print()
    print_table(rows)


def _consumer(args: argparse.Namespace) -> Any:
    """A Consumer for watermarks, with --bootstrap-server and --command-config."""
    from confluent_kafka import Consumer

    return Consumer({**librdkafka_config(args), "group.id": "kbroker-groups-cli",
                     "enable.auto.commit": False})


def _log_end_offsets(args: argparse.Namespace, tps: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    c = _consumer(args)
    try:
        return {tp: c.get_watermark_offsets(TopicPartition(*tp), timeout=args.timeout)[1] for tp in tps}
    finally:
        c.close()


def _delete(admin: Any, args: argparse.Namespace) -> int:
    status = 0
    for group, future in admin.delete_consumer_groups(list(args.group), request_timeout=args.timeout).items():
        try:
            future.result()
            print(f"Deleted group {group}")
        except Exception as e:
            print(f"kbroker groups: {group}: {error_text(e)}", file=sys.stderr)
            status = EXIT_BROKER_ERROR
    return status


def _reset_offsets(admin: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    metadata = admin.list_topics(args.topic, timeout=args.timeout)
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None:
        raise UsageError(f"unknown topic {args.topic}")
    targets = {}
    for partition in sorted(topic.partitions):
        low, high = _watermarks(args, partition)
        if args.to_earliest:
            targets[partition] = low
        elif args.to_latest:
            targets[partition] = high
        else:
            targets[partition] = min(max(args.to_offset, low), high)
    rows: list[tuple[str, ...]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(args.group, args.topic, str(p), str(o)) for p, o in targets.items()]
    print_table(rows)
    if not args.execute:
        print("(dry run: add --execute to apply)")
        return 0
    request = ConsumerGroupTopicPartitions(
        args.group, [TopicPartition(args.topic, p, o) for p, o in targets.items()])
    admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)[args.group].result()
    return 0


def _watermarks(args: argparse.Namespace, partition: int) -> tuple[int, int]:
    from confluent_kafka import TopicPartition

    c = _consumer(args)
    try:
        low, high = c.get_watermark_offsets(TopicPartition(args.topic, partition),
                                            timeout=args.timeout)
        return int(low), int(high)
    finally:
        c.close()


_ACTIONS: dict[str, Action] = {
    "list": _list,
    "describe": _describe,
    "delete": _delete,
    "reset-offsets": _reset_offsets,
}
