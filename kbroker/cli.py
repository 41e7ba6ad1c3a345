"""The `kbroker` command.

    kbroker serve [CONFIG_FILE] [--override KEY=VALUE]... [--log-level [LOGGER=]LEVEL]...
                  [--trace FILE [--trace-records] [--trace-max-bytes N] [--trace-backups N]]
    kbroker serve --help-config
    kbroker trace FILE [--client-id ID] [--api NAME] [--errors-only] [--summary] [--json]


CONFIG_FILE is a Kafka server.properties file; overrides win over it. With no
arguments the broker listens on PLAINTEXT://127.0.0.1:9092 with data in
/tmp/kbroker-logs (see kbroker.config). Ready is one log line on stderr:

    kbroker listening on PLAINTEXT://127.0.0.1:9092 (log.dirs=/tmp/kbroker-logs)

with the real port when the listener asked for port 0. The operations listener
(operations.listener: /metrics, /healthz, /readyz, the web console; kbroker.ops) is on
at 127.0.0.1:9404 unless the configuration sets it (empty: off); when that default port
is taken it takes a free port (logged), and the ready line ends with the console's URL
(`, console at http://127.0.0.1:9404`). SIGTERM or SIGINT stops
it gracefully (exit 0). A bad configuration exits 2 with the reason.
`--help-config` prints every broker and topic key from the one table of keys
(kbroker.common.configs): type, default, valid values, documentation.

Log levels (log4j's names, kbroker.server.broker_loggers): `--log-level LEVEL` sets
the root logger's (default INFO), `--log-level LOGGER=LEVEL` one logger's, e.g.
`--log-level kafka.request.logger=DEBUG` for the request log; log4j keys in
CONFIG_FILE (`log4j.logger.kafka.request.logger=DEBUG`) do the same, and the command
line wins. `--trace FILE` writes the protocol trace (kbroker.server.protocol_trace),
which `kbroker trace` reads (kbroker.tools.trace).

Other subcommands (`topics`, `groups`, `cluster`, `transactions`, `perf`, `top`) register themselves in
`SUBCOMMANDS` with a (configure_parser, run) pair.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kbroker import __version__
from kbroker.common.configs import DEFAULT_OPERATIONS_LISTENER
from kbroker.config import DEFAULT_LOG_DIR, ConfigError, load_properties_file, parse_override
from kbroker.ops import top as top_cli
from kbroker.perf import cli as perf_cli
from kbroker.server.broker_loggers import ROOT, parse_level, set_levels, take_log4j_levels
from kbroker.server.protocol_trace import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES, TraceSettings
from kbroker.tools import acls as acls_cli
from kbroker.tools import cluster as cluster_cli
from kbroker.tools import groups as groups_cli
from kbroker.tools import topics as topics_cli
from kbroker.tools import trace as trace_cli
from kbroker.tools import transactions as transactions_cli

if TYPE_CHECKING:
    from kbroker.server.listener import BindError
    from kbroker.storage.log_dir_lock import LogDirLockedError

EXIT_CONFIG_ERROR = 2


SERVE_EPILOG = (
    "Without CONFIG_FILE or overrides: listeners=PLAINTEXT://127.0.0.1:9092, "
    f"log.dirs={DEFAULT_LOG_DIR}, operations.listener={DEFAULT_OPERATIONS_LISTENER} (/metrics, "
    "/healthz, /readyz, the web console; empty: off). Keys are Apache Kafka's "
    "server.properties names. "
    "SIGTERM/SIGINT stop gracefully (exit 0); a bad configuration exits 2. "
    "--help-config lists every key."
)


def _serve_parser(p: argparse.ArgumentParser) -> None:
    p.epilog = SERVE_EPILOG
    p.add_argument("config_file", nargs="?", metavar="CONFIG_FILE",
                   help="a Kafka server.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config key (repeatable; wins over CONFIG_FILE)")
    p.add_argument("--log-level", action="append", default=[], type=_log_level,
                   metavar="[LOGGER=]LEVEL",
                   help="the root logger's level (default INFO), or one logger's, e.g. "
                        "kafka.request.logger=DEBUG (the request log); TRACE, DEBUG, INFO, "
                        "WARN, ERROR, FATAL, OFF; repeatable")
    p.add_argument("--trace", metavar="FILE",
                   help="write every request and response as JSON lines to FILE (read it "
                        "with `kbroker trace FILE`)")
    p.add_argument("--trace-records", action="store_true",
                   help="with --trace: the records of each batch too, not only its header")
    p.add_argument("--trace-max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                   help=f"with --trace: rotate FILE before it passes N bytes "
                        f"(default {DEFAULT_MAX_BYTES})")
    p.add_argument("--trace-backups", type=int, default=DEFAULT_BACKUPS, metavar="N",
                   help=f"with --trace: rotated files kept, FILE.1 ... FILE.N "
                        f"(default {DEFAULT_BACKUPS})")
    p.add_argument("--help-config", action="store_true",
                   help="list every broker and topic config key, with its type, default and "
                        "documentation, and exit")


def _log_level(text: str) -> tuple[str, int]:
    """`LEVEL` (the root logger) or `LOGGER=LEVEL` -> (logger name, level)."""
    name, _, level_text = text.rpartition("=")
    level = parse_level(level_text)
    if level is None:
        raise argparse.ArgumentTypeError(
            f"unknown level {level_text!r}: TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF")
    return name or ROOT, level


def config_help() -> str:
    """`kbroker serve --help-config`: the table of keys, as text."""
    from kbroker.common.configs import (
        ACCEPTED_WITHOUT_EFFECT,
        BROKER_CONFIGS,
        TOPIC_CONFIGS,
    )

    accepted = [f"{name}\n    {why}" for name, why in sorted(ACCEPTED_WITHOUT_EFFECT.items())]
    return (
        "Broker configs (server.properties, --override; read at startup, and the dynamic "
        "ones\nkbroker applies live also through AlterConfigs on the BROKER resource: "
        "docs/configuration.md)\n\n" + BROKER_CONFIGS.to_text(broker=True)
        + "\nTopic configs (CreateTopics, AlterConfigs, IncrementalAlterConfigs)\n\n"
        + TOPIC_CONFIGS.to_text(broker=False)
        + "\nKafka broker configs accepted without effect\n\n" + "\n".join(accepted) + "\n"
        + "\nPer listener: listener.name.<listener>.<ssl.* or sasl.* key>, and\n"
        "listener.name.<listener>.<mechanism>.sasl.jaas.config (the users of PLAIN, the\n"
        "OAUTHBEARER unsecured validator's options) and\n"
        "listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class (the\n"
        "OAUTHBEARER validator: docs/oauthbearer.md)\n"
    )


def _serve(args: argparse.Namespace) -> int:
    from kbroker.broker import Broker
    from kbroker.common.errors import KafkaError
    from kbroker.config import BrokerConfig
    from kbroker.server.listener import BindError
    from kbroker.storage.log_dir_lock import LogDirLockedError
    from kbroker.utils.malloc import keep_frame_buffers_in_heap
    from kbroker.utils.rlimit import raise_open_file_limit

    if args.help_config:
        print(config_help(), end="")
        return 0
    keep_frame_buffers_in_heap()  # process-wide, hence here and not in Broker
    raise_open_file_limit()  # as the JVM does for Kafka (HotSpot's MaxFDLimit)

    try:
        props = load_properties_file(args.config_file) if args.config_file else {}
        for pair in args.override:
            key, value = parse_override(pair)
            props[key] = value
        levels = take_log4j_levels(props)
        # the operations listener is on unless the configuration says otherwise (empty: off)
        default_operations = "operations.listener" not in props
        if default_operations:
            props["operations.listener"] = DEFAULT_OPERATIONS_LISTENER
        config = BrokerConfig.from_props(props)
    except ConfigError as e:
        print(f"kbroker: configuration error: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    set_levels({**levels, **dict(args.log_level)})
    trace = None
    if args.trace:
        trace = TraceSettings(args.trace, args.trace_records, args.trace_max_bytes,
                              args.trace_backups)
    broker = Broker(config, trace=trace, operations_optional=default_operations)
    try:
        broker.serve_forever()
    except ConfigError as e:
        print(f"kbroker: configuration error: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except BindError as e:
        print(f"kbroker: cannot start: {e}", file=sys.stderr)
        if e.errno == errno.EADDRINUSE:
            print(_port_taken_hint(e), file=sys.stderr)
        return 1
    except (OSError, KafkaError) as e:  # a dir, ZooKeeper, the cluster id...
        print(f"kbroker: cannot start: {e}", file=sys.stderr)
        if isinstance(e, LogDirLockedError):
            print(_log_dir_taken_hint(e), file=sys.stderr)
        return 1
    if broker.failure is not None:
        print(f"kbroker: stopped: {broker.failure}", file=sys.stderr)
        return 1
    return 0


def _port_taken_hint(e: BindError) -> str:
    """What to do when another process listens on a listener's address."""
    port = e.listener.port
    other = f"{e.listener.name}://{e.url_host}:{port + 1 if port < 65535 else 0}"
    return (f"kbroker: another process listens on {e.url_host}:{port} (a broker already "
            f"running?); `ss -ltnp 'sport = :{port}'` shows which. To listen elsewhere: "
            f"--override listeners={other}")


