"""Tamper evidence and careful opening: what a writer of the database or a careless user could do.

Each attack on the ledger is reproduced as an attacker with write access would do it, and the test shows
which measure catches it: a trigger refuses it, the budget replay of verify(), the record signatures
(HMAC under a key kept outside the database) or an anchor (a checkpoint of the heads kept elsewhere).
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import UnknownDatasetError, open_reservations
from dp_pipeline.accounting import anchor as checkpoint_of
from dp_pipeline.accounting.ledger._base import GENESIS_HASH, record_hash
from dp_pipeline.accounting.ledger._privileges import grant_statements
from dp_pipeline.accounting.ledger._schema import HEAD_REVISION
from dp_pipeline.exceptions import InvalidParameterError, LedgerError, UnsupportedCompositionError
from tests.accounting.conftest import dump_rows, untriggered

KEY = "a test key that is long enough"


def _ledger(path: Path, *, key: str | None = None, budget: float = 1.0) -> PrivacyAccountant:
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True, key=key)
    acct.set_budget("d", ApproxDP(budget, 0.0))
    return acct


def _rewrite(path: Path, dataset: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit the bodies of a dataset's records and rehash the whole chain and its head, as an attacker
    who knows the (public) hash function can."""
    conn = untriggered(path)
    rows = conn.execute(
        "SELECT id, seq, kind, created_at, idem_key, reservation, body FROM dp_ledger_records "
        "WHERE dataset = ? ORDER BY seq",
        (dataset,),
    ).fetchall()
    prev = GENESIS_HASH
    for row_id, seq, kind, time_, key, reservation, body_text in rows:
        body = json.loads(body_text)
        edit(body)
        digest = record_hash(dataset, seq, kind, time_, key, reservation, body, prev)
        conn.execute(
            "UPDATE dp_ledger_records SET body = ?, prev_hash = ?, hash = ?, sig = NULL WHERE id = ?",
            (json.dumps(body), prev, digest, row_id),
        )
        prev = digest
    conn.execute("UPDATE dp_ledger_budgets SET head_hash = ? WHERE dataset = ?", (prev, dataset))
    conn.close()


# ------------------------------------------------------------------------------------------- opening


def test_a_missing_file_is_an_error_that_names_it_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(LedgerError, match=rf"no ledger at {path}.*create=True.*ledger init"):
        PrivacyAccountant(f"sqlite:///{path}", create=False)
    assert list(tmp_path.iterdir()) == []  # no 0-byte file left behind


def test_the_first_run_creates_and_a_deleted_ledger_is_never_created_again(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    day1 = PrivacyAccountant(f"sqlite:///{path}")  # the public contract: a new URL gets a new ledger
    day1.set_budget("d", PureDP(1.0))
    day1.spend("d", PureDP(1.0))
    day1.close()
    for leftover in tmp_path.iterdir():  # the file is deleted (a cleanup job, a wrong volume)
        leftover.unlink()
    with pytest.raises(LedgerError, match=rf"no ledger at {path}.*created there before.*create=True"):
        PrivacyAccountant(f"sqlite:///{path}")  # day 2 must not start over on a full budget
    assert list(tmp_path.iterdir()) == []
    again = PrivacyAccountant(f"sqlite:///{path}", create=True)  # only on purpose
    assert again.datasets() == []
    again.close()


def test_a_zero_byte_file_is_an_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path).close()
    path.write_bytes(b"")  # truncated, e.g. by a careless copy
    for name in ("ledger.db-wal", "ledger.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    with pytest.raises(LedgerError, match=rf"{path} is an empty \(0-byte\) file.*create=True"):
        PrivacyAccountant(f"sqlite:///{path}")
    assert path.read_bytes() == b""


def test_creation_is_explicit_and_reopening_needs_no_flag(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path).spend("d", PureDP(0.25))
    acct = PrivacyAccountant(f"sqlite:///{path}")  # the public contract line, on an existing ledger
    assert acct.spent("d").epsilon == 0.25
    with pytest.raises(LedgerError, match=r"directory .*nowhere does not exist"):
        PrivacyAccountant(f"sqlite:///{tmp_path / 'nowhere' / 'ledger.db'}", create=True)


def test_read_only_opening_reads_and_verifies_but_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path).close()
    before = path.read_bytes()
    for acct in (
        PrivacyAccountant(f"sqlite:///{path}", read_only=True),
        PrivacyAccountant(f"sqlite:///{path}?mode=ro"),
    ):
        assert acct.remaining("d").epsilon == 1.0 and acct.verify().records == 1
        with pytest.raises(LedgerError, match="opened read-only; nothing was written"):
            acct.spend("d", PureDP(0.5))
        with pytest.raises(LedgerError, match="read-only"):
            acct.set_budget("d", ApproxDP(2.0, 0.0))
        acct.close()
    assert path.read_bytes() == before


