"""Fixtures for kbroker.spark: one SparkSession and one embedded broker per test session.

Spark start-up costs 10-20 s of CPU, so `spark` is session-scoped (local[2],
loopback only, UI off, 2 shuffle partitions), with what Spark writes to /tmp
otherwise (spark-*, blockmgr-*, native library copies) in its own pytest
temporary directory (`spark_temp_dir`). `broker` is an embedded kbroker
Broker on 127.0.0.1 with 3 partitions per auto-created topic; tests use their
own topic names (`topic` fixture). `pki` and `secure_broker` (a broker with SSL, mTLS,
SASL_PLAINTEXT and SASL_SSL listeners) are tests/integration's security fixtures. Tests that need pyspark carry the `spark`
marker and are skipped when pyspark or pyarrow is missing.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbroker.broker import Broker
from tests.integration.security_support import pki, secure_broker  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
_names = itertools.count()


def spark_env() -> dict[str, str]:
    """Environment for Spark drivers and workers: loopback, this interpreter, this tree."""
    path = os.environ.get("PYTHONPATH", "")
    return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def load_example(name: str) -> Any:
    """examples/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_spark_session(app: str, temp_dir: Path) -> Any:
    os.environ.update(spark_env())
    from kbroker.spark.session import local_session

    return local_session(app, temp_dir=temp_dir)


@pytest.fixture(scope="session")
def spark_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark")


@pytest.fixture(scope="session")
def spark(spark_temp_dir: Path) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    session = new_spark_session("kbroker-spark-tests", spark_temp_dir)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0",
             "log.dirs": str(tmp_path_factory.mktemp("kbroker-spark-logs")),
             "num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
    with Broker(props) as b:
        yield b


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name.split('[')[0].replace('_', '-')}-{next(_names)}"
