"""A local SparkSession for examples, tests and benchmarks, with the format registered.

Loopback only (SPARK_LOCAL_IP and the driver's host and bind address are
127.0.0.1), Python workers run this interpreter, the UI and the console progress
bars are off, 2 shuffle partitions, UTC session time zone. Spark logs errors only,
from its first line (log4j2.properties beside this file). `temp_dir` holds
what Spark and its libraries write to /tmp otherwise: its local dirs (spark-*,
blockmgr-*) and the JVM's java.io.tmpdir (artifacts-*, copies of native libraries
such as liblz4-java and snappy). Not for clusters: there, build the session as
usual and call kbroker.spark.register(spark).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")


def local_session(app_name: str = "kbroker", master: str = "local[2]",
                  temp_dir: str | os.PathLike[str] | None = None, **conf: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kbroker.spark.source import register

    java_options = [f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}"]
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    if temp_dir is not None:
        os.makedirs(temp_dir, exist_ok=True)  # java.io.tmpdir must exist
        builder = builder.config("spark.local.dir", str(temp_dir))
        java_options.append(f"-Djava.io.tmpdir={temp_dir}")
    builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
