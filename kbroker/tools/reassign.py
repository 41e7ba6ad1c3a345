"""`kbroker topics reassign`: move a partition's replicas (KIP-455), cancel a move, or
list the moves under way, as kafka-reassign-partitions.sh does. confluent-kafka's
AdminClient has neither API, so the requests go to the controller through
protocol_admin.controller_request.

    kbroker topics reassign --topic T --partition P --replicas 2,3 [--wait]
        Successfully started partition reassignment for T-P (replicas 2,3).
        (--wait, once the controller lists it no more and Metadata shows the replicas:)
        Partition reassignment for T-P complete (replicas 2,3).
    kbroker topics reassign --topic T --partition P --cancel
        Successfully cancelled partition reassignment for T-P.
    kbroker topics reassign --list [--topic T [--partition P]]
        Current partition reassignments:
        T-P: replicas: 2,3,1. adding: 3. removing: 1.
        (or: No partition reassignments found.)

A partition the controller refuses (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
UNKNOWN_TOPIC_OR_PARTITION...) is printed with its error, exit status 1.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kbroker.client.client import error_name
from kbroker.client.connection import KafkaClientError
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest as AlterRequest,
)
from kbroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest as ListRequest,
)
from kbroker.tools import protocol_admin
from kbroker.tools.common import UsageError, id_list, security

POLL_INTERVAL_S = 0.2


def run(admin: Any, args: argparse.Namespace) -> int:
    """The `reassign` action of `kbroker topics` (`admin` is unused: see the docstring)."""
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    if args.list:
        return _list(args)
    if args.topic is None or args.partition is None:
        raise UsageError("--replicas and --cancel need --topic and --partition")
    if args.wait and args.cancel:
        raise UsageError("--wait goes with --replicas")
    target = None if args.cancel else _replicas(args.replicas)
    name = f"{args.topic}-{args.partition}"
    _alter(args, target)
    if target is None:
        print(f"Successfully cancelled partition reassignment for {name}.")
        return 0
    print(f"Successfully started partition reassignment for {name} (replicas {id_list(target)}).")
    if args.wait:
        _wait_complete(args, target)
        print(f"Partition reassignment for {name} complete (replicas {id_list(target)}).")
    return 0


def _replicas(text: str) -> list[int]:
    try:
        replicas = [int(r) for r in text.split(",")]
    except ValueError:
        raise UsageError(f"--replicas: expected broker ids like 1,2,3, got {text!r}") from None
    if len(set(replicas)) != len(replicas):
        raise UsageError(f"--replicas lists a broker twice: {text}")
    return replicas


def _alter(args: argparse.Namespace, target: list[int] | None) -> None:
    request = AlterRequest(timeout_ms=int(args.timeout * 1000), topics=[
        AlterRequest.ReassignableTopic(name=args.topic, partitions=[
            AlterRequest.ReassignablePartition(partition_index=args.partition, replicas=target)])])
    response = protocol_admin.controller_request(args.bootstrap_server, request, args.timeout,
                                                 security(args))
    _raise_for(response.error_code, response.error_message)
    for topic in response.responses:
        for p in topic.partitions:
            _raise_for(p.error_code, p.error_message, f"{topic.name}-{p.partition_index}")


def _ongoing(args: argparse.Namespace) -> dict[tuple[str, int], Any]:
    """(topic, partition) -> OngoingPartitionReassignment, of --topic/--partition if given."""
    request = ListRequest(timeout_ms=int(args.timeout * 1000), topics=None)
    response = protocol_admin.controller_request(args.bootstrap_server, request, args.timeout,
                                                 security(args))
    _raise_for(response.error_code, response.error_message)
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions
            if args.topic in (None, t.name) and args.partition in (None, p.partition_index)}


def _list(args: argparse.Namespace) -> int:
    ongoing = _ongoing(args)
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, partition), p in sorted(ongoing.items()):
        print(f"{topic}-{partition}: replicas: {id_list(p.replicas)}. adding: "
              f"{id_list(p.adding_replicas)}. removing: {id_list(p.removing_replicas)}.")
    return 0


def _wait_complete(args: argparse.Namespace, target: list[int]) -> None:
    deadline = time.monotonic() + args.timeout
    while True:
        if not _ongoing(args) and _replicas_now(args) == target:
            return
        if time.monotonic() >= deadline:
            raise KafkaClientError(f"the reassignment of {args.topic}-{args.partition} was not "
                                   f"complete after {args.timeout:.0f} s (it goes on)",
                                   ErrorCode.REQUEST_TIMED_OUT)
        time.sleep(POLL_INTERVAL_S)


def _replicas_now(args: argparse.Namespace) -> list[int] | None:
    md = protocol_admin.metadata(args.bootstrap_server, [args.topic], args.timeout, security(args))
    for topic in md.topics:
        for p in topic.partitions:
            if p.partition_index == args.partition:
                return list(p.replica_nodes)
    return None


def _raise_for(code: int, message: str | None, where: str = "") -> None:
    if code != ErrorCode.NONE:
        prefix = f"{where}: " if where else ""
        raise KafkaClientError(f"{prefix}{error_name(code)}" + (f": {message}" if message else ""),
                               code)
