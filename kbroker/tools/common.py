"""What the `kbroker topics` / `kbroker groups` style admin tools share: the
--bootstrap-server/--timeout/--command-config options, a confluent-kafka AdminClient,
running one action with Kafka-style exit codes, what a listener wanted when a
connection failed, and KafkaError and broker id list rendering.

--command-config FILE is the Java client's properties file that Kafka's tools read
(kafka-topics.sh --command-config), for librdkafka and for kbroker's own client:

    client_config(bootstrap, command_config) -> dict
        librdkafka's settings (confluent-kafka's AdminClient and Consumer), the keys
        under librdkafka's names: security.protocol, sasl.mechanism, sasl.jaas.config
        with username and password, PEM ssl.truststore.location / ssl.keystore.location,
        ssl.key.password; with sasl.mechanism=OAUTHBEARER, the OAuthBearerLoginModule's
        unsecuredLoginStringClaim_sub (an unsecured token for that principal) or its
        clientId / clientSecret / scope with sasl.oauthbearer.token.endpoint.url (OIDC
        client credentials, Kafka's OAuthBearerLoginCallbackHandler).
    connection_security(command_config) -> ConnectionSecurity | None
        the same file for kbroker's client (the Metadata, DescribeCluster, reassignment
        and transaction requests of kbroker.tools.protocol_admin and
        kbroker.tools.transactions), read as the Spark source reads Kafka's client
        options (kbroker.spark.security: PLAIN, SCRAM-SHA-256/512, PEM stores);
        OAUTHBEARER is refused there (a usage error naming it), never dropped.

A key that cannot be handed on is a UsageError (exit status 2).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kbroker.client import ConnectionSecurity
from kbroker.client.connection import KafkaClientError

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
    common.add_argument("--command-config", metavar="FILE",
                        help="client settings as for Kafka's tools (security.protocol, "
                             "sasl.*, ssl.*): for a listener that is not PLAINTEXT")
    return common


def librdkafka_config(args: argparse.Namespace) -> dict[str, Any]:
    """confluent-kafka settings for --bootstrap-server and --command-config, whose
    librdkafka log lines (one per failed connect attempt) are dropped: a failure is
    reported once, by run_action."""
    quiet = logging.getLogger("kbroker.tools.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return {**client_config(args.bootstrap_server, args.command_config), "logger": quiet}


def admin_client(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(librdkafka_config(args))


def security(args: argparse.Namespace) -> Any:
    """kbroker's client's ConnectionSecurity for --command-config (None: PLAINTEXT)."""
    return connection_security(args.command_config)


def run_action(tool: str, actions: Mapping[str, Action], name: str, args: argparse.Namespace) -> int:
    """Run actions[name] with an AdminClient: 0 ok, 1 broker error, 2 usage error."""
    try:
        return actions[name](admin_client(args), args)
    except UsageError as e:
        print(f"kbroker {tool}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:
        print(f"kbroker {tool}: {error_text(e)}", file=sys.stderr)
        explain_transport_failure(tool, e, args)
        return EXIT_BROKER_ERROR


# librdkafka's codes for a connection that failed or never answered, and kbroker's
# client's (NETWORK_EXCEPTION): after one, the tools ask the listener what it wants
_TRANSPORT_CODES = frozenset({-195, -187, -185, 13})  # _TRANSPORT, _ALL_BROKERS_DOWN, _TIMED_OUT


def explain_transport_failure(tool: str, e: BaseException, args: argparse.Namespace) -> None:
    """After a failed connection without --command-config: when the listener closed it
    because the client did not start TLS or SASL (kbroker.tools.listener_probe), print
    which, and that --command-config sets them."""
    if args.command_config is not None:
        return
    code = e.error_code if isinstance(e, KafkaClientError) else error_code(e)
    if code not in _TRANSPORT_CODES and not isinstance(e, TimeoutError):  # a future's wait
        return
    from kbroker.tools.listener_probe import hint, needed_protocol

    server = args.bootstrap_server.split(",")[0].strip()
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        return
    protocol = needed_protocol(host.strip("[]"), int(port))
    if protocol is not None:
        print(hint(tool, host, int(port), protocol), file=sys.stderr)


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


def client_config(bootstrap: str, command_config: str | None) -> dict[str, Any]:
    """librdkafka settings from Kafka's Java client settings in a properties file."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 3}
    if command_config is None:
        return conf
    from kbroker.config import load_properties_file
    from kbroker.security.jaas import parse_jaas

    for key, value in load_properties_file(command_config).items():
        if key == "sasl.jaas.config":
            module = parse_jaas(key, value)
            if module.login_module.endswith(".OAuthBearerLoginModule"):
                conf.update(_oauthbearer_login(module.options))
                continue
            conf["sasl.username"] = module.options.get("username", "")
            conf["sasl.password"] = module.options.get("password", "")
        elif key == "sasl.login.callback.handler.class":
            if value != OIDC_LOGIN_HANDLER:
                raise UsageError(f"{key}={value}: librdkafka can use {OIDC_LOGIN_HANDLER} "
                                 "(OIDC client credentials) only")
            conf["sasl.oauthbearer.method"] = "oidc"
        elif key == "ssl.truststore.location":
            conf["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            conf["ssl.certificate.location"] = conf["ssl.key.location"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            conf[key] = value or "none"
        elif key in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.upper() != "PEM":
                raise UsageError(f"{key}={value}: only PEM stores can be handed to librdkafka")
        else:
            conf[key] = value  # security.protocol, sasl.mechanism, ssl.key.password, ...
    return conf


OIDC_LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
_OIDC_OPTIONS = {"clientId": "sasl.oauthbearer.client.id",
                 "clientSecret": "sasl.oauthbearer.client.secret", "scope": "sasl.oauthbearer.scope"}


def _oauthbearer_login(options: dict[str, str]) -> dict[str, str]:
    """librdkafka's settings for the OAuthBearerLoginModule options of a Java client."""
    out: dict[str, str] = {}
    for option, value in options.items():
        if option == "unsecuredLoginStringClaim_sub":
            out["sasl.oauthbearer.config"] = f"principal={value}"
            out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        elif option in _OIDC_OPTIONS:
            out[_OIDC_OPTIONS[option]] = value
            out["sasl.oauthbearer.method"] = "oidc"
        else:
            raise UsageError(f"sasl.jaas.config: OAuthBearerLoginModule option {option} has no "
                             "librdkafka counterpart kbroker hands on")
    return out


def connection_security(command_config: str | None) -> ConnectionSecurity | None:
    """See the module docstring; None for PLAINTEXT (or no file)."""
    if command_config is None:
        return None
    from kbroker.config import load_properties_file
    from kbroker.spark.security import SecurityOptionError, security_options
    from kbroker.spark.security import connection_security as spark_connection_security

    props = load_properties_file(command_config)
    try:
        opts = security_options({f"kafka.{k}": v for k, v in props.items()})
        return spark_connection_security(opts)
    except SecurityOptionError as e:
        said = str(e).replace("kafka.", "").replace("kbroker's Spark client", "kbroker's client")
        raise UsageError(f"--command-config {command_config}: {said}") from None
