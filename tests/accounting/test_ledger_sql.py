"""The SQL ledger: schema under Alembic, refusal of newer schemas and foreign files, tamper detection."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries, open_reservations
from dp_pipeline.accounting.ledger import MemoryLedger
from dp_pipeline.accounting.ledger._base import LedgerStore, check_chain
from dp_pipeline.accounting.ledger._schema import HEAD_REVISION, VERSION_TABLE
from dp_pipeline.accounting.ledger._sql import SQLLedger, known_revisions
from dp_pipeline.exceptions import LedgerError
from tests.accounting.conftest import dump_rows, untriggered


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _populate(url: str) -> PrivacyAccountant:
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", ApproxDP(2.0, 1e-6))
    acct.set_budget("g", GaussianDP(1.0))
    for i in range(5):
        acct.spend("d", PureDP(0.1), label=f"q{i}", key=f"k{i}")
    acct.reserve("d", PureDP(0.2), key="open-one")
    acct.spend("g", GaussianDP(0.3))
    return acct


# ------------------------------------------------------------------------------------------------ schema


def test_head_revision_is_the_head_of_the_shipped_migrations() -> None:
    from alembic.script import ScriptDirectory

    from dp_pipeline.accounting.ledger._sql_schema import _alembic_config

    script = ScriptDirectory.from_config(_alembic_config())
    assert script.get_heads() == [HEAD_REVISION]
    assert HEAD_REVISION in known_revisions()


def test_store_protocol_is_implemented_by_both_backends(sqlite_url: str) -> None:
    store = SQLLedger(sqlite_url, create=True)
    assert isinstance(store, LedgerStore) and isinstance(MemoryLedger(), LedgerStore)
    store.close()


def test_new_sqlite_ledger_has_schema_wal_and_append_only_records(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    acct.close()
    conn = sqlite3.connect(path)
    assert conn.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [(HEAD_REVISION,)]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE dp_ledger_records SET body = '{}' WHERE seq = 2")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM dp_ledger_records WHERE seq = 2")
    conn.close()
    reopened = PrivacyAccountant(f"sqlite:///{path}")  # data survive the process's handles
    assert reopened.spent("d").epsilon == pytest.approx(0.7) and reopened.spent("d").open_reservations == 1
    assert [e.key for e in open_reservations(reopened.store, "d")] == ["open-one"]
    chains = ledger_entries(reopened.store, "d") + ledger_entries(reopened.store, "g")
    assert reopened.verify().records == len(chains)


def test_ledger_written_by_a_newer_schema_is_refused_and_not_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    _populate(url).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999_from_the_future'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before_rows, before_bytes = dump_rows(url), _file_digest(path)
    with pytest.raises(LedgerError, match=r"newer dp-pipeline.*9999_from_the_future.*Nothing was written"):
        PrivacyAccountant(url)
    assert _file_digest(path) == before_bytes and dump_rows(url) == before_rows


@pytest.mark.parametrize("content", [b"this is not a database, just text\n" * 100, bytes(range(256)) * 16])
def test_corrupt_file_gives_a_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(content)
    with pytest.raises(LedgerError, match=r"cannot open ledger.*corrupt or not an SQLite database"):
        PrivacyAccountant(f"sqlite:///{path}")
    assert path.read_bytes() == content


def test_sqlite_file_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    before = _file_digest(path)
    with pytest.raises(LedgerError, match="not a dp-pipeline ledger"):
        PrivacyAccountant(f"sqlite:///{path}")
    assert _file_digest(path) == before


def test_ledger_tables_without_version_table_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _populate(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"DROP TABLE {VERSION_TABLE}")
    with pytest.raises(LedgerError, match="no schema version table"):
        PrivacyAccountant(f"sqlite:///{path}")


# ------------------------------------------------------------------------------------------------ tampering


def test_verify_passes_on_an_untouched_ledger(tmp_path: Path) -> None:
    acct = _populate(f"sqlite:///{tmp_path / 'ledger.db'}")
    report = acct.verify()
    assert report.datasets == ("d", "g") and report.records == (1 + 5 * 2 + 1) + (1 + 2)
    assert acct.verify("g").records == 3


def test_verify_detects_an_edited_record(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    conn = untriggered(path)
    body = json.loads(
        conn.execute("SELECT body FROM dp_ledger_records WHERE dataset='d' AND seq=4").fetchone()[0]
    )
    body["charge"]["epsilon"] = "0.01"  # pretend a release cost less
    conn.execute(
        "UPDATE dp_ledger_records SET body = ? WHERE dataset='d' AND seq=4",
        (json.dumps(body, sort_keys=True, separators=(",", ":")),),
    )
    conn.close()
    with pytest.raises(LedgerError, match=r"dataset 'd', record seq=4: hash does not match"):
        acct.verify()
    acct.verify("g")  # other datasets are intact


def test_verify_detects_an_edit_with_a_recomputed_hash(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    record = next(r for r in acct.store.records("d") if r.seq == 4)
    body = dict(record.body)
    body["label"] = "something else"
    from dp_pipeline.accounting.ledger._base import canonical_json, record_hash

    digest = record_hash(
        record.dataset, record.seq, record.kind, record.time, record.key, None, body, record.prev_hash
    )
    conn = untriggered(path)
    conn.execute(
        "UPDATE dp_ledger_records SET body = ?, hash = ? WHERE dataset='d' AND seq=4",
        (canonical_json(body), digest),
    )
    conn.close()
    with pytest.raises(LedgerError, match=r"record seq=5: prev_hash does not match"):
        acct.verify()


def test_verify_detects_a_deleted_record(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records WHERE dataset='d' AND seq=3")
    conn.close()
    with pytest.raises(LedgerError, match=r"dataset 'd', record seq=4: expected seq=3"):
        acct.verify()


def test_verify_detects_deleted_newest_records_and_edited_totals(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records WHERE dataset='g' AND seq=3")
    conn.close()
    with pytest.raises(LedgerError, match=r"dataset 'g': the head points at seq=3"):
        acct.verify()
    conn = untriggered(path)
    totals = json.loads(conn.execute("SELECT totals FROM dp_ledger_budgets WHERE dataset='d'").fetchone()[0])
    totals["epsilon"] = "0.1"
    conn.execute("UPDATE dp_ledger_budgets SET totals = ? WHERE dataset='d'", (json.dumps(totals),))
    conn.close()
    with pytest.raises(LedgerError, match=r"dataset 'd', head row: cached totals"):
        acct.verify("d")


def test_verify_detects_a_deleted_head_row(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _populate(f"sqlite:///{path}")
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_budgets WHERE dataset='g'")
    conn.close()
    with pytest.raises(
        LedgerError, match=r"dataset 'g': records exist but the dataset's head row is missing"
    ):
        acct.verify()


def test_check_chain_accepts_the_empty_chain() -> None:
    assert check_chain("x", [], None) is None


# ------------------------------------------------------------------------------------------------ postgres


@pytest.mark.postgres
def test_postgres_ledger_schema_and_refusal_of_newer_schema(pg_url: str) -> None:
    acct = _populate(pg_url)
    assert acct.spent("d").epsilon == pytest.approx(0.7)
    acct.verify()
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), conn.begin_nested():
            conn.execute(sa.text("UPDATE dp_ledger_records SET body = '{}'"))
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '9999_from_the_future'"))
    acct.close()
    before = dump_rows(pg_url)
    with pytest.raises(LedgerError, match="newer dp-pipeline"):
        PrivacyAccountant(pg_url)
    assert dump_rows(pg_url) == before
    with engine.begin() as conn:  # a shared database keeps other applications' tables
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = :v"), {"v": HEAD_REVISION})
        conn.execute(sa.text("CREATE TABLE other_app (id integer)"))
    engine.dispose()
    assert PrivacyAccountant(pg_url.replace("postgresql+psycopg://", "postgresql://")).spent("g").mu == 0.3
