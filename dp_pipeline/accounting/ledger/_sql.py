"""A ledger store in a SQL database through SQLAlchemy 2 Core: an SQLite file, or PostgreSQL (psycopg 3).

Atomicity
---------
Every change runs in one transaction that first takes an exclusive lock:

* **SQLite**: ``BEGIN IMMEDIATE`` takes the database's write lock before anything is read, so check and
  reserve cannot interleave with another writer (process or thread). The file runs in WAL mode, so readers
  never block and are never blocked. The sqlite3 driver's own transaction handling is switched off
  (``isolation_level = None``): the write path issues ``BEGIN IMMEDIATE`` itself, and SQLAlchemy's
  ``begin`` event emits the BEGIN of other transactions, as the SQLAlchemy documentation prescribes for
  Python < 3.12 (section "Enabling Non-Legacy SQLite Transactional Modes").
  ``synchronous = FULL`` (the default) makes every commit durable before the spend returns, at the cost
  of one fsync per transaction. ``sqlite:///ledger.db?synchronous=normal`` trades that for speed: a commit
  then survives a crash of the process but may be lost in a power failure or an OS crash (SQLite WAL
  semantics), which would un-count a release whose result was already returned.
* **PostgreSQL**: ``SELECT … FOR UPDATE`` on the dataset's row of ``dp_ledger_budgets`` (READ COMMITTED)
  serialises writers of one dataset while other datasets proceed. Creating a dataset's first row races
  only on its primary key; the loser retries and then finds the row. Serialization failures and deadlocks
  (SQLSTATE 40001, 40P01) are retried. A lost connection is not retried (its COMMIT may have arrived):
  the error is raised and the pool reconnects for the next transaction.

Write path
----------
A write transaction runs on a pooled DBAPI connection (SQLAlchemy's pool) with statements that
SQLAlchemy compiled once for the dialect: lock and read the head row; look up an idempotency key (one
query joining the reservation to the records that name it: its end, its payments); then the new records
in one ``executemany`` and the head row in one UPDATE, written only when the accountant's function
returns. With psycopg 3, pipeline mode sends BEGIN with the locking SELECT, and the writes with the
COMMIT, so a spend holds the row lock for two round trips to the server.

Schema
------
The schema is created and upgraded by the Alembic revisions shipped in ``migrations/`` (run from code; no
alembic.ini). Opening a database first reads the version table without writing: a revision this code
does not know (a ledger written by a newer dp-pipeline) raises :class:`~dp_pipeline.exceptions.LedgerError`
and writes nothing; so does a file that is not an SQLite database, or an SQLite database that holds other
tables but no ledger. In PostgreSQL the ledger's tables may share a database with other applications.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from dp_pipeline.accounting.ledger._base import (
    END_KINDS,
    DatasetHead,
    LedgerRecord,
    RecordSigner,
    ReservationRecords,
)
from dp_pipeline.accounting.ledger._known import known, registry_path, remember
from dp_pipeline.accounting.ledger._schema import BUDGETS, HEAD_REVISION, RECORDS, VERSION_TABLE
from dp_pipeline.accounting.ledger._sql_engine import (
    _WRITE,
    _pipeline_mode,
    _postgres_connect,
    _psycopg_pipeline,
    _reason,
    _sqlite_begin,
    _sqlite_busy,
    _sqlite_connect,
    normalize_url,
)
from dp_pipeline.accounting.ledger._sql_schema import MIGRATIONS_DIR, known_revisions, upgrade_schema
from dp_pipeline.accounting.ledger._sql_transaction import (
    _READ_HEAD,
    _find_reservation,
    _head,
    _record,
    _SQLTransaction,
    _WriteStatements,
)
from dp_pipeline.accounting.ledger._urls import parse_url, redact_text, redact_url
from dp_pipeline.exceptions import LedgerError, LedgerURLError

__all__ = ["MIGRATIONS_DIR", "SQLLedger", "known_revisions", "normalize_url"]

T = TypeVar("T")

_RETRY_SQLSTATES = {"40001", "40P01"}
_LOCK_TIMEOUT_SQLSTATE = "55P03"
_MAX_ATTEMPTS = 8
_BACKOFF_BASE = 0.001  # seconds: the first retry waits up to 1 ms, then 2, 4, … up to _BACKOFF_CAP
_BACKOFF_CAP = 0.025


class SQLLedger:
    """A :class:`~dp_pipeline.accounting.ledger.LedgerStore` in a SQL database.

    Parameters
    ----------
    url : str
        A SQLAlchemy URL: ``"sqlite:///ledger.db"`` (a file, the embedded default) or
        ``"postgresql+psycopg://user:password@host/dbname"`` (``postgresql://`` uses psycopg 3 too).
        ``?mode=ro`` on an SQLite URL opens it read-only, as ``read_only=True`` does.
    create : bool or None, default False
        True: create the ledger: the SQLite file if it does not exist, and the schema in an empty database.
        False: a missing or empty (0-byte) file, or a database without a ledger, raises LedgerError and
        nothing is created. None: create a ledger only where none was ever created (see
        :mod:`~dp_pipeline.accounting.ledger._known`); a ledger that existed and is gone, or an empty file,
        raises LedgerError.
    read_only : bool, default False
        Only read (reports, history, verify): every write raises LedgerError, the schema is not upgraded,
        and an SQLite file on a read-only file system can be read.
    key : str or bytes, optional
        The signing key: every new record carries the HMAC of its hash (see
        :class:`~dp_pipeline.accounting.ledger.RecordSigner`).
    timeout : float, default 30
        Seconds a write waits for the ledger's write lock (SQLite: the file's lock, retried with jittered
        backoff; PostgreSQL: ``lock_timeout`` on the dataset's row) before it raises LedgerError.
    engine_options : mapping, optional
        Extra keyword arguments for :func:`sqlalchemy.create_engine` (pool sizes, ``connect_args``).

    Raises
    ------
    LedgerError
        The database cannot be opened, is not a ledger, or was written by a newer schema (nothing is
        written then).

    Notes
    -----
    See the module docstring for the locking protocol. Connections are never shared between processes:
    a store used in a forked child opens its own, and leaves the parent's alone. ``sqlite://`` (an
    in-memory database) serialises all access on one connection, lives in one process and cannot be
    pickled; other instances pickle as their URL and options, so a process that unpickles one opens the
    same database (never creating it).
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool | None = False,
        read_only: bool = False,
        key: str | bytes | None = None,
        timeout: float = 30.0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise LedgerError(f"a ledger URL must be a non-empty string, got {type(url).__name__}")
        if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
            raise LedgerError(f"the ledger timeout must be a positive number of seconds, got {timeout!r}")
        self.url = normalize_url(url)
        self.signer = RecordSigner.from_key(key)
        self._key = key
        self._create = create
        self._creating = False  # set when opening finds no ledger and creates one
        self._timeout = float(timeout)
        self._engine_options = dict(engine_options or {})
        self._sa_url = parse_url(self.url)
        self._shown = redact_url(self._sa_url.render_as_string(hide_password=True))
        self._identity = self._shown  # where the ledger is, without its password (a file: its path)
        self._synchronous = "FULL"
        self._memory = False
        self._path: Path | None = None
        if self._sa_url.get_backend_name() == "sqlite":
            try:
                read_only = self._sqlite_options(read_only)
            except OSError as err:  # a path the file system refuses (too long, a file as a directory, …)
                problem = f"cannot use the ledger file {self._shown}: {err.strerror}"
                raise LedgerURLError(problem, "url") from None
        self.read_only = read_only
        self._pid = os.getpid()
        self._closed = False
        # one in-memory SQLite connection is shared by all threads: serialise every use of it
        self._serial: Any = threading.RLock() if self._memory else contextlib.nullcontext()
        self._engine = self._make_engine()
        self._statements = _WriteStatements(self._engine.dialect)
        self._pipeline = self.dialect == "postgresql" and _psycopg_pipeline(self._engine)
        try:
            self._retry_busy(self._open)
        except BaseException:
            self._engine.dispose()
            raise

    def _sqlite_options(self, read_only: bool) -> bool:
        """Read ``synchronous`` and ``mode`` from an SQLite URL, check the file, and open it by URI in the
        mode asked for (``rw`` never creates a file); return whether the ledger is read-only."""
        query = dict(self._sa_url.query)
        if "synchronous" in query:
            chosen = str(query.pop("synchronous")).upper()
            if chosen not in ("FULL", "NORMAL", "EXTRA"):
                raise LedgerError(f"synchronous must be full, normal or extra, got {chosen.lower()!r}")
            self._synchronous = chosen
        mode = query.pop("mode", None)
        if mode not in (None, "ro", "rw", "rwc"):
            raise LedgerError(f"mode must be ro (read-only), rw or rwc, got {mode!r}")
        read_only = read_only or mode == "ro"
        query.pop("uri", None)
        database = self._sa_url.database
        if not database or database == ":memory:":
            self._memory = True
            self._sa_url = self._sa_url.set(query=query)
            return read_only
        path = Path(database)
        how = "create one on purpose with PrivacyAccountant(url, create=True) or 'dp-pipeline ledger init'"
        self._identity = str(path.resolve())
        if not path.exists():
            if read_only or self._create is False:
                raise LedgerError(f"no ledger at {path}: the file does not exist. If it is new, {how}.")
            self._refuse_if_known(f"no ledger at {path}: the file does not exist")
            if not path.parent.is_dir():
                raise LedgerError(f"cannot create ledger {path}: the directory {path.parent} does not exist")
        elif path.is_file() and path.stat().st_size == 0 and self._create is not True:
            raise LedgerError(
                f"{path} is an empty (0-byte) file, not a ledger: it may have been truncated or replaced. "
                f"Nothing was written. Restore it from a backup; if it is new, {how}."
            )
        creating = self._create is not False and not read_only
        query.update({"mode": "ro" if read_only else ("rwc" if creating else "rw"), "uri": "true"})
        self._path = path
        wal = path.with_name(path.name + "-wal")
        if read_only and not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size):
            # a read-only file system: SQLite cannot create the WAL index (-shm) there, and nobody can write
            # the file through it, so it is read as immutable. Not with a WAL file left by a writer: its
            # commits are not in the main file yet, and SQLite reads them (read-only) with its -shm file.
            query["immutable"] = "1"
        self._sa_url = self._sa_url.set(database="file:" + urllib.parse.quote(str(path)), query=query)
        return read_only

    # ---------------------------------------------------------------------------------------- engine

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"`` (or another SQLAlchemy dialect name)."""
        return self._engine.dialect.name

    def _make_engine(self) -> Engine:
        options = dict(self._engine_options)
        backend = self._sa_url.get_backend_name()
        if backend == "sqlite":
            connect_args = dict(options.pop("connect_args", {}))
            # a short busy wait in SQLite itself; longer waits are jittered retries (see _retry_busy)
            connect_args.setdefault("timeout", 0.01)
            if self._memory:
                options.setdefault("poolclass", sa.pool.StaticPool)
                connect_args.setdefault("check_same_thread", False)
            options["connect_args"] = connect_args
        try:
            engine = sa.create_engine(self._sa_url, **options)
        except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as err:
            raise LedgerError(f"cannot use ledger URL {self._shown}: {redact_text(str(err))}") from None
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", functools.partial(_sqlite_connect, self._synchronous))
            event.listen(engine, "begin", _sqlite_begin)
        elif engine.dialect.name == "postgresql":
            event.listen(engine, "connect", functools.partial(_postgres_connect, self._timeout))
        return engine

    def _live_engine(self) -> Engine:
        """The engine of this process: a forked child gets a fresh pool and never touches the parent's."""
        if self._closed:
            raise LedgerError(f"ledger {self._shown} was closed; open a new PrivacyAccountant to use it")
        if os.getpid() != self._pid:
            if self._memory:
                raise LedgerError(
                    "an in-memory SQLite ledger (sqlite://) lives in the process that created it; a child "
                    "process would spend from a copy. Use a ledger file or PostgreSQL."
                )
            # SQLAlchemy's recipe for fork: replace the pool without closing the parent's connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        return self._engine

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Connection]:
        with self._serial, self._live_engine().connect() as conn:
            if write:
                conn = conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    def _retry_busy(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying while SQLite reports the database locked, until the timeout.

        Every retry waits a uniformly random time up to min(25 ms, 1 ms · 2^attempt) ("full jitter"): a
        writer that has waited long is not pushed back further than a newcomer, unlike SQLite's own busy
        handler, whose growing sleeps let fresh writers starve old ones.
        """
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            try:
                return fn()
            except (exc.OperationalError, sqlite3.OperationalError) as err:
                if not _sqlite_busy(err):
                    raise
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"ledger {self._shown}: timed out after {self._timeout:g} s waiting for the write "
                        "lock (other writers held it). Nothing was written; retry, or give the "
                        "accountant a longer timeout."
                    ) from None
                attempt += 1
                time.sleep(random.uniform(0.0, min(_BACKOFF_CAP, _BACKOFF_BASE * 2.0 ** min(attempt, 10))))

    # ---------------------------------------------------------------------------------------- schema

    def _inspect(self, conn: Connection) -> tuple[str | None, set[str]]:
        tables = set(sa.inspect(conn).get_table_names())
        revision = None
        if VERSION_TABLE in tables:
            rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
            if len(rows) > 1:
                raise LedgerError(
                    f"ledger {self._shown} has several schema revisions {rows}; it was migrated by hand"
                )
            revision = rows[0] if rows else None
        return revision, tables

    def _check(self, revision: str | None, tables: set[str]) -> bool:
        """True when the schema is current; raise LedgerError when it cannot be used; False to migrate."""
        if revision == HEAD_REVISION:
            return True
        if revision is not None:
            if revision not in known_revisions():
                raise LedgerError(
                    f"ledger {self._shown} was written by a newer dp-pipeline (schema revision {revision!r}, "
                    f"this version knows up to {HEAD_REVISION!r}). Nothing was written. Upgrade dp-pipeline "
                    "to use this ledger."
                )
            if self.read_only:
                raise LedgerError(
                    f"ledger {self._shown} has the older schema revision {revision!r}; open it once for "
                    "writing (or run 'dp-pipeline ledger init') to upgrade it to "
                    f"{HEAD_REVISION!r}, then read it."
                )
            return False
        if tables & {BUDGETS.name, RECORDS.name}:
            raise LedgerError(
                f"ledger {self._shown} has ledger tables but no schema version table {VERSION_TABLE!r}; it "
                "is damaged or was created by hand. Nothing was written."
            )
        if self.dialect == "sqlite" and tables:
            raise LedgerError(
                f"{self._shown} is an SQLite database of something else (tables {sorted(tables)[:5]}), not a "
                "dp-pipeline ledger. Nothing was written. Point the accountant at a new file."
            )
        if self._create is False or self.read_only:
            raise LedgerError(
                f"{self._shown} holds no dp-pipeline ledger. Nothing was written; to create one on purpose "
                "use PrivacyAccountant(url, create=True) or 'dp-pipeline ledger init'."
            )
        self._refuse_if_known(f"{self._shown} holds no dp-pipeline ledger")
        self._creating = True
        return False

    def _refuse_if_known(self, problem: str) -> None:
        """With ``create=None``: a LedgerError when a ledger was created here before and is gone."""
        if self._create is None and known(self._identity):
            raise LedgerError(
                f"{problem}, but a ledger was created there before (listed in {registry_path()}): it was "
                "deleted, moved or replaced. Nothing was written. Restore it from a backup; to start a new "
                "ledger there on purpose, use PrivacyAccountant(url, create=True) or "
                "'dp-pipeline ledger init'."
            )

    def _open(self) -> None:
        try:
            with self._transaction(write=False) as conn:
                current = self._check(*self._inspect(conn))
            if not current:
                with self._transaction(write=True) as conn:
                    if self.dialect == "postgresql":
                        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('dp_ledger_schema'))"))
                    if not self._check(*self._inspect(conn)):
                        upgrade_schema(conn)
                if self._creating and not self._memory:
                    remember(self._identity)
            if self.dialect == "sqlite" and not self._memory and not self.read_only:
                raw = self._engine.raw_connection()
                try:
                    raw.cursor().execute("PRAGMA journal_mode=WAL")
                finally:
                    raw.close()
        except LedgerError:
            raise
        except (exc.SQLAlchemyError, sqlite3.Error) as err:  # sqlite3: the WAL pragma on a raw connection
            if _sqlite_busy(err):
                raise
            raise LedgerError(f"cannot open ledger {self._shown}: {_reason(err)}{self._hint(err)}") from None

    def _hint(self, err: BaseException) -> str:
        """Advice for an error of opening: only what the error can actually mean for this backend."""
        if self.dialect != "sqlite":
            return ""
        text = _reason(err).lower()
        read_only_place = self._path is not None and not os.access(self._path.parent, os.W_OK)
        if "readonly" in text or "read-only" in text or read_only_place:
            return (
                ". The file or its directory is read-only: open it with read_only=True (or ?mode=ro, "
                "'dp-pipeline ledger verify' does) to read or verify it"
            )
        if "not a database" in text or "malformed" in text:
            return ". The file is corrupt or not an SQLite database"
        return ""

    def grant_writer(self, role: str) -> None:
        """PostgreSQL: give ``role`` the least privileges of a writer (see
        :mod:`~dp_pipeline.accounting.ledger._privileges`); run as the tables' owner."""
        from dp_pipeline.accounting.ledger._privileges import grant_statements

        statements = grant_statements(role)
        if self.dialect != "postgresql":
            raise LedgerError("least-privilege grants are for a PostgreSQL ledger")
        if self.read_only:
            raise LedgerError(f"ledger {self._shown} is open read-only: it grants nothing (nothing changed)")
        with self._reading() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))

    def schema_revision(self) -> str | None:
        """The schema revision recorded in the database."""
        with self._reading() as conn:
            return self._inspect(conn)[0]

    # ---------------------------------------------------------------------------------------- store

    def atomic(self, dataset: str, fn: Callable[[Any], T]) -> T:
        if self.read_only:
            raise LedgerError(f"ledger {self._shown} was opened read-only; nothing was written")
        engine = self._live_engine()
        dbapi = engine.dialect.loaded_dbapi
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            try:
                return self._retry_busy(lambda: self._attempt(dataset, fn))
            except dbapi.IntegrityError as err:
                # Two writers created the same dataset's head row at once: the loser retries and finds it.
                if attempt == _MAX_ATTEMPTS:
                    raise LedgerError(f"ledger {self._shown}: write conflict ({_reason(err)})") from None
            except dbapi.Error as err:
                code = getattr(err, "sqlstate", None)
                if code in _RETRY_SQLSTATES and attempt < _MAX_ATTEMPTS:
                    time.sleep(random.uniform(0.0, _BACKOFF_BASE * 2.0**attempt))
                    continue
                if code == _LOCK_TIMEOUT_SQLSTATE:
                    raise LedgerError(
                        f"ledger {self._shown}: timed out after {self._timeout:g} s waiting for the lock of "
                        f"dataset {dataset!r} (other writers held it). Nothing was written; retry, or give "
                        "the accountant a longer timeout."
                    ) from None
                raise LedgerError(f"ledger {self._shown}: {_reason(err)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, dataset: str, fn: Callable[[Any], T]) -> T:
        """One write transaction on a pooled DBAPI connection; rolled back unless ``fn`` returns."""
        engine = self._live_engine()
        with self._serial:
            raw = engine.raw_connection()
            cursor = raw.cursor()
            try:
                # psycopg's pipeline mode: statements are sent without waiting for each result, so the lock
                # (BEGIN and SELECT … FOR UPDATE) and the writes with COMMIT take one round trip each
                with _pipeline_mode(raw) if self._pipeline else contextlib.nullcontext():
                    tx = _SQLTransaction(self._statements, self.signer, self._shown, raw, cursor, dataset)
                    result = fn(tx)
                    tx.commit()
                return result
            except BaseException as err:
                dbapi = engine.dialect.loaded_dbapi
                lost = isinstance(err, dbapi.Error) and engine.dialect.is_disconnect(
                    err, raw.dbapi_connection, cursor
                )
                if lost:
                    # The server went away (e.g. a restart): drop this connection and the pooled ones, which
                    # are as dead; the next transaction connects afresh. Not retried here: the COMMIT may
                    # have reached the server, and a retry with a random key could charge twice.
                    raw.invalidate(err)
                    engine.dispose()
                else:
                    try:
                        raw.rollback()
                    except dbapi.Error as rollback_error:
                        raw.invalidate(rollback_error)
                raise
            finally:
                with contextlib.suppress(Exception):
                    cursor.close()
                raw.close()  # back to the pool

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        try:
            with self._transaction(write=False) as conn:
                yield conn
        except exc.DBAPIError as err:
            raise LedgerError(f"ledger {self._shown}: {_reason(err)}") from None

    def head(self, dataset: str) -> DatasetHead | None:
        with self._reading() as conn:
            row = conn.execute(_READ_HEAD, {"dataset": dataset}).one_or_none()
            return None if row is None else _head(row)

    def records(self, dataset: str) -> list[LedgerRecord]:
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(RECORDS).where(RECORDS.c.dataset == dataset).order_by(RECORDS.c.seq, RECORDS.c.id)
            ).all()
            return [_record(row) for row in rows]

    def reservation(
        self, dataset: str, *, key: str | None = None, seq: int | None = None
    ) -> ReservationRecords | None:
        with self._reading() as conn:
            return _find_reservation(conn, dataset, key, seq)

    def open_reservations(self, dataset: str) -> list[LedgerRecord]:
        ends = sa.select(RECORDS.c.reservation).where(
            RECORDS.c.dataset == dataset, RECORDS.c.reservation.is_not(None), RECORDS.c.kind.in_(END_KINDS)
        )
        with self._reading() as conn:
            rows = conn.execute(
                sa.select(RECORDS)
                .where(RECORDS.c.dataset == dataset, RECORDS.c.kind == "reserve", RECORDS.c.seq.not_in(ends))
                .order_by(RECORDS.c.seq)
            ).all()
            return [_record(row) for row in rows]

    def datasets(self) -> list[str]:
        with self._reading() as conn:
            names = set(conn.execute(sa.select(BUDGETS.c.dataset)).scalars())
            # a dataset whose head row was deleted still has records; verify() must see it
            names.update(conn.execute(sa.select(RECORDS.c.dataset).distinct()).scalars())
        if not all(isinstance(name, str) for name in names):
            raise LedgerError(f"ledger {self._shown}: a row has no dataset name; the ledger is corrupt")
        return sorted(names)

    def close(self) -> None:
        """Close the connections; every later use raises LedgerError."""
        if not self._closed:
            self._closed = True
            # a forked child must not close the parent's connections
            self._engine.dispose(close=os.getpid() == self._pid)

    def __reduce__(self) -> tuple[Any, ...]:
        if self._memory:
            raise LedgerError(
                "an in-memory SQLite ledger (sqlite://) cannot be pickled into another process: its spends "
                "would land in an empty copy. Use a ledger file, e.g. 'sqlite:///ledger.db'."
            )
        return (
            _reopen,
            (self.url, self.read_only, self._key, self._timeout, self._engine_options),
        )

    def __repr__(self) -> str:
        return f"SQLLedger({self._shown!r})"


def _reopen(
    url: str, read_only: bool, key: str | bytes | None, timeout: float, engine_options: Mapping[str, Any]
) -> SQLLedger:
    # an unpickled store opens the existing ledger; it never creates one
    return SQLLedger(url, read_only=read_only, key=key, timeout=timeout, engine_options=engine_options)
