"""The tools on listeners that want TLS or SASL. Without settings: after the transport
failure a tool says what the listener wants and that --command-config sets it
(kbroker.tools.listener_probe), instead of librdkafka's `_TRANSPORT` alone; a port where
nothing listens gets no such line. With --command-config (Kafka's client properties,
kbroker.tools.common): topics, groups, cluster status and transactions work
over SASL_SSL (SCRAM-SHA-512), both through librdkafka and through kbroker's client."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.broker import Broker

from .conftest import ROOT
from .security_support import endpoint
from .tls_support import Pki

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _kbroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kbroker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize("listener", ["SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_topics_list_says_the_listener_wants_tls_or_sasl(secure_broker: Broker, listener: str) -> None:
    address = endpoint(secure_broker, listener)
    done = _kbroker("topics", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1
    assert (f"kbroker topics: the listener at {address} closed the connection because the "
            f"client did not start") in done.stderr, done.stderr
    assert f"it is a {listener} listener. Give the client settings with --command-config FILE (" \
        f"security.protocol={listener}" in done.stderr


def test_acls_names_its_command_config_option(secure_broker: Broker) -> None:
    address = endpoint(secure_broker, "SASL_PLAINTEXT")
    done = _kbroker("acls", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1
    assert ("it is a SASL_PLAINTEXT listener. Give the client settings with --command-config "
            "FILE (security.protocol=SASL_PLAINTEXT, sasl.mechanism, sasl.jaas.config)") in done.stderr


def test_transactions_over_tls_says_so(secure_broker: Broker) -> None:
    address = endpoint(secure_broker, "SASL_SSL")
    done = _kbroker("transactions", "list", "--bootstrap-server", address, "--timeout", "5")
    assert done.returncode == 1 and "it is a SASL_SSL listener" in done.stderr, done.stderr


def test_a_plaintext_listener_and_a_dead_port_get_no_hint(secure_broker: Broker) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # bound, never listening
        done = _kbroker("topics", "list", "--bootstrap-server", dead, "--timeout", "3")
    assert done.returncode == 1 and "closed the connection" not in done.stderr
    ok = _kbroker("topics", "list", "--bootstrap-server", endpoint(secure_broker, "PLAINTEXT"))
    assert ok.returncode == 0 and "listener" not in ok.stderr


def _sasl_ssl_config(tmp_path: Path, pki: Pki) -> Path:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="bob-scram";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n"
        "ssl.endpoint.identification.algorithm=\n")
    return config


def test_the_tools_work_over_sasl_ssl_with_command_config(
        secure_broker: Broker, pki: Pki, tmp_path: Path) -> None:
    address = endpoint(secure_broker, "SASL_SSL")
    opts = ["--bootstrap-server", address, "--command-config", str(_sasl_ssl_config(tmp_path, pki)),
            "--timeout", "20"]
    created = _kbroker("topics", "create", "over-sasl-ssl", "--partitions", "2", *opts)
    assert created.returncode == 0, created.stderr
    listed = _kbroker("topics", "list", *opts)  # librdkafka's AdminClient
    assert listed.returncode == 0 and "over-sasl-ssl" in listed.stdout.split(), listed.stderr
    described = _kbroker("topics", "describe", "over-sasl-ssl", *opts)  # kbroker's client too
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 2" in described.stdout
    status = _kbroker("cluster", "status", *opts)
    assert status.returncode == 0 and "OfflinePartitions: 0" in status.stdout, status.stderr
    transactions = _kbroker("transactions", "list", *opts)
    assert transactions.returncode == 0, transactions.stderr
    assert transactions.stdout.split()[:4] == ["TransactionalId", "Coordinator", "ProducerId",
                                               "TransactionState"]
    groups = _kbroker("groups", "list", *opts)
    assert groups.returncode == 0, groups.stderr


def test_a_mechanism_kbroker_client_lacks_is_a_usage_error(secure_broker: Broker,
                                                           tmp_path: Path) -> None:
    config = tmp_path / "oauth.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer."
                      'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";\n')
    done = _kbroker("cluster", "status", "--bootstrap-server",
                    endpoint(secure_broker, "SASL_PLAINTEXT"), "--command-config", str(config))
    assert done.returncode == 2, done.stderr
    assert ("sasl.mechanism=OAUTHBEARER is not supported: kbroker's client speaks PLAIN, "
            "SCRAM-SHA-256, SCRAM-SHA-512") in done.stderr, done.stderr
