"""Ledger stores behind one protocol: in memory (explicit), or SQL (an SQLite file, or PostgreSQL)."""

from dp_pipeline.accounting.ledger.base import (
    DatasetHead,
    DatasetState,
    LedgerRecord,
    LedgerStore,
    LedgerTransaction,
    ReservationRecords,
)
from dp_pipeline.accounting.ledger.memory import MemoryLedger

__all__ = [
    "DatasetHead",
    "DatasetState",
    "LedgerRecord",
    "LedgerStore",
    "LedgerTransaction",
    "MemoryLedger",
    "ReservationRecords",
    "SQLLedger",
    "open_store",
]


def __getattr__(name: str) -> object:
    # SQLAlchemy is part of the "accounting" extra: import the SQL store only when it is asked for.
    if name == "SQLLedger":
        from dp_pipeline.accounting.ledger.sql import SQLLedger

        return SQLLedger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    url: str,
    *,
    create: bool | None = False,
    read_only: bool = False,
    key: str | bytes | None = None,
    timeout: float = 30.0,
) -> LedgerStore:
    """The store a URL names: ``"memory://"`` → :class:`MemoryLedger`; any SQLAlchemy URL → ``SQLLedger``.

    See :class:`~dp_pipeline.accounting.ledger.sql.SQLLedger` for the options; a memory ledger is always
    new, and takes only the key.
    """
    if url == "memory://":
        return MemoryLedger(key=key)
    try:
        from dp_pipeline.accounting.ledger.sql import SQLLedger
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError('a SQL ledger needs SQLAlchemy: pip install "dp-pipeline[accounting]"') from exc
    return SQLLedger(url, create=create, read_only=read_only, key=key, timeout=timeout)
