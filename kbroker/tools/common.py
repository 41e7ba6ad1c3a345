"""What the `kbroker topics` / `kbroker groups` style admin tools share: the
--bootstrap-server/--timeout options, a confluent-kafka AdminClient, running one
action with Kafka-style exit codes, and KafkaError and broker id list rendering."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
EXIT_BROKER_ERROR = 1
EXIT_USAGE = 2

Action = Callable[[Any, argparse.Namespace], int]


class UsageError(ValueError):
    """Bad arguments the parser could not catch (exit status 2)."""


def connection_options() -> argparse.ArgumentParser:
    """A parent parser with --bootstrap-server and --timeout."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help=f"the broker to talk to (default {DEFAULT_BOOTSTRAP})")
    common.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for the broker (default 30)")
    return common


def admin_client(bootstrap: str) -> Any:
    """An AdminClient whose librdkafka log lines (one per failed connect attempt) are
    dropped: a failure is reported once, by run_action."""
    from confluent_kafka.admin import AdminClient

    quiet = logging.getLogger("kbroker.tools.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3, "logger": quiet}
    return AdminClient(conf)


def run_action(tool: str, actions: Mapping[str, Action], name: str, args: argparse.Namespace) -> int:
    """Run actions[name] with an AdminClient: 0 ok, 1 broker error, 2 usage error."""
    try:
        return actions[name](admin_client(args.bootstrap_server), args)
    except UsageError as e:
        print(f"kbroker {tool}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:
        print(f"kbroker {tool}: {error_text(e)}", file=sys.stderr)
        explain_transport_failure(tool, e, args.bootstrap_server, None)
        return EXIT_BROKER_ERROR


# librdkafka's codes for a connection that failed or never answered, and kbroker's
# client's (NETWORK_EXCEPTION): after one, the tools ask the listener what it wants
_TRANSPORT_CODES = frozenset({-195, -187, -185, 13})  # _TRANSPORT, _ALL_BROKERS_DOWN, _TIMED_OUT


def explain_transport_failure(tool: str, e: BaseException, bootstrap: str,
                              option: str | None) -> None:
    """After a failed connection: when the listener closed it because the client did not
    start TLS or SASL (kbroker.tools.listener_probe), print which, and the tool's `option`
    that sets them (None: it has none)."""
    code = getattr(e, "error_code", None)
    if code is None:
        code = error_code(e)
    if code not in _TRANSPORT_CODES and not isinstance(e, TimeoutError):  # a future's wait
        return
    from kbroker.tools.listener_probe import hint, needed_protocol

    server = bootstrap.split(",")[0].strip()
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        return
    protocol = needed_protocol(host.strip("[]"), int(port))
    if protocol is not None:
        print(hint(tool, host, int(port), protocol, option), file=sys.stderr)


def id_list(ids: list[int]) -> str:
    """Broker ids as Kafka's tools print them: 1,2,3."""
    return ",".join(str(i) for i in ids)


def error_code(e: Any) -> int | None:
    """The code of a KafkaError, or of the one inside a KafkaException; else None."""
    code = getattr(_kafka_error(e), "code", None)
    return code() if callable(code) else None


def error_text(e: Any) -> str:
    """`NAME: message` of a KafkaError (or a KafkaException's); else str(e)."""
    err = _kafka_error(e)
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        return f"{err.name()}: {err.str()}"
    return str(e) or type(e).__name__


def _kafka_error(e: Any) -> Any:
    if isinstance(e, BaseException):
        return e.args[0] if e.args else None
    return e  # some AdminClient results hand over the KafkaError itself


def print_table(rows: list[tuple[str, ...]]) -> None:
    """Rows as left-aligned columns, the first row the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
