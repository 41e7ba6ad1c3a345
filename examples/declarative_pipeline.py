"""Metrics on Spark Declarative Pipelines: kbroker topics as streaming tables and sinks.

    python examples/declarative_pipeline.py              # everything on this machine
    python examples/declarative_pipeline.py --records 8000 --out /tmp/sdp-demo

What it does:
  1. starts an embedded kbroker Broker on 127.0.0.1 (a free port, a temp log dir) and
     publishes metrics to `app-metrics` (examples/metrics_pipeline.py's producers);
  2. writes a pipeline spec for that broker beside a copy of
     examples/declarative_pipeline/transformations (the streaming table `metrics_raw`
     reading the topic, the materialized view `metrics_by_minute`, and the sink
     `app_metrics_clean` writing the topic `app-metrics-clean`), and runs it with
     `spark-pipelines run` (pyspark >= 4.1, `pip install 'pyspark[pipelines]'`) in a
     process group of its own, killed by PID if it outlasts the timeout;
  3. reads the materialized view's parquet files and the output topic, and prints them.

pyspark's own fault: with pyspark 4.3.0 (and any release without SPARK-59135), a
pipeline whose streaming table reads a Python data source computes every dataset and
then `spark-pipelines run` exits 1 with `[UNKNOWN_RESPONSE] Unknown response: Plan
observed(__python_accumulator__=...)`: the Spark Connect client rejects the Python
workers' (empty) profiler accumulator updates that arrive as observed metrics. It
happens without kbroker (tests/spark/test_declarative_pipeline.py runs a ten-line
Python data source to show it); this runner reports it as that known fault when every
flow COMPLETED.

Needs pyspark[pipelines] >= 4.1, pyarrow and confluent-kafka; Java 17 on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = Path(__file__).resolve().with_name("declarative_pipeline")
OUTPUT_TOPIC = "app-metrics-clean"
UPSTREAM_FAULT = "[UNKNOWN_RESPONSE] Unknown response: Plan observed(__python_accumulator__"


def write_spec(workdir: Path, servers: str) -> Path:
    """The pipeline's files in `workdir`, its spec naming `servers` and its storage."""
    shutil.copytree(PIPELINE / "transformations", workdir / "transformations",
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = workdir / "spark-pipeline.yaml"
    spec.write_text(f"""name: kbroker-metrics
storage: file://{workdir / 'storage'}
configuration:
  kbroker.bootstrap.servers: "{servers}"
libraries:
  - glob:
      include: transformations/**
""")
    return spec


def run_pipeline(spec: Path, timeout_s: float = 600.0) -> tuple[int, str]:
    """`spark-pipelines run` in its own process group (its JVM, Python workers and Spark
    Connect server with it); the group is killed by PID if it outlasts `timeout_s`.
    Returns the exit status and the output."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    log = spec.parent / "spark-pipelines.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(bin_dir / "spark-pipelines"), "run", "--spec", str(spec)],
                                cwd=spec.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:  # whatever it left running, and itself if it timed out
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)
    return proc.returncode, log.read_text(errors="replace")


def outcome(returncode: int, output: str) -> str:
    """"ok", "upstream-fault" (pyspark's UNKNOWN_RESPONSE after every flow completed) or
    "failed"."""
    if returncode == 0:
        return "ok"
    if UPSTREAM_FAULT in output and "Run is COMPLETED" in output:
        return "upstream-fault"
    return "failed"


def read_view(workdir: Path, name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(str(workdir / "spark-warehouse" / name))
    return table.to_pylist()


def read_topic(servers: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    from kbroker.client import KafkaClient, TopicPartition
    from kbroker.spark.arrow import decode_to_batch
    from kbroker.spark.source import arrow_schema, kafka_schema

    schema = arrow_schema(kafka_schema())
    out = []
    with KafkaClient(servers) as client:
        parts = client.topic_partitions([topic]).get(topic, [])
        ends = client.list_offsets({TopicPartition(topic, p): -1 for p in parts})
        for tp, end in ends.items():
            offset = 0
            while offset < end:
                leader = client.leader_for(tp)
                client.send_fetch(leader, client.fetch_request({tp: offset}, 8 << 20))
                records = client.receive_fetch(leader)[tp].records
                batch = decode_to_batch(records, offset, end, tp.topic, tp.partition, schema)
                out += list(zip(batch.column("key").to_pylist(),
                                batch.column("value").to_pylist(), strict=True))
                offset += batch.num_rows
    return out


def run(servers: str, workdir: Path, records: int = 2000) -> dict[str, Any]:
    """Publish, run the pipeline, read what it made (also for tests)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from metrics_pipeline import publish_metrics

    published = publish_metrics(servers, records, seconds=1.0)
    spec = write_spec(workdir, servers)
    returncode, output = run_pipeline(spec)
    summary: dict[str, Any] = {"published": published, "returncode": returncode,
                               "outcome": outcome(returncode, output), "output": output}
    if summary["outcome"] != "failed":
        summary["metrics_by_minute"] = read_view(workdir, "metrics_by_minute")
        summary["output_topic"] = read_topic(servers, OUTPUT_TOPIC)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=4000, help="metrics to publish")
    ap.add_argument("--out", type=Path, help="working directory (default: a temp dir)")
    args = ap.parse_args()
    from kbroker.broker import Broker

    with tempfile.TemporaryDirectory(prefix="declarative-pipeline-") as tmp:
        workdir = args.out or Path(tmp) / "pipeline"
        workdir.mkdir(parents=True, exist_ok=True)
        with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(Path(tmp) / "logs"),
                     "num.partitions": "3"}) as broker:
            print(f"kbroker listening on {broker.bootstrap_servers}")
            summary = run(broker.bootstrap_servers, workdir, args.records)
        if summary["outcome"] == "failed":
            print(summary["output"][-5000:])
            print(f"spark-pipelines run failed (exit status {summary['returncode']})")
            return 1
        if summary["outcome"] == "upstream-fault":
            print("every flow COMPLETED; spark-pipelines then exited 1 with pyspark's "
                  "UNKNOWN_RESPONSE fault (see the docstring)")
        print(f"published {len(summary['published'])} metrics; {len(summary['output_topic'])} "
              f"records in '{OUTPUT_TOPIC}'\n")
        print(f"{'window start (UTC)':20} {'metric':11} {'count':>6} {'avg':>9} {'hosts':>5}")
        for w in sorted(summary["metrics_by_minute"], key=lambda w: (w["window_start"],
                                                                     w["name"])):
            print(f"{w['window_start']:%Y-%m-%d %H:%M}     {w['name']:11} {w['count']:>6} "
                  f"{w['avg']:>9.2f} {w['hosts']:>5}")
        print(json.dumps({"records": len(summary["published"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
