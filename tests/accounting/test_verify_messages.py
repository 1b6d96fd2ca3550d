"""What verify() says about signatures and anchors is what it checked.

A report that says "signatures valid" when no record carries a signature, or an anchor whose MAC is skipped
because no key is configured, would vouch for a ledger that nothing vouches for. The signature counts below
are read from the database with sqlite3, independently of the accountant.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from dp_pipeline import ApproxDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import anchor as checkpoint_of
from dp_pipeline.exceptions import LedgerError
from tests.accounting.conftest import untriggered

KEY = "a test key that is long enough"


def _signed_and_total(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as conn:
        signed, total = conn.execute("SELECT COUNT(sig), COUNT(*) FROM dp_ledger_records").fetchone()
    return int(signed), int(total)


def _ledger(path: Path, key: str | None) -> PrivacyAccountant:
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True, key=key)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.spend("d", PureDP(0.25))
    return acct


def test_a_key_on_an_unsigned_ledger_says_that_nothing_was_signed(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path, key=None)
    assert _signed_and_total(path)[0] == 0
    report = PrivacyAccountant(f"sqlite:///{path}", key=KEY).verify()
    assert report.signatures and report.signed == 0
    assert "signatures valid" not in str(report)
    assert "NO record is signed, so the key checked nothing" in str(report)


def test_a_partly_signed_ledger_counts_its_signed_records(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path, key=None)
    PrivacyAccountant(f"sqlite:///{path}", key=KEY).spend("d", PureDP(0.25))
    signed, total = _signed_and_total(path)
    assert 0 < signed < total
    report = PrivacyAccountant(f"sqlite:///{path}", key=KEY).verify()
    assert (report.signed, report.records) == (signed, total)
    assert f"; {signed} signatures valid; the {total - signed} records before" in str(report)


def test_a_fully_signed_ledger_says_all_signatures_are_valid(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path, key=KEY)
    signed, total = _signed_and_total(path)
    assert signed == total > 0
    report = PrivacyAccountant(f"sqlite:///{path}", key=KEY).verify()
    assert f"all {total} signatures valid" in str(report)
    assert "signatures not checked (no key)" in str(PrivacyAccountant(f"sqlite:///{path}").verify())


def test_an_anchor_with_a_mac_is_refused_without_a_key(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    anchor = checkpoint_of(acct.store)
    assert "mac" in anchor
    with pytest.raises(LedgerError, match="the anchor carries a MAC but no ledger key is configured"):
        PrivacyAccountant(f"sqlite:///{path}").verify(anchor=anchor)
    acct.verify(anchor=anchor)  # with the key it holds


def test_a_rollback_with_an_edited_anchor_fails_without_the_key(tmp_path: Path) -> None:
    """The attack: roll the ledger back one spend, and edit the anchor to the rolled-back head. Without
    a key the edit cannot be detected through the MAC, so the anchor must not be accepted at all."""
    path = tmp_path / "ledger.db"
    acct = _ledger(path, key=KEY)
    rolled_back = {"seq": 2, "hash": acct.store.records("d")[1].hash}
    acct.spend("d", PureDP(0.25))
    anchor = checkpoint_of(acct.store)
    conn = untriggered(path)
    conn.execute("DELETE FROM dp_ledger_records WHERE seq > 2")
    totals = conn.execute("SELECT json_extract(body, '$.totals') FROM dp_ledger_records WHERE seq = 2")
    conn.execute(
        "UPDATE dp_ledger_budgets SET head_seq = 2, head_hash = ?, totals = ?",
        (rolled_back["hash"], totals.fetchone()[0]),
    )
    conn.close()
    edited = json.loads(json.dumps(anchor))
    edited["datasets"]["d"] = rolled_back
    with pytest.raises(LedgerError, match="anchor's MAC does not match"):
        acct.verify(anchor=edited)
    with pytest.raises(LedgerError, match="MAC but no ledger key"):
        PrivacyAccountant(f"sqlite:///{path}").verify(anchor=edited)


def test_the_command_reports_the_signed_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    CliRunner = pytest.importorskip("typer.testing").CliRunner
    from dp_pipeline.cli import app

    path = tmp_path / "ledger.db"
    _ledger(path, key=None)
    monkeypatch.setenv("DP_PIPELINE_LEDGER_KEY", KEY)
    url = f"sqlite:///{path}"
    result = CliRunner().invoke(app, ["ledger", "verify", "--ledger", url])
    assert result.exit_code == 0, result.output
    assert "NO record is signed" in result.output
    result = CliRunner().invoke(app, ["ledger", "verify", "--ledger", url, "--json"])
    data = json.loads(result.output)
    assert (data["signatures"], data["signed_records"]) == (True, 0)
