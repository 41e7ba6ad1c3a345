"""kafka-python's own integration suite against a kbroker broker process.

The suite ships in kafka-python's source distribution (test/integration); its fixtures
use an external broker when KAFKA_URI is set, and gate tests on KAFKA_VERSION (3.9.0:
the Kafka whose APIs kbroker answers). The sdist of the kafka-python this venv has is
downloaded from PyPI once (kept under the venv), and its suite runs in a subprocess
against a broker configured as kafka-python's own test broker (its
servers/resources/default/kafka.properties): an ACL authorizer that allows everything
without ACLs, 4 partitions, a 1 s minimum session timeout, no initial rebalance delay.
SASL and SSL tests are left out (they need listeners the external-broker mode does not
set up; tests/integration/test_security_clients.py covers kafka-python over both).

Every test of the suite passes but the one named in KNOWN_FAILURES, with its reason. A case
that fails and then passes when run again alone is printed; one that fails twice fails.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import pytest

from .conftest import BrokerProcess

pytestmark = pytest.mark.timeout(1200)

KAFKA_VERSION = "3.9.0"

# test name -> why kbroker answers differently from Kafka 3.9
KNOWN_FAILURES = {
    "test_describe_configs_broker_resource_returns_configs":
        "advertised.listeners is described read_only: kbroker cannot change a listener while "
        "running, and reports as read-only every broker config it refuses to alter",
}

BROKER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "num.partitions": "4",
    "offsets.topic.num.partitions": "2",
    "offsets.commit.timeout.ms": "500",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "replica.lag.time.max.ms": "1000",
    "log.cleaner.enable": "false",
}


# test/service.py for an external broker only (what KAFKA_URI asks for): nothing to run.
SERVICE = '''"""Written by kbroker's tests/integration/test_kafka_python_suite.py."""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def open(self):
        pass

    def close(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this run of the suite uses an external broker (KAFKA_URI) only")
'''


@pytest.fixture(scope="module")
def suite_source() -> Path:
    """kafka-python's sdist, unpacked (downloaded once into the venv)."""
    version = metadata.version("kafka-python")
    cache = Path(sys.prefix) / "client-suites"
    root = cache / f"kafka_python-{version}"
    if not (root / "test" / "integration").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", "--dest", str(cache), f"kafka-python=={version}"],
                       check=True, timeout=300)
        with tarfile.open(cache / f"kafka_python-{version}.tar.gz") as tar:
            tar.extractall(cache, filter="data")
    # The sdist leaves out test/__init__.py (without it `test` is the standard library's
    # package) and test/service.py, which runs the brokers the suite would start itself.
    (root / "test" / "__init__.py").touch()
    (root / "test" / "service.py").write_text(SERVICE)
    return root


def _run_suite(suite_source: Path, env: dict[str, str], report: Path, selection: list[str]):
    return subprocess.run(
        [sys.executable, "-m", "pytest", *selection, "-q", "-p", "no:cacheprovider",
         "-p", "no:kbroker", "--timeout", "120", "-k", "not sasl and not ssl",
         f"--junitxml={report}"],
        cwd=suite_source, env=env, capture_output=True, text=True, timeout=1100)


def _outcomes(report: Path) -> tuple[list[str], int]:
    """(node ids of the failed cases, number passed) from a junit report."""
    failed: list[str] = []
    passed = 0
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/")
            failed.append(f"{module}.py::{case.get('name', '')}")
        elif case.find("skipped") is None:
            passed += 1
    return failed, passed


def _name(node_id: str) -> str:
    return node_id.split("::")[-1].split("[")[0]


def test_kafka_python_integration_suite(suite_source: Path, broker_factory, tmp_path: Path) -> None:
    broker: BrokerProcess = broker_factory(BROKER).start()
    fake_kafka = tmp_path / "kafka"  # the fixtures want an install dir, even when external
    (fake_kafka / "bin").mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KAFKA_VERSION": KAFKA_VERSION,
           "KAFKA_URI": f"PLAINTEXT://{broker.bootstrap_servers}", "KAFKA_ROOT": str(fake_kafka)}
    report = tmp_path / "suite.xml"
    run = _run_suite(suite_source, env, report, ["test/integration"])
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    failed, passed = _outcomes(report)
    assert passed >= 45, run.stdout[-3000:]  # the suite ran against the broker
    unexplained = [node for node in failed if _name(node) not in KNOWN_FAILURES]
    if not unexplained:
        return
    # A case that fails once and then passes alone is the client's own race, not the
    # broker's answer: kafka-python 3.0's metadata refresh clears an update that a
    # subscribe() asks for while the bootstrap Metadata response is on its way, so a
    # group-less consumer that subscribes at that moment waits out metadata.max.age.ms.
    # A case that fails twice fails this test.
    retry_report = tmp_path / "retry.xml"
    retry = _run_suite(suite_source, env, retry_report, unexplained)
    assert retry_report.exists(), retry.stdout[-3000:] + retry.stderr[-3000:]
    failed_again, passed_again = _outcomes(retry_report)
    assert passed_again + len(failed_again) == len(unexplained), retry.stdout[-3000:]
    assert not failed_again, (f"failed twice: {failed_again}\n" + run.stdout[-3000:]
                              + retry.stdout[-3000:])
    print(f"passed when run again: {unexplained}")
