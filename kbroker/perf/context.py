"""What a perf JSON records about where and with what it ran, so two files can be
compared knowingly: kbroker's version and git commit, the client library versions,
the host's CPU, core count and load average, the time, and every setting. It is taken
before the first run (the load average then is the machine's, not perf's own);
`load_average_after` is added when the runs are over."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kbroker.perf.options import PerfOptions

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def run_context(options: PerfOptions, mode: str, repeats: int) -> dict[str, Any]:
    import confluent_kafka

    import kbroker

    return {
        "kbroker_version": kbroker.__version__,
        "kbroker_commit": git_commit(),
        "confluent_kafka_version": _version_text(confluent_kafka.version()),
        "librdkafka_version": confluent_kafka.libversion()[0],
        "python_version": platform.python_version(),
        "host": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "load_average": load_average(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {"mode": mode, "repeats": repeats, **asdict(options)},
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def _version_text(version: Any) -> str:
    """confluent_kafka.version() is a string in some releases, (string, int) in others."""
    return str(version[0] if isinstance(version, tuple) else version)


def git_commit() -> str | None:
    """The commit of the checkout kbroker runs from (with `-dirty` when it has changes), or
    None for an installed wheel or without git."""
    if not (PACKAGE_DIR.parent / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(PACKAGE_DIR.parent), "describe", "--always",
                                 "--dirty", "--abbrev=40"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit or None


def cpu_model() -> str | None:
    """`model name` of /proc/cpuinfo (Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None