def test_unknown_datasets_closed_accountants_and_a_deleted_head_row(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path)
    with pytest.raises(UnknownDatasetError, match="'typo'"):
        acct.verify("typo")
    with pytest.raises(UnknownDatasetError, match="'unknown'"):
        open_reservations(acct.store, "unknown")
    acct.spend("d", PureDP(0.25))
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_budgets WHERE dataset = 'd'")
    conn.close()
    for write in (lambda: acct.set_budget("d", ApproxDP(5.0, 0.0)), lambda: acct.spend("d", PureDP(0.1))):
        started = time.monotonic()
        with pytest.raises(LedgerError, match="'d' has records but its head row is missing"):
            write()
        assert time.monotonic() - started < 1.0  # no retries
    acct.close()
    with pytest.raises(LedgerError, match="was closed"):
        acct.spent("d")
    memory = PrivacyAccountant("memory://")
    memory.close()
    with pytest.raises(LedgerError, match="closed"):
        memory.set_budget("d", ApproxDP(1.0, 0.0))


def test_open_errors_say_only_what_applies(tmp_path: Path, pg_url: str) -> None:
    bad = pg_url.rsplit("/", 1)[0] + "/no_such_database?" + pg_url.split("?", 1)[1]
    with pytest.raises(LedgerError) as caught:
        PrivacyAccountant(bad)
    assert "SQLite" not in str(caught.value) and "corrupt" not in str(caught.value)


def test_negative_zero_is_recorded_as_zero(tmp_path: Path) -> None:
    acct = _ledger(tmp_path / "ledger.db")
    acct.spend("d", PureDP(-0.0), label="nothing")
    reserve = acct.store.records("d")[1]
    assert (
        json.dumps(reserve.body["cost"], sort_keys=True) == '{"delta": 0.0, "epsilon": 0.0, "type": "approx"}'
    )
    assert "-0.0" not in json.dumps(reserve.body)


# ------------------------------------------------------------------------------------------- budgets


def test_a_budget_raised_for_one_spend_and_put_back_is_refused_or_found(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path)
    acct.spend("d", PureDP(1.0))
    raise_budget = "UPDATE dp_ledger_budgets SET budget = replace(budget, '1.0', '2.0')"
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.DatabaseError, match="head row moves only"):
        conn.execute(raise_budget)  # the trigger refuses it
    conn = untriggered(path)  # the owner drops the trigger first
    conn.execute(raise_budget)
    conn.close()
    before = dump_rows(f"sqlite:///{path}")
    for writer in (acct, PrivacyAccountant(f"sqlite:///{path}")):  # refused by every write: nothing spent
        with pytest.raises(LedgerError, match=r"head row: cached budget .* differs from the last budget"):
            writer.spend("d", PureDP(1.0))
    assert dump_rows(f"sqlite:///{path}") == before
    with pytest.raises(LedgerError, match=r"head row: cached budget .* differs from the last budget"):
        acct.verify()


def test_verify_reprices_every_reservation_under_its_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path)
    acct.spend("d", PureDP(0.75), key="big")

    def undercharge(body: dict[str, Any]) -> None:  # the charge and every total now say 0.25
        if "charge" in body:
            body["charge"]["epsilon"] = "0.25"
        if body.get("totals", {}).get("epsilon") == "0.75":
            body["totals"]["epsilon"] = "0.25"

    _rewrite(path, "d", undercharge)
    conn = untriggered(path)
    conn.execute("UPDATE dp_ledger_budgets SET totals = replace(totals, '0.75', '0.25')")
    conn.close()
    with pytest.raises(LedgerError, match=r"seq=2: the recorded charge .* is below what its request costs"):
        acct.verify()


