"""Real Airflow 3.3 for the airflow_plugin tests.

Airflow reads AIRFLOW_HOME and its configuration once, when it is first imported, and pytest imports the
test modules while collecting them, before any fixture runs. So this conftest points Airflow at a
throw-away home *at import time*, before anything imports airflow, and a session fixture creates the
metadata database there once (``airflow db reset``; set DP_PIPELINE_TEST_AIRFLOW_HOME to reuse a home).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_GIVEN_HOME = os.environ.get("DP_PIPELINE_TEST_AIRFLOW_HOME")
if "airflow" in sys.modules and not _GIVEN_HOME:
    raise RuntimeError(
        "airflow was imported before tests/airflow_plugin/conftest.py could configure a test AIRFLOW_HOME; "
        "run the airflow tests on their own (pytest tests/airflow_plugin) or import airflow later"
    )
HOME = Path(_GIVEN_HOME or tempfile.mkdtemp(prefix="dp-airflow-home-"))
if not _GIVEN_HOME:
    atexit.register(shutil.rmtree, HOME, True)
(HOME / "dags").mkdir(parents=True, exist_ok=True)
(HOME / "plugins").mkdir(parents=True, exist_ok=True)
os.environ.update(
    {
        "AIRFLOW_HOME": str(HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AIRFLOW__CORE__DAGS_FOLDER": str(HOME / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(HOME / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME / 'airflow.db'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
)

if importlib.util.find_spec("airflow") is None:  # the airflow extra is not installed: nothing to test
    collect_ignore_glob = ["test_*.py"]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "examples" / "airflow" / "dags"


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> Path:
    """A migrated Airflow metadata database in the throw-away AIRFLOW_HOME (removed at exit)."""
    from airflow.utils import db

    db.resetdb()
    return HOME


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh SQLite ledger, reachable through ``AIRFLOW_CONN_DP_LEDGER_DEFAULT``."""
    from dp_pipeline.accounting import PrivacyAccountant
    from tests.airflow_plugin._helpers import ledger_conn_uri

    path = tmp_path / "ledger.db"
    accountant = PrivacyAccountant(f"sqlite:///{path}", create=True)
    monkeypatch.setenv("AIRFLOW_CONN_DP_LEDGER_DEFAULT", ledger_conn_uri(path))
    return accountant


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL cluster for the ledger, torn down after the session (skipped without the server
    binaries; ``make system-deps`` installs them)."""
    from tests.pg_server import TemporaryPostgres, postgres_bindir

    if postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (make system-deps)")
    with TemporaryPostgres() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def any_ledger(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """A fresh ledger on SQLite (the ``sqlite`` connection form) or on PostgreSQL (a ``postgres``
    connection with host, port, login, password and schema), reachable through
    ``AIRFLOW_CONN_DP_LEDGER_DEFAULT``."""
    from sqlalchemy.engine import make_url

    from dp_pipeline.accounting import PrivacyAccountant
    from tests.airflow_plugin._helpers import ledger_conn_uri

    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        url, conn = f"sqlite:///{path}", ledger_conn_uri(path)
    else:
        url = request.getfixturevalue("postgres_server").create_database()
        parts = make_url(url)  # the test server listens on a Unix socket: its directory is the host
        fields = {"host": parts.query["host"], "port": int(parts.query["port"]), "login": parts.username}
        conn = json.dumps({"conn_type": "postgres", "schema": parts.database, **fields})
    accountant = PrivacyAccountant(url, create=True)
    monkeypatch.setenv("AIRFLOW_CONN_DP_LEDGER_DEFAULT", conn)
    yield accountant
    accountant.close()
