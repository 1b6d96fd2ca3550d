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
import json
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from dp_pipeline.accounting.ledger.base import (
    END_KINDS,
    DatasetHead,
    DatasetState,
    LedgerRecord,
    RecordKind,
    RecordSigner,
    ReservationRecords,
    canonical_json,
    next_record,
    read_json_object,
)
from dp_pipeline.accounting.ledger.known import known, registry_path, remember
from dp_pipeline.accounting.ledger.schema import BUDGETS, HEAD_REVISION, RECORDS, VERSION_TABLE
from dp_pipeline.accounting.ledger.urls import parse_url, redact_text, redact_url
from dp_pipeline.exceptions import LedgerError, LedgerURLError

__all__ = ["MIGRATIONS_DIR", "SQLLedger", "known_revisions", "normalize_url"]

T = TypeVar("T")

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_WRITE = "dp_ledger_write"
_RETRY_SQLSTATES = {"40001", "40P01"}
_LOCK_TIMEOUT_SQLSTATE = "55P03"
_MAX_ATTEMPTS = 8
_BACKOFF_BASE = 0.001  # seconds: the first retry waits up to 1 ms, then 2, 4, … up to _BACKOFF_CAP
_BACKOFF_CAP = 0.025
_LEDGER_TABLES = {BUDGETS.name, RECORDS.name, VERSION_TABLE}


def normalize_url(url: str) -> str:
    """Use psycopg 3 for PostgreSQL URLs that name no driver (``postgresql://``, ``postgres://``)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def known_revisions() -> set[str]:
    """The schema revisions this code can read (all revisions shipped in ``migrations/versions``)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


_RECORD_TYPES: tuple[type | tuple[type, ...], ...] = (
    str,
    int,
    str,
    str,
    (str, type(None)),
    (int, type(None)),
    str,
    str,
    (str, type(None)),
)
"""The types of the columns dataset, seq, kind, created_at, idem_key, reservation, prev_hash, hash, sig."""


def _record(row: Any) -> LedgerRecord:
    """A record read from its row; LedgerError naming it when a column holds what no writer writes."""
    values = (
        row.dataset,
        row.seq,
        row.kind,
        row.created_at,
        row.idem_key,
        row.reservation,
        row.prev_hash,
        row.hash,
        row.sig,
    )
    where = f"{_dataset_of(row)}, record seq={row.seq if type(row.seq) is int else '?'}"
    if not all(isinstance(v, t) for v, t in zip(values, _RECORD_TYPES, strict=True)) or isinstance(
        row.seq, bool
    ):
        raise LedgerError(f"{where}: a column holds a value of another type; the ledger is corrupt")
    return LedgerRecord(
        dataset=row.dataset,
        seq=row.seq,
        kind=row.kind,
        time=row.created_at,
        key=row.idem_key,
        reservation=row.reservation,
        body=read_json_object(row.body, f"{where}, body"),
        prev_hash=row.prev_hash,
        hash=row.hash,
        sig=row.sig,
    )


def _dataset_of(row: Any) -> str:
    name = row.dataset
    return f"dataset {name!r}" if isinstance(name, str) and len(name) <= 255 else "a dataset of another type"


def _head(row: Any) -> DatasetHead:
    where = f"{_dataset_of(row)}, head row"
    if not (isinstance(row.method, str) and type(row.head_seq) is int and isinstance(row.head_hash, str)):
        raise LedgerError(f"{where}: its method, seq or hash is not of its type; the ledger is corrupt")
    budget = read_json_object(row.budget, f"{where}, budget")
    state = DatasetState(budget, row.method, read_json_object(row.totals, f"{where}, totals"))
    return DatasetHead(row.dataset, state, row.head_seq, row.head_hash)


# Statements of the reads outside a write transaction (SQLAlchemy caches their compiled form).
_READ_HEAD = sa.select(BUDGETS).where(BUDGETS.c.dataset == sa.bindparam("dataset"))
_BY_KEY = sa.select(RECORDS).where(
    RECORDS.c.dataset == sa.bindparam("dataset"),
    RECORDS.c.kind == "reserve",
    RECORDS.c.idem_key == sa.bindparam("key"),
)
_BY_SEQ = sa.select(RECORDS).where(
    RECORDS.c.dataset == sa.bindparam("dataset"),
    RECORDS.c.kind == "reserve",
    RECORDS.c.seq == sa.bindparam("seq"),
)
_NAMING = (
    sa.select(RECORDS)
    .where(RECORDS.c.dataset == sa.bindparam("dataset"), RECORDS.c.reservation == sa.bindparam("seq"))
    .order_by(RECORDS.c.seq)
)