# ------------------------------------------------------------------------------------------- attacks


def test_delete_the_last_spend_and_repoint_the_head_is_caught_by_the_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    acct.spend("d", PureDP(0.5))
    anchor = checkpoint_of(acct.store)
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records WHERE dataset = 'd' AND seq > 1")
    budget_hash, totals = conn.execute(
        "SELECT hash, json_extract(body, '$.totals') FROM dp_ledger_records WHERE seq = 1"
    ).fetchone()
    conn.execute(
        "UPDATE dp_ledger_budgets SET head_seq = 1, head_hash = ?, totals = ?", (budget_hash, totals)
    )
    conn.close()
    assert acct.remaining("d").epsilon == 1.0  # the budget came back
    acct.verify()  # the chain and the signatures alone cannot see a truncation
    with pytest.raises(LedgerError, match=r"the anchor has seq=3 but the ledger ends at seq=1"):
        acct.verify(anchor=anchor)


def test_a_rehashed_rewritten_chain_is_caught_by_the_key_and_by_the_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    acct.spend("d", PureDP(0.5), label="count")
    anchor = checkpoint_of(acct.store)
    first_sig = acct.store.records("d")[0].sig
    _rewrite(path, "d", lambda body: body.update(label="edited") if "label" in body else None)
    PrivacyAccountant(f"sqlite:///{path}").verify()  # consistent without the key
    # every signature was stripped: nothing tells the key that the chain was ever signed ...
    assert acct.verify().signatures
    # ... so only the anchor catches a rewrite of the whole chain
    with pytest.raises(LedgerError, match="record seq=3 differs from the anchor"):
        acct.verify(anchor=anchor)
    # records before the edit keep their signatures (their hashes did not change): the key sees it
    conn = untriggered(path)
    conn.execute("UPDATE dp_ledger_records SET sig = ? WHERE seq = 1", (first_sig,))
    conn.close()
    with pytest.raises(LedgerError, match="seq=2: unsigned, but the records before it are signed"):
        acct.verify()


def test_signatures_under_another_key_or_forged_fail(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    acct.spend("d", PureDP(0.5))
    assert all(r.sig is not None for r in acct.store.records("d"))
    report = acct.verify()
    assert report.signatures and "signatures valid" in str(report)
    other = PrivacyAccountant(f"sqlite:///{path}", key="another key, also long enough")
    with pytest.raises(LedgerError, match="seq=1: the signature does not match the ledger key"):
        other.verify()
    with pytest.raises(InvalidParameterError, match="at least 16 bytes"):
        PrivacyAccountant(f"sqlite:///{path}", key="short")
    with pytest.raises(InvalidParameterError, match="a store object is already open"):
        PrivacyAccountant(acct.store, key=KEY)


def test_a_key_introduced_later_signs_from_then_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path).spend("d", PureDP(0.25))  # an old ledger, written without a key
    monkeypatch.setenv("DP_PIPELINE_LEDGER_KEY", KEY)
    keyed = PrivacyAccountant(f"sqlite:///{path}")  # the key comes from the environment
    keyed.spend("d", PureDP(0.25))
    assert [r.sig is not None for r in keyed.store.records("d")] == [False, False, False, True, True]
    assert keyed.verify().signatures
    monkeypatch.delenv("DP_PIPELINE_LEDGER_KEY")
    PrivacyAccountant(f"sqlite:///{path}").spend("d", PureDP(0.25))  # a writer that forgot the key
    with pytest.raises(LedgerError, match="seq=6: unsigned, but the records before it are signed"):
        PrivacyAccountant(f"sqlite:///{path}", key=KEY).verify()


