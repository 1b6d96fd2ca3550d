"""Fixtures of the accounting tests: a throw-away PostgreSQL server, ledger URLs and a dump of all rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
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