def _log_dir_taken_hint(e: LogDirLockedError) -> str:
    """What to do when another broker holds a log dir (its `.lock`)."""
    return (f"kbroker: each broker needs its own log.dirs, and another broker uses "
            f"{e.log_dir}. To run a second one: --override log.dirs={e.log_dir.rstrip('/')}-2 "
            f"(with a listeners override of its own)")


# Subcommands that are Kafka clients (the `tools` extra); `serve` needs none of it, nor
# `cluster up` (its other actions set `needs_client` on their parsers).
NEEDS_CLIENT = frozenset({"groups", "topics", "perf", "acls"})

SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                             Callable[[argparse.Namespace], int]]] = {
    "serve": ("run a broker", _serve_parser, _serve),
    "groups": (groups_cli.HELP, groups_cli.configure_parser, groups_cli.run),
    "topics": (topics_cli.HELP, topics_cli.configure_parser, topics_cli.run),
    "cluster": (cluster_cli.HELP, cluster_cli.configure_parser, cluster_cli.run),
    "acls": (acls_cli.HELP, acls_cli.configure_parser, acls_cli.run),
    "transactions": (transactions_cli.HELP, transactions_cli.configure_parser, transactions_cli.run),
    "perf": (perf_cli.HELP, perf_cli.configure_parser, perf_cli.run),
    "trace": (trace_cli.HELP, trace_cli.configure_parser, trace_cli.run),
    "top": (top_cli.HELP, top_cli.configure_parser, top_cli.run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbroker", description="A Kafka-compatible broker.")
    parser.add_argument("--version", action="version", version=f"kbroker {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (help_text, configure, _run) in SUBCOMMANDS.items():
        configure(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,  # `serve --log-level` and log4j keys may change it
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    _desc, _configure, run = SUBCOMMANDS[args.command]
    needs_client = args.command in NEEDS_CLIENT or getattr(args, "needs_client", False)
    if needs_client and importlib.util.find_spec("confluent_kafka") is None:
        print(f"kbroker: `kbroker {args.command}` talks to brokers through confluent-kafka, which "
              "is not installed: pip install 'kbroker[tools]'", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