def test_insert_or_replace_is_refused_by_the_chain_trigger(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path)
    acct.spend("d", PureDP(0.5))
    conn = sqlite3.connect(path, isolation_level=None)
    columns = "dataset, seq, kind, created_at, idem_key, reservation, body, prev_hash, hash, sig"
    for statement in (
        f"INSERT OR REPLACE INTO dp_ledger_records ({columns}) SELECT {columns} FROM dp_ledger_records "
        "WHERE seq = 3",
        "INSERT OR REPLACE INTO dp_ledger_records SELECT * FROM dp_ledger_records WHERE seq = 2",
        "INSERT OR REPLACE INTO dp_ledger_budgets SELECT * FROM dp_ledger_budgets",
    ):
        with pytest.raises(sqlite3.DatabaseError, match=r"must extend|head row moves only|known kind"):
            conn.execute(statement)
    conn.close()
    assert acct.verify().records == 3


def test_a_deleted_and_recreated_dataset_is_caught_by_the_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    acct.spend("d", PureDP(1.0))
    anchor = checkpoint_of(acct.store)
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.DatabaseError, match="head row moves only"):
        conn.execute("DELETE FROM dp_ledger_budgets WHERE dataset = 'd'")
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records WHERE dataset = 'd'")
    conn.execute("DELETE FROM dp_ledger_budgets WHERE dataset = 'd'")
    conn.close()
    with pytest.raises(LedgerError, match=r"now ends at seq=0, before seq=3, which this process checked"):
        acct.set_budget("d", ApproxDP(1.0, 0.0))  # a process that saw the dataset refuses the gap
    acct = PrivacyAccountant(f"sqlite:///{path}", key=KEY)  # a new process of the app that holds the key
    acct.set_budget("d", ApproxDP(1.0, 0.0))  # a fresh, full budget, signed
    acct.verify()
    with pytest.raises(LedgerError, match="the anchor has seq=3 but the ledger ends at seq=1"):
        acct.verify(anchor=anchor)
    acct.spend("d", PureDP(0.5))
    with pytest.raises(LedgerError, match="record seq=3 differs from the anchor"):
        acct.verify(anchor=anchor)
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records")
    conn.execute("DELETE FROM dp_ledger_budgets")
    conn.close()
    with pytest.raises(LedgerError, match=r"'d' is in the anchor .* but not in the ledger"):
        acct.verify(anchor=anchor)


def test_an_older_copy_of_the_file_is_caught_by_the_anchor(tmp_path: Path) -> None:
    path, backup = tmp_path / "ledger.db", tmp_path / "backup.db"
    acct = _ledger(path)
    acct.close()
    shutil.copy(path, backup)
    acct = PrivacyAccountant(f"sqlite:///{path}")
    acct.spend("d", PureDP(1.0))
    anchor_file = tmp_path / "anchor.json"
    anchor_file.write_text(json.dumps(checkpoint_of(acct.store)))
    acct.close()
    for name in ("ledger.db-wal", "ledger.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    shutil.copy(backup, path)
    restored = PrivacyAccountant(f"sqlite:///{path}")
    assert restored.remaining("d").epsilon == 1.0 and restored.verify().records == 1
    with pytest.raises(LedgerError, match="the anchor has seq=3 but the ledger ends at seq=1"):
        restored.verify(anchor=anchor_file)


def test_an_edited_anchor_or_a_foreign_file_is_refused(tmp_path: Path) -> None:
    acct = _ledger(tmp_path / "ledger.db", key=KEY)
    anchor = checkpoint_of(acct.store)
    assert acct.verify(anchor=anchor).anchored
    edited = {**anchor, "datasets": {}}
    with pytest.raises(LedgerError, match="the anchor's MAC does not match"):
        acct.verify(anchor=edited)
    stripped = {name: value for name, value in edited.items() if name != "mac"}  # no key needed to strip
    with pytest.raises(LedgerError, match="the anchor carries no MAC"):
        acct.verify(anchor=stripped)
    (tmp_path / "not.json").write_text("[1, 2]")
    with pytest.raises(InvalidParameterError, match="not a dp-pipeline ledger anchor"):
        acct.verify(anchor=tmp_path / "not.json")
    with pytest.raises(InvalidParameterError, match="not JSON"):
        acct.verify(anchor=tmp_path / "ledger.db")


def test_old_ledgers_open_upgrade_and_verify(tmp_path: Path) -> None:
    from alembic import command

    from dp_pipeline.accounting.ledger._sql_schema import _alembic_config

    path = tmp_path / "ledger.db"
    acct = _ledger(path)
    acct.spend("d", PureDP(0.5))
    acct.close()
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), "0001_initial")  # the schema of the previous release
    engine.dispose()
    with pytest.raises(LedgerError, match="older schema revision '0001_initial'"):
        PrivacyAccountant(f"sqlite:///{path}", read_only=True)
    reopened = PrivacyAccountant(f"sqlite:///{path}")
    assert reopened.verify().records == 3 and reopened.store.schema_revision() == HEAD_REVISION


