"""Input that used to raise a raw Python error is refused with the library's errors, and writes nothing.

Every backend refuses the same names: a NUL byte (which PostgreSQL cannot store but SQLite would) and a
lone surrogate (not UTF-8 at all) in a dataset name, label, key or reason.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import Request, ledger_entries
from dp_pipeline.accounting.ledger import SQLLedger
from dp_pipeline.exceptions import LedgerError

from .conftest import dump_rows

BAD_TEXT = ["na\x00me", "na\udcffme"]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return str(request.getfixturevalue("pg_url"))


def _state(acct: PrivacyAccountant) -> Any:
    url = acct.store.url
    if url == "memory://":
        return [(d, ledger_entries(acct.store, d)) for d in acct.datasets()]
    return dump_rows(url)


@pytest.mark.parametrize("text", BAD_TEXT, ids=["nul", "surrogate"])
def test_nul_bytes_and_lone_surrogates_are_refused_by_every_backend(ledger_url: str, text: str) -> None:
    acct = PrivacyAccountant(ledger_url, create=True)
    acct.set_budget("d", PureDP(1.0))
    acct.reserve("d", PureDP(0.1), key="open")
    before = _state(acct)
    calls = [
        ("dataset", lambda: acct.set_budget(text, PureDP(1.0))),
        ("dataset", lambda: acct.spend(text, PureDP(0.1))),
        ("label", lambda: acct.spend("d", PureDP(0.1), label=text)),
        ("key", lambda: acct.spend("d", PureDP(0.1), key=text)),
        ("key", lambda: acct.reserve("d", PureDP(0.1), key=text)),
        ("key", lambda: acct.spend_plan("d", [PureDP(0.1)], key=text)),
        ("reason", lambda: acct.cancel("d", "open", reason=text)),
    ]
    for parameter, call in calls:
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert info.value.parameter == parameter
        assert "NUL byte" in str(info.value) or "lone surrogate" in str(info.value)
    assert _state(acct) == before
    acct.close()


def test_a_group_whose_loss_overflows_a_float_is_refused(ledger_url: str) -> None:
    acct = PrivacyAccountant(ledger_url, create=True)
    acct.set_budget("d", PureDP(1.0))
    before = _state(acct)
    with pytest.raises(InvalidParameterError, match="exceeds the largest float") as info:
        acct.spend("d", PureDP(1e300), group_size=10**10)
    assert info.value.parameter == "k"
    with pytest.raises(InvalidParameterError, match="exceeds the largest float"):
        acct.quote("d", Request.plan([PureDP(1e300)], 10**10))
    assert _state(acct) == before
    acct.close()


class _FullDiskCursor(sqlite3.Cursor):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if "journal_mode=WAL" in sql:
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


class _FullDiskConnection(sqlite3.Connection):
    def cursor(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(_FullDiskCursor)


def test_the_wal_pragma_failing_on_a_full_disk_is_a_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True)
    acct.set_budget("d", PureDP(1.0))
    acct.close()
    before = dump_rows(f"sqlite:///{path}")

    def full_disk() -> sqlite3.Connection:
        return sqlite3.connect(path, factory=_FullDiskConnection, check_same_thread=False)

    with pytest.raises(LedgerError, match="database or disk is full"):
        SQLLedger(f"sqlite:///{path}", create=False, engine_options={"creator": full_disk})
    assert dump_rows(f"sqlite:///{path}") == before


def test_a_label_that_is_not_utf8_is_a_ledger_error(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path)
    data = path.read_bytes()
    at = data.index(b"LABEL-TO-CORRUPT")
    path.write_bytes(data[:at] + b"\xff\xfe" + data[at + 2 :])  # not UTF-8 any more
    acct = PrivacyAccountant(f"sqlite:///{path}", create=False)
    for call in (lambda: acct.history("d"), acct.verify):
        with pytest.raises(LedgerError, match="decode"):
            call()
    acct.close()


def _ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True)
    acct.set_budget("d", PureDP(1.0))
    acct.spend("d", PureDP(0.1), label="LABEL-TO-CORRUPT")
    acct.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def test_a_schema_that_is_not_utf8_is_a_ledger_error(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path)
    data = path.read_bytes()
    at = data.index(b"sqlite_autoindex_dp_ledger_budgets_1")  # an index name in the schema table
    path.write_bytes(data[:at] + b"\xa1" + data[at + 1 :])  # sqlite3 raises UnicodeDecodeError on connect
    with pytest.raises(LedgerError, match="corrupt: its schema is not UTF-8"):
        PrivacyAccountant(f"sqlite:///{path}", create=False)


def test_a_record_without_its_cost_is_a_ledger_error_in_history(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path)
    data = path.read_bytes()
    at = data.index(b'"cost"')
    path.write_bytes(data[:at] + b'"cozt"' + data[at + 6 :])  # same length: the row stays readable JSON
    acct = PrivacyAccountant(f"sqlite:///{path}", create=False)
    with pytest.raises(LedgerError, match="record seq 2 is unreadable"):
        acct.history("d")
    acct.close()
