"""Engine set-up of :class:`~dp_pipeline.accounting.ledger.SQLLedger`: URL, connection hooks, errors.

Private to :mod:`dp_pipeline.accounting.ledger`. SQLite connections leave BEGIN to SQLAlchemy (``BEGIN
IMMEDIATE`` for a write, marked by the execution option ``_WRITE``) and set ``synchronous``; PostgreSQL
connections set ``lock_timeout`` so that a writer waits at most the accountant's timeout for a dataset's row.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy.engine import Connection, Engine

from dp_pipeline.accounting.ledger._urls import redact_text
from dp_pipeline.exceptions import LedgerError

_WRITE = "dp_ledger_write"


def normalize_url(url: str) -> str:
    """Use psycopg 3 for PostgreSQL URLs that name no driver (``postgresql://``, ``postgres://``)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _reason(err: BaseException) -> str:
    orig = getattr(err, "orig", None)
    return redact_text(str(orig if orig is not None else err).strip().splitlines()[0])


def _sqlite_connect(synchronous: str, dbapi_connection: Any, connection_record: Any) -> None:
    # Let SQLAlchemy emit BEGIN (see _sqlite_begin) instead of the sqlite3 driver's legacy handling.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    problem = None
    try:
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
    except UnicodeDecodeError as err:  # SQLAlchemy wraps the driver's errors, but not this one
        problem = str(err)
    finally:
        cursor.close()
    if problem is not None:
        raise LedgerError(f"the SQLite file is corrupt: its schema is not UTF-8 text ({problem})")


def _sqlite_busy(err: BaseException) -> bool:
    """Whether an error is SQLite's "database is locked" / "database is busy" (SQLITE_BUSY)."""
    orig = getattr(err, "orig", err)
    return isinstance(orig, sqlite3.OperationalError) and (
        "database is locked" in str(orig) or "database is busy" in str(orig)
    )


def _postgres_connect(timeout: float, dbapi_connection: Any, connection_record: Any) -> None:
    # a writer waits at most `timeout` for a dataset's row lock, then gets SQLSTATE 55P03
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"SET lock_timeout = {max(1, round(timeout * 1000))}")
    finally:
        cursor.close()
    dbapi_connection.commit()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def _pipeline_mode(raw: Any) -> Any:
    """psycopg's pipeline-mode context of a pooled connection."""
    return raw.driver_connection.pipeline()


def _psycopg_pipeline(engine: Engine) -> bool:
    """Whether the PostgreSQL driver is psycopg 3 with pipeline mode (libpq ≥ 14)."""
    if engine.dialect.driver != "psycopg":
        return False
    import psycopg

    return bool(psycopg.Pipeline.is_supported())