# ------------------------------------------------------------------------------------------- processes


def _spend_in_child(acct: PrivacyAccountant, queue: Any) -> None:
    try:
        for _ in range(5):
            acct.spend("d", PureDP(0.01))
        queue.put("ok")
    except Exception as err:  # reported to the parent
        queue.put(f"{type(err).__name__}: {err}")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.processes
def test_an_accountant_used_in_child_processes(
    backend: str, method: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", ApproxDP(10.0, 0.0))
    acct.spend("d", PureDP(0.01))  # the parent's pool holds a connection now
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    children = [context.Process(target=_spend_in_child, args=(acct, queue)) for _ in range(4)]
    for child in children:
        child.start()
    outcomes = [queue.get(timeout=120) for _ in children]
    for child in children:
        child.join(60)
    assert outcomes == ["ok"] * 4
    acct.spend("d", PureDP(0.01))  # the parent's connection still works
    assert acct.verify().records == 1 + 2 * 22
    assert acct.spent("d").epsilon == pytest.approx(0.22)
    acct.close()


@pytest.mark.processes
def test_a_memory_ledger_refuses_use_in_a_forked_child() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_spend_in_child, args=(acct, queue))
    child.start()
    outcome = queue.get(timeout=60)
    child.join(30)
    assert outcome.startswith("LedgerError: a memory ledger lives in the process that created it")
    assert acct.spent("d").epsilon == 0.0


def test_in_memory_sqlite_is_serialised_between_threads_and_not_pickled() -> None:
    acct = PrivacyAccountant("sqlite://", create=True)
    acct.set_budget("d", ApproxDP(100.0, 0.0))
    errors: list[BaseException] = []

    def spend() -> None:
        try:
            for _ in range(50):
                acct.spend("d", PureDP(0.01))
                acct.remaining("d")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and acct.spent("d").epsilon == pytest.approx(4.0)
    assert acct.verify().records == 1 + 2 * 400
    with pytest.raises(LedgerError, match=r"sqlite://\) cannot be pickled"):
        pickle.dumps(acct)


# ------------------------------------------------------------------------------------------- waiting


