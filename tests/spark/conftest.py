"""One local Spark session for the whole test run (local[2], the settings of the shared Spark notes), and a
Spark Connect session on the same JVM.

The classic session starts the Spark Connect server plugin, bound to the loopback interface on a port the
system picks; the ``connect_spark`` fixture is a Spark Connect client of it (``sc://127.0.0.1:<port>``), so
one JVM serves both kinds of session and no network beyond loopback is used. The client needs the
``pyspark[connect]`` packages (grpcio-status, zstandard, googleapis-common-protos): without them the
Connect tests skip. ``any_spark`` runs a test once on each kind of session.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("pyspark") is None:  # the spark extra is not installed: nothing to test
    collect_ignore_glob = ["test_*.py"]

# The Python workers run this interpreter (it has pyarrow and dp_pipeline), not the first python3 on PATH,
# and import dp_pipeline from this checkout (not from wherever the package was installed).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
_ROOT = str(Path(__file__).resolve().parents[2])
os.environ["PYTHONPATH"] = os.pathsep.join([_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])

_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
_CONNECT_CLIENT = ("grpc", "grpc_status", "google.rpc", "zstandard", "pyarrow")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession shared by every Spark test (it takes 10–15 s to start), serving Spark Connect
    on a loopback port."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    running = SparkContext._active_spark_context
    if running is not None and _PLUGIN not in (running.getConf().get("spark.plugins") or ""):
        running.stop()  # a session an earlier test started (an example DAG) serves no Spark Connect
    session = (
        SparkSession.builder.master("local[2]")
        .appName("dp-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.plugins", _PLUGIN)
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", "0")  # a free port, read back below
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _connect_port(session: Any) -> int:
    service = getattr(session._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    return int(getattr(service, "MODULE$").localPort())


@pytest.fixture(scope="session")
def connect_spark(spark: Any) -> Iterator[Any]:
    """A Spark Connect session, a client of the server the classic session runs (skipped without the
    Connect client packages)."""
    missing = [name for name in _CONNECT_CLIENT if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"Spark Connect needs pyspark[connect]: {', '.join(missing)} not installed")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(f"sc://127.0.0.1:{_connect_port(spark)}").create()
    yield session
    session.stop()  # the client only: the server stops with the classic session


@pytest.fixture(params=["classic", "connect"])
def any_spark(request: pytest.FixtureRequest) -> Any:
    """The classic session, then the Spark Connect one."""
    return request.getfixturevalue("spark" if request.param == "classic" else "connect_spark")
