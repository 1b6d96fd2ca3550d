"""Fixtures of the accounting tests: a throw-away PostgreSQL server, ledger URLs and a dump of all rows."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.pg_server import TemporaryPostgres, postgres_bindir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL cluster in a temporary directory on a free port, torn down after the session.

    Skipped only when the server binaries are absent (``make system-deps`` installs them).
    """
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (make system-deps)")
    with TemporaryPostgres() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: TemporaryPostgres) -> str:
    """A fresh database on the test server, as a postgresql+psycopg URL."""
    return postgres_server.create_database()


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    """Worker processes (spawned, warmed up) for the racing tests of a module."""
    from tests.accounting import _workers

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=_workers.WORKERS, mp_context=context) as executor:
        pids = set(executor.map(_workers.warm_up, range(_workers.WORKERS)))
        assert len(pids) == _workers.WORKERS
        yield executor


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new ledger's URL: an SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A new SQLite ledger file."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def dump_rows(url: str) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Every row of every ledger table, in a fixed order: for before/after comparisons."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            tables = sorted(t for t in sa.inspect(conn).get_table_names() if t.startswith("dp_ledger"))
            dump = []
            for table in tables:
                rows = [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table}"))]
                dump.append((table, sorted(rows, key=repr)))
            return dump
    finally:
        engine.dispose()


def untriggered(path: Path) -> sqlite3.Connection:
    """A connection to an SQLite ledger after dropping every trigger: what a determined tamperer (or the
    file's owner) does first."""
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    return conn