def test_a_spend_that_cannot_get_the_lock_times_out_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path).close()
    acct = PrivacyAccountant(f"sqlite:///{path}", timeout=0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(
        LedgerError, match=r"timed out after 0.3 s waiting for the write lock.*Nothing was written"
    ):
        acct.spend("d", PureDP(0.5))
    assert 0.3 <= time.monotonic() - started < 2.0
    holder.execute("ROLLBACK")
    holder.close()
    assert acct.spent("d").epsilon == 0.0
    acct.spend("d", PureDP(0.5))  # once the lock is free
    with pytest.raises(LedgerError, match="timeout must be a positive number"):
        PrivacyAccountant(f"sqlite:///{path}", timeout=0)


@pytest.mark.postgres
def test_a_postgres_spend_that_cannot_get_the_row_lock_times_out(pg_url: str) -> None:
    PrivacyAccountant(pg_url, create=True).set_budget("d", ApproxDP(1.0, 0.0))
    acct = PrivacyAccountant(pg_url, timeout=0.3)
    holder = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with holder.connect() as conn, conn.begin():
        conn.execute(sa.text("SELECT * FROM dp_ledger_budgets WHERE dataset = 'd' FOR UPDATE"))
        with pytest.raises(LedgerError, match=r"timed out after 0.3 s waiting for the lock of dataset 'd'"):
            acct.spend("d", PureDP(0.5))
    holder.dispose()
    assert acct.spent("d").epsilon == 0.0
    acct.spend("d", PureDP(0.5))
    assert acct.spent("d").epsilon == 0.5


# ------------------------------------------------------------------------------------------- postgres


@pytest.mark.postgres
def test_postgres_triggers_guard_the_head_and_the_chain(pg_url: str) -> None:
    acct = PrivacyAccountant(pg_url, create=True, key=KEY)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.spend("d", PureDP(1.0))
    anchor = checkpoint_of(acct.store)
    owner = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    for statement in (
        "UPDATE dp_ledger_budgets SET budget = replace(budget, '1.0', '2.0')",
        "DELETE FROM dp_ledger_budgets",
        "TRUNCATE dp_ledger_budgets",
        "INSERT INTO dp_ledger_records (dataset, seq, kind, created_at, body, prev_hash, hash) "
        "VALUES ('d', 9, 'release', 'now', '{}', 'x', 'y')",
    ):
        with (
            owner.begin() as conn,
            pytest.raises(sa.exc.DBAPIError, match=r"head row moves|must extend|kind"),
        ):
            conn.execute(sa.text(statement))
    # the owner can disable the triggers: every write, the budget replay, the key and the anchor see it
    with owner.begin() as conn:
        conn.execute(sa.text("ALTER TABLE dp_ledger_budgets DISABLE TRIGGER USER"))
        conn.execute(sa.text("UPDATE dp_ledger_budgets SET budget = replace(budget, '1.0', '2.0')"))
    with pytest.raises(LedgerError, match=r"head row: cached budget .* differs from the last budget record"):
        acct.spend("d", PureDP(1.0))
    with pytest.raises(LedgerError, match=r"head row: cached budget .* differs from the last budget record"):
        acct.verify()
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE dp_ledger_budgets SET budget = replace(budget, '2.0', '1.0')"))
    assert acct.verify().records == 3
    with owner.begin() as conn:  # then truncates the chain to its budget record
        conn.execute(sa.text("ALTER TABLE dp_ledger_records DISABLE TRIGGER USER"))
        conn.execute(sa.text("DELETE FROM dp_ledger_records WHERE seq > 1"))
        conn.execute(
            sa.text(
                "UPDATE dp_ledger_budgets SET head_seq = 1, head_hash = "
                "(SELECT hash FROM dp_ledger_records WHERE seq = 1), totals = "
                "(SELECT body::json->>'totals' FROM dp_ledger_records WHERE seq = 1)"
            )
        )
    assert acct.verify().records == 1
    with pytest.raises(LedgerError, match="the anchor has seq=3 but the ledger ends at seq=1"):
        acct.verify(anchor=anchor)
    owner.dispose()
    acct.close()


@pytest.mark.postgres
def test_a_least_privilege_writer_spends_but_cannot_tamper(pg_url: str) -> None:
    acct = PrivacyAccountant(pg_url, create=True)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    owner = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with owner.begin() as conn:
        conn.execute(sa.text("DROP ROLE IF EXISTS dp_writer"))
        conn.execute(sa.text("CREATE ROLE dp_writer LOGIN"))
    acct.store.grant_writer("dp_writer")  # type: ignore[attr-defined]
    writer_url = pg_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://dp_writer@")
    writer = PrivacyAccountant(writer_url)
    writer.spend("d", PureDP(0.25))
    writer.set_budget("e", ApproxDP(1.0, 0.0))
    writer.spend("e", PureDP(0.5))
    writer.set_budget("d", ApproxDP(2.0, 0.0), reason="more data")
    assert writer.remaining("d").epsilon == 1.75 and writer.verify().records == 7
    engine = sa.create_engine(writer_url, poolclass=sa.pool.NullPool)
    for statement in (
        "ALTER TABLE dp_ledger_records DISABLE TRIGGER USER",
        "ALTER TABLE dp_ledger_budgets DISABLE TRIGGER ALL",
        "SET session_replication_role = replica",
        "UPDATE dp_ledger_records SET body = '{}'",
        "DELETE FROM dp_ledger_records",
        "TRUNCATE dp_ledger_records",
        "UPDATE dp_ledger_budgets SET budget = replace(budget, '2.0', '9.0')",
        "DELETE FROM dp_ledger_budgets",
        "DROP TABLE dp_ledger_records",
    ):
        with engine.begin() as conn, pytest.raises(sa.exc.DBAPIError):
            conn.execute(sa.text(statement))
    engine.dispose()
    owner.dispose()
    assert acct.verify().records == 7
    writer.close()
    acct.close()


def test_grant_statements_quote_a_plain_role_and_refuse_anything_else() -> None:
    statements = grant_statements("dp_writer")
    assert 'GRANT SELECT, INSERT ON dp_ledger_records TO "dp_writer"' in statements
    assert not any("DELETE" in s or "TRUNCATE" in s or "UPDATE ON dp_ledger_records" in s for s in statements)
    with pytest.raises(InvalidParameterError, match="plain PostgreSQL identifier"):
        grant_statements('x"; DROP TABLE dp_ledger_records; --')


def _read_only_mount(source: Path, target: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` where ``target`` is ``source`` mounted read-only (a private mount namespace)."""
    mount = shlex.join(["mount", "--bind", "-o", "ro", str(source), str(target)])
    script = f"{mount} && exec {shlex.join(command)}"
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.processes
def test_verify_works_on_a_read_only_file_system(tmp_path: Path) -> None:
    source, target = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    target.mkdir()
    acct = _ledger(source / "ledger.db")
    acct.spend("d", PureDP(0.5))  # left open: its last commits are still in the WAL file
    probe = _read_only_mount(source, target, ["touch", str(target / "probe")])
    if "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot mount read-only here: {probe.stderr.strip()[:200]}")
    cli = str(Path(sys.executable).parent / "dp-pipeline")
    url = f"sqlite:///{target / 'ledger.db'}"
    verify = _read_only_mount(source, target, [cli, "ledger", "verify", "--ledger", url])
    assert verify.returncode == 0, verify.stderr
    assert "ledger verified: 3 records" in verify.stdout
    acct.close()  # checkpoints the WAL into the file and removes it: the file alone is read, as immutable
    verify = _read_only_mount(source, target, [cli, "ledger", "verify", "--ledger", url])
    assert verify.returncode == 0 and "ledger verified: 3 records" in verify.stdout, verify.stderr
    show = _read_only_mount(source, target, [cli, "budget", "show", "d", "--ledger", url])
    assert show.returncode == 1 and "read-only: open it with read_only=True" in show.stderr
    assert "corrupt" not in show.stderr


# ------------------------------------------------------------------------------------------- properties

_BUDGETS = st.sampled_from(
    [
        (ApproxDP(2.0, 1e-5), "basic"),
        (ApproxDP(2.0, 1e-5), "pure_or_gdp"),
        (ApproxDP(1.5, 0.0), "basic"),
        (GaussianDP(1.5), "auto"),
    ]
)
_COSTS = st.sampled_from([PureDP(0.1), PureDP(0.3), ApproxDP(0.2, 1e-7), GaussianDP(0.3), GaussianDP(0.05)])
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["spend", "reserve-cancel", "plan", "raise"]),
        st.lists(_COSTS, min_size=1, max_size=3),
        st.integers(1, 3),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(budget=_BUDGETS, steps=_STEPS)
def test_whatever_the_accountant_accepted_verifies(budget: tuple[Any, str], steps: list[Any]) -> None:
    """The budget replay and the re-pricing never flag what the accountant itself wrote: budgets raised,
    spends, group sizes, plans and released reservations under every rule."""
    acct = PrivacyAccountant("memory://", key=KEY)
    guarantee, rule = budget
    acct.set_budget("d", guarantee, rule=rule)
    for action, costs, k in steps:
        try:
            if action == "spend":
                acct.spend("d", costs[0], group_size=k)
            elif action == "reserve-cancel":
                acct.reserve("d", costs[0], group_size=k).cancel("never read")
            elif action == "plan":
                acct.spend_plan("d", costs, group_size=k)
            else:
                bigger = (
                    GaussianDP(acct.budget("d").guarantee.mu * 1.5)  # type: ignore[union-attr]
                    if isinstance(guarantee, GaussianDP)
                    else ApproxDP(acct.budget("d").epsilon * 1.5, acct.budget("d").delta)
                )
                acct.set_budget("d", bigger, rule=rule)
        except (BudgetExceededError, UnsupportedCompositionError):
            pass
    report = acct.verify(anchor=checkpoint_of(acct.store))
    assert report.signatures and report.records == len(acct.store.records("d"))
