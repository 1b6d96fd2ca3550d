"""One local Spark session for the whole test run (local[2], the settings of the shared Spark notes)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

if importlib.util.find_spec("pyspark") is None:  # the spark extra is not installed: nothing to test
    collect_ignore_glob = ["test_*.py"]

# The Python workers run this interpreter (it has pyarrow and dp_pipeline), not the first python3 on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession shared by every Spark test (it takes 10–15 s to start)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dp-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
