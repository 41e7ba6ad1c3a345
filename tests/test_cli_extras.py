"""The broker needs no Kafka client library; the tools say clearly when theirs is missing."""

from __future__ import annotations

import subprocess
import sys

# Python run with confluent_kafka made unimportable (as without the `tools` extra).
WITHOUT_CLIENT = "import sys; sys.modules['confluent_kafka'] = None; from kbroker.cli import main; "


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_CLIENT + code], capture_output=True,
                          text=True, timeout=60)


def test_tools_without_confluent_kafka_name_the_extra() -> None:
    done = run("sys.exit(main(['topics', 'list']))")
    assert done.returncode == 2
    assert "pip install 'kbroker[tools]'" in done.stderr and "Traceback" not in done.stderr


def test_the_broker_runs_without_confluent_kafka() -> None:
    code = ("from kbroker.broker import Broker; b = Broker({'listeners': 'PLAINTEXT://127.0.0.1:0'}); "
            "b.start(); print(b.port > 0); b.stop()")
    done = subprocess.run([sys.executable, "-c", WITHOUT_CLIENT + code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