def _find_reservation(
    conn: Connection, dataset: str, key: str | None, seq: int | None
) -> ReservationRecords | None:
    if key is not None:
        row = conn.execute(_BY_KEY, {"dataset": dataset, "key": key}).one_or_none()
    elif seq is not None:
        row = conn.execute(_BY_SEQ, {"dataset": dataset, "seq": seq}).one_or_none()
    else:
        return None
    if row is None:
        return None
    reserve = _record(row)
    naming = conn.execute(_NAMING, {"dataset": dataset, "seq": reserve.seq}).all()
    return ReservationRecords.of(reserve, [_record(r) for r in naming])


# ------------------------------------------------------------------------------------------------------
# the write path: statements compiled once per dialect, run on the pooled DBAPI connection

_RECORD_COLUMNS = (
    "dataset",
    "seq",
    "kind",
    "created_at",
    "idem_key",
    "reservation",
    "body",
    "prev_hash",
    "hash",
    "sig",
)
_HEAD_COLUMNS = ("dataset", "budget", "method", "totals", "head_seq", "head_hash")


class _Compiled:
    """A statement rendered for one dialect, with the order of its parameters for positional drivers."""

    def __init__(self, statement: sa.ClauseElement, dialect: sa.Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        names = getattr(compiled, "positiontup", None) if dialect.positional else None
        self.names: tuple[str, ...] | None = None if names is None else tuple(names)
        # values fixed in the statement (e.g. LIMIT 1) are bound parameters too
        self.fixed = {name: value for name, value in compiled.params.items() if value is not None}

    def params(self, values: Mapping[str, Any]) -> Any:
        if self.fixed:
            values = {**self.fixed, **values}
        return values if self.names is None else tuple(values[name] for name in self.names)


class _WriteStatements:
    """The statements of a write transaction: lock and read the head row, find a reservation (with the
    records that name it, in one query), append records, write the head row."""

    def __init__(self, dialect: sa.Dialect) -> None:
        head = [BUDGETS.c[name] for name in _HEAD_COLUMNS]
        self.lock = _Compiled(
            sa.select(*head).where(BUDGETS.c.dataset == sa.bindparam("dataset")).with_for_update(), dialect
        )
        r, e = RECORDS.alias("r"), RECORDS.alias("e")
        joined = (
            sa.select(*[r.c[n] for n in _RECORD_COLUMNS], *[e.c[n] for n in _RECORD_COLUMNS])
            .select_from(r.outerjoin(e, sa.and_(e.c.dataset == r.c.dataset, e.c.reservation == r.c.seq)))
            .order_by(e.c.seq)
        )
        mine = sa.and_(r.c.dataset == sa.bindparam("dataset"), r.c.kind == sa.bindparam("reserve_kind"))
        self.by_key = _Compiled(joined.where(mine, r.c.idem_key == sa.bindparam("key")), dialect)
        self.by_seq = _Compiled(joined.where(mine, r.c.seq == sa.bindparam("seq")), dialect)
        self.insert_record = _Compiled(
            RECORDS.insert().inline().values({n: sa.bindparam(n) for n in _RECORD_COLUMNS}), dialect
        )
        self.insert_head = _Compiled(
            BUDGETS.insert().values({n: sa.bindparam(n) for n in _HEAD_COLUMNS}), dialect
        )
        self.after = _Compiled(
            sa.select(*[RECORDS.c[n] for n in _RECORD_COLUMNS])
            .where(RECORDS.c.dataset == sa.bindparam("dataset"), RECORDS.c.seq > sa.bindparam("seq"))
            .order_by(RECORDS.c.seq),
            dialect,
        )
        self.any_record = _Compiled(
            sa.select(RECORDS.c.seq).where(RECORDS.c.dataset == sa.bindparam("dataset")).limit(1), dialect
        )
        self.update_head = _Compiled(
            BUDGETS.update()
            .where(BUDGETS.c.dataset == sa.bindparam("b_dataset"))
            .values({n: sa.bindparam(n) for n in _HEAD_COLUMNS[1:]}),
            dialect,
        )


def _record_of(values: Sequence[Any]) -> LedgerRecord:
    return _record(_Row(**dict(zip(_RECORD_COLUMNS, values, strict=True))))


class _SQLTransaction:
    """One dataset inside a write transaction on a DBAPI connection; the head row is locked on creation.

    Appends are kept in memory and written with the head row by :meth:`commit`, which also commits. A
    lookup of a reservation first writes the appends so far, so that it sees them.
    """

    def __init__(self, ledger: SQLLedger, raw: Any, cursor: Any, dataset: str) -> None:
        self._sql = ledger._statements
        self._signer = ledger.signer
        self._raw = raw
        self._dataset = dataset
        self.cursor = cursor
        if ledger.dialect == "sqlite":
            self.cursor.execute("BEGIN IMMEDIATE")
        # in psycopg's pipeline mode the BEGIN goes to the server with this SELECT, in one round trip
        self.cursor.execute(self._sql.lock.sql, self._sql.lock.params({"dataset": dataset}))
        row = self.cursor.fetchone()
        if row is None:
            self.cursor.execute(self._sql.any_record.sql, self._sql.any_record.params({"dataset": dataset}))
            if self.cursor.fetchone() is not None:
                raise LedgerError(
                    f"ledger {ledger._shown}: dataset {dataset!r} has records but its head row is "
                    "missing (it was deleted outside dp-pipeline). Nothing was written; run "
                    "'dp-pipeline ledger verify' and restore the ledger from a backup."
                )
        self._exists = row is not None
        self._head = None if row is None else _head(_Row(**dict(zip(_HEAD_COLUMNS, row, strict=True))))
        self._records: list[dict[str, Any]] = []
        self._state: dict[str, Any] | None = None

    @property
    def head(self) -> DatasetHead | None:
        return self._head

    def reservation(self, *, key: str | None = None, seq: int | None = None) -> ReservationRecords | None:
        params: dict[str, Any] = {"dataset": self._dataset, "reserve_kind": "reserve"}
        if key is not None:
            statement, params["key"] = self._sql.by_key, key
        elif seq is not None:
            statement, params["seq"] = self._sql.by_seq, seq
        else:
            return None
        self._write_records()  # a lookup sees this transaction's own appends
        self.cursor.execute(statement.sql, statement.params(params))
        rows = self.cursor.fetchall()
        if not rows:
            return None
        n = len(_RECORD_COLUMNS)
        naming = [_record_of(row[n:]) for row in rows if row[n] is not None]
        return ReservationRecords.of(_record_of(rows[0][:n]), naming)

    def records_after(self, seq: int) -> list[LedgerRecord]:
        self._write_records()  # a lookup sees this transaction's own appends
        statement = self._sql.after
        self.cursor.execute(statement.sql, statement.params({"dataset": self._dataset, "seq": seq}))
        return [_record_of(row) for row in self.cursor.fetchall()]

    def append(
        self,
        kind: RecordKind,
        body: Mapping[str, Any],
        state: DatasetState,
        *,
        key: str | None = None,
        reservation: int | None = None,
    ) -> LedgerRecord:
        head = self._head
        record, text = next_record(self._dataset, head, kind, body, key, reservation, self._signer)
        self._records.append(
            {
                "dataset": self._dataset,
                "seq": record.seq,
                "kind": kind,
                "created_at": record.time,
                "idem_key": key,
                "reservation": reservation,
                "body": text,
                "prev_hash": record.prev_hash,
                "hash": record.hash,
                "sig": record.sig,
            }
        )
        budget = state.budget
        if head is not None and budget is head.state.budget:
            budget_text = self._state["budget"] if self._state is not None else canonical_json(dict(budget))
        else:
            budget_text = canonical_json(dict(budget))
            budget = json.loads(budget_text)
        totals_text = canonical_json(dict(state.totals))
        # the head row is written once, with the records, when the transaction's function returns
        self._state = {
            "budget": budget_text,
            "method": state.method,
            "totals": totals_text,
            "head_seq": record.seq,
            "head_hash": record.hash,
        }
        new_state = DatasetState(budget, state.method, json.loads(totals_text))
        self._head = DatasetHead(self._dataset, new_state, record.seq, record.hash)
        return record

    def _write_records(self) -> None:
        if self._records:
            statement = self._sql.insert_record
            self.cursor.executemany(statement.sql, [statement.params(r) for r in self._records])
            self._records = []

    def _write_head(self) -> None:
        if self._state is None:
            return
        if self._exists:
            statement, values = self._sql.update_head, {"b_dataset": self._dataset, **self._state}
        else:
            statement, values = self._sql.insert_head, {"dataset": self._dataset, **self._state}
        self.cursor.execute(statement.sql, statement.params(values))
        self._exists = True
        self._state = None

    def commit(self) -> None:
        """Write the appended records and the head row, and commit (in pipeline mode: one round trip)."""
        self._write_records()
        self._write_head()
        self._raw.commit()


class _Row:
    """A minimal stand-in for a result row built in Python."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class SQLLedger:
    """A :class:`~dp_pipeline.accounting.ledger.base.LedgerStore` in a SQL database.

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
        :mod:`~dp_pipeline.accounting.ledger.known`); a ledger that existed and is gone, or an empty file,
        raises LedgerError.
    read_only : bool, default False
        Only read (reports, history, verify): every write raises LedgerError, the schema is not upgraded,
        and an SQLite file on a read-only file system can be read.
    key : str or bytes, optional
        The signing key: every new record carries the HMAC of its hash (see
        :class:`~dp_pipeline.accounting.ledger.base.RecordSigner`).
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
                        from alembic import command

                        command.upgrade(_alembic_config(conn), "head")
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
        :mod:`~dp_pipeline.accounting.ledger.privileges`); run as the tables' owner."""
        from dp_pipeline.accounting.ledger.privileges import grant_statements

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
                    tx = _SQLTransaction(self, raw, cursor, dataset)
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
