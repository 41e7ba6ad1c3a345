"""`kbroker cluster up`: ZooKeeper and N brokers on this machine in one foreground command
(kbroker.cluster.local_cluster.Cluster underneath), until Ctrl-C or SIGTERM.

    kbroker cluster up [--brokers N] [--dir D] [--override KEY=VALUE]... [--zookeeper-port P]

It installs Debian's zookeeper package when it is missing, starts ZooKeeper and brokers
1..N, waits until every broker sees the whole cluster and a controller, then prints
(stdout, one line each, flushed):

    ZooKeeper 127.0.0.1:41234 pid 1200 log /tmp/kbroker-cluster-x/zookeeper/zookeeper.log
    broker 1 127.0.0.1:41235 pid 1201 log /tmp/kbroker-cluster-x/broker-1/broker.log operations http://127.0.0.1:41238
    ...
    zookeeper.connect=127.0.0.1:41234/kbroker
    bootstrap.servers=127.0.0.1:41235,127.0.0.1:41236,127.0.0.1:41237
    kbroker cluster: 3 brokers ready (data in ...); Ctrl-C or SIGTERM stops them

and stays in the foreground, reporting a process that exits by itself. The first SIGINT
or SIGTERM stops everything: the brokers get SIGTERM (a controlled shutdown each), then
ZooKeeper; a further signal meanwhile is ignored. Exit status: 0 when every broker
stopped cleanly, 1 when one could not start or did not exit 0, 2 for bad arguments.

Without --dir the data lives in a temporary directory removed on stop. With --dir it
stays, and the next `cluster up --dir D` reuses it: ZooKeeper's znodes, the brokers' logs,
the same broker ids and, when still free, the same ports (D/ports.json; each broker's
operations listener, /metrics and the console, has a port of its own too); --brokers then
defaults to the number of brokers D held. Overrides apply to every broker; the keys
that differ per broker are set by the command and refused here.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from kbroker.config import ConfigError, parse_override
from kbroker.tools.common import EXIT_BROKER_ERROR, EXIT_USAGE

if TYPE_CHECKING:  # imported when `up` runs: `kbroker serve` loads this module too
    from kbroker.cluster.local_cluster import Cluster

DEFAULT_BROKERS = 3
PER_BROKER_KEYS = frozenset({"node.id", "broker.id", "listeners", "advertised.listeners",
                             "log.dirs", "log.dir", "zookeeper.connect", "operations.listener"})
WATCH_INTERVAL_S = 0.5


class StopRequested(BaseException):
    """The first SIGINT or SIGTERM (a BaseException, as KeyboardInterrupt: no `except
    Exception` on the way swallows it)."""


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--brokers", type=int, default=None, metavar="N",
                   help=f"how many brokers (ids 1..N; default {DEFAULT_BROKERS}, or as many "
                        "as --dir held)")
    p.add_argument("--dir", default=None, metavar="D",
                   help="keep ZooKeeper's and the brokers' data here and reuse it on the next "
                        "start (default: a temporary directory removed on stop)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker config key for every broker (repeatable)")
    p.add_argument("--zookeeper-port", type=int, default=None, metavar="P",
                   help="ZooKeeper's client port on 127.0.0.1 (default: a free one)")


def run(args: argparse.Namespace) -> int:
    from kbroker.cluster.local_cluster import Cluster, ClusterError
    from kbroker.cluster.zookeeper_server import ZooKeeperError, ensure_installed

    try:
        overrides = _overrides(args.override)
        brokers = _broker_count(args)
    except ConfigError as e:
        print(f"kbroker cluster up: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        ensure_installed(log=lambda line: print(f"kbroker cluster: {line}", file=sys.stderr))
    except ZooKeeperError as e:
        print(f"kbroker cluster up: {e}", file=sys.stderr)
        return EXIT_BROKER_ERROR
    cluster = Cluster(brokers=brokers, directory=args.dir, overrides=overrides,
                      zookeeper_port=args.zookeeper_port, operations=True)
    kept = f"data in {cluster.directory}" + ("" if args.dir else ", removed on stop")
    _say(f"kbroker cluster: starting ZooKeeper and {brokers} brokers ({kept})")
    with _stop_on_signals():
        try:
            cluster.start()
            _print_ready(cluster, kept)
            _watch(cluster)
        except StopRequested:
            pass
        except (ClusterError, ZooKeeperError) as e:
            print(f"kbroker cluster up: {e}", file=sys.stderr)
            return EXIT_BROKER_ERROR
        finally:
            _say(f"kbroker cluster: stopping {brokers} brokers and ZooKeeper")
            cluster.stop()
    return _report_exits(cluster)


def _overrides(pairs: list[str]) -> dict[str, str]:
    from kbroker.config import BrokerConfig

    overrides = dict(parse_override(pair) for pair in pairs)
    refused = sorted(PER_BROKER_KEYS & set(overrides))
    if refused:
        raise ConfigError(f"{', '.join(refused)}: set per broker by `kbroker cluster up`, "
                          "not by --override")
    # ill-typed values stop here, not in N broker logs
    BrokerConfig.from_props({**overrides, "zookeeper.connect": "127.0.0.1:2181/kbroker"})
    return overrides


def _broker_count(args: argparse.Namespace) -> int:
    if args.brokers is not None:
        if args.brokers < 1:
            raise ConfigError("--brokers must be at least 1")
        return int(args.brokers)
    if args.dir is not None:
        from kbroker.cluster.local_cluster import last_ports

        held = last_ports(Path(args.dir)).get("brokers") or {}
        if held:
            return len(held)
    return DEFAULT_BROKERS


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise StopRequested once; later ones are ignored."""
    raised = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise StopRequested(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _print_ready(cluster: Cluster, kept: str) -> None:
    zk = cluster.zookeeper
    _say(f"ZooKeeper {zk.connect_string} pid {zk.pid} log {zk.log_path}")
    for broker_id, broker in cluster.brokers.items():
        _say(f"broker {broker_id} {broker.bootstrap} pid {broker.pid} log {broker.log_path} "
             f"operations {broker.operations_url}")
    _say(f"zookeeper.connect={cluster.zookeeper_connect}")
    _say(f"bootstrap.servers={cluster.bootstrap_servers}")
    _say(f"kbroker cluster: {len(cluster.brokers)} brokers ready ({kept}); "
         "Ctrl-C or SIGTERM stops them")


def _watch(cluster: Cluster) -> None:
    """Until a signal: report each process that exits by itself, once."""
    reported: set[str] = set()
    while True:
        time.sleep(WATCH_INTERVAL_S)
        exited = {f"broker {b}": (p.proc.returncode if p.proc else None, p.log_path)
                  for b, p in cluster.brokers.items() if not p.is_running()}
        if not cluster.zookeeper.is_running():
            zk = cluster.zookeeper
            exited["ZooKeeper"] = (zk.proc.returncode if zk.proc else None, zk.log_path)
        for name, (code, log_path) in exited.items():
            if name not in reported:
                reported.add(name)
                print(f"kbroker cluster: {name} exited (status {code}); see {log_path}",
                      file=sys.stderr, flush=True)


def _report_exits(cluster: Cluster) -> int:
    failed = {b: p.proc.returncode for b, p in cluster.brokers.items()
              if p.proc is not None and p.proc.returncode != 0}
    if failed:
        listed = ", ".join(f"broker {b} status {code}" for b, code in sorted(failed.items()))
        print(f"kbroker cluster: stopped; not cleanly: {listed}", file=sys.stderr)
        return EXIT_BROKER_ERROR
    _say("kbroker cluster: stopped")
    return 0


def _say(line: str) -> None:
    print(line, flush=True)
