"""Ledger stores behind one protocol: in memory (explicit), or SQL (an SQLite file, or PostgreSQL)."""

import os

from dp_pipeline.accounting.ledger._base import (
    KEY_ENV,
    DatasetHead,
    DatasetState,
    LedgerRecord,
    LedgerStore,
    LedgerTransaction,
    RecordSigner,
    ReservationRecords,
)
from dp_pipeline.accounting.ledger._memory import MemoryLedger
from dp_pipeline.accounting.ledger._urls import redact_text, redact_url
from dp_pipeline.exceptions import InvalidParameterError

__all__ = [
    "KEY_ENV",
    "DatasetHead",
    "DatasetState",
    "LedgerRecord",
    "LedgerStore",
    "LedgerTransaction",
    "MemoryLedger",
    "RecordSigner",
    "ReservationRecords",
    "SQLLedger",
    "open_ledger",
    "open_store",
    "redact_text",
    "redact_url",
]


def __getattr__(name: str) -> object:
    # SQLAlchemy is part of the "accounting" extra: import the SQL store only when it is asked for.
    if name == "SQLLedger":
        from dp_pipeline.accounting.ledger._sql import SQLLedger

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

    See :class:`~dp_pipeline.accounting.ledger.SQLLedger` for the options; a memory ledger is always
    new, and takes only the key.
    """
    if url == "memory://":
        return MemoryLedger(key=key)
    try:
        from dp_pipeline.accounting.ledger._sql import SQLLedger
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError('a SQL ledger needs SQLAlchemy: pip install "dp-pipeline[accounting]"') from exc
    return SQLLedger(url, create=create, read_only=read_only, key=key, timeout=timeout)


def open_ledger(
    ledger: str | LedgerStore, create: bool | None, read_only: bool, key: str | bytes | None, timeout: float
) -> LedgerStore:
    """The store of ``PrivacyAccountant(ledger, create=, read_only=, key=, timeout=)``: a URL opened (with
    the key from ``DP_PIPELINE_LEDGER_KEY`` when none is given), or a store object taken as it is (the
    options then belong to the store: InvalidParameterError)."""
    if isinstance(ledger, str):
        if key is None:
            key = os.environ.get(KEY_ENV) or None
        return open_store(ledger, create=create, read_only=read_only, key=key, timeout=timeout)
    if isinstance(ledger, LedgerStore):
        if create is not None or read_only or key is not None or timeout != 30.0:
            raise InvalidParameterError(
                "create, read_only, key and timeout are options of opening a URL; a store object is "
                "already open (pass them to the store, e.g. SQLLedger(url, key=...))",
                "ledger",
            )
        return ledger
    raise InvalidParameterError(
        "'ledger' must be a database URL (e.g. 'sqlite:///ledger.db', 'memory://') or a LedgerStore, "
        f"got {type(ledger).__name__}",
        "ledger",
    )
