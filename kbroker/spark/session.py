"""A local SparkSession for examples, tests and benchmarks, with the format registered.

Loopback only (SPARK_LOCAL_IP and the driver's host and bind address are
127.0.0.1), Python workers run this interpreter, the UI is off, 2 shuffle
partitions, UTC session time zone, log level ERROR. Not for clusters: there,
build the session as usual and call kbroker.spark.register(spark).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app_name: str = "kbroker", master: str = "local[2]",
                  **conf: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kbroker.spark.source import register

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
