"""The write transaction of :class:`~dp_pipeline.accounting.ledger.SQLLedger`; rows read back as records.

Private to :mod:`dp_pipeline.accounting.ledger`. Statements are compiled once per dialect
(:class:`_WriteStatements`) and run on a pooled DBAPI connection: lock and read the dataset's head row, look
up an idempotency key (one query joining the reservation to the records naming it), then the new records in
one ``executemany`` and the head row in one UPDATE, written only when the accountant's function returns (see
the "Write path" of :mod:`~dp_pipeline.accounting.ledger._sql`). A row whose column holds what no writer
writes is refused with :class:`~dp_pipeline.exceptions.LedgerError` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dp_pipeline.accounting.ledger._base import (
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
from dp_pipeline.accounting.ledger._schema import BUDGETS, RECORDS
from dp_pipeline.exceptions import LedgerError

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
        self.sqlite = dialect.name == "sqlite"  # the write lock is taken with BEGIN IMMEDIATE
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

    def __init__(
        self,
        statements: _WriteStatements,
        signer: RecordSigner | None,
        shown: str,
        raw: Any,
        cursor: Any,
        dataset: str,
    ) -> None:
        self._sql = statements
        self._signer = signer
        self._raw = raw
        self._dataset = dataset
        self.cursor = cursor
        if statements.sqlite:
            self.cursor.execute("BEGIN IMMEDIATE")
        # in psycopg's pipeline mode the BEGIN goes to the server with this SELECT, in one round trip
        self.cursor.execute(self._sql.lock.sql, self._sql.lock.params({"dataset": dataset}))
        row = self.cursor.fetchone()
        if row is None:
            self.cursor.execute(self._sql.any_record.sql, self._sql.any_record.params({"dataset": dataset}))
            if self.cursor.fetchone() is not None:
                raise LedgerError(
                    f"ledger {shown}: dataset {dataset!r} has records but its head row is "
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
