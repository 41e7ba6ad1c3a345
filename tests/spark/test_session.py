"""kbroker.spark.session.local_session: what Spark writes to /tmp otherwise goes to the
session's temp_dir (the tests' own: spark_temp_dir)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_spark_files_go_to_the_temp_dir(spark: Any, spark_temp_dir: Path, tmp_path: Path) -> None:
    assert spark._jvm.System.getProperty("java.io.tmpdir") == str(spark_temp_dir)
    assert spark.conf.get("spark.local.dir") == str(spark_temp_dir)
    # a shuffle (block manager files) and a parquet write (snappy's native library)
    counts = spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count()
    counts.write.parquet(str(tmp_path / "counts"))
    assert spark.read.parquet(str(tmp_path / "counts")).count() == 7
    made = {p.name.split("-")[0] for p in spark_temp_dir.iterdir()}
    assert {"blockmgr", "spark", "snappy"} <= made, made
