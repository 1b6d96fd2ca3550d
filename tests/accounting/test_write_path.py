"""The ledger's write path: hashes of pre-encoded bodies, the race to create a dataset, lost connections,
and SQLite's durability setting."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting.ledger import SQLLedger
from dp_pipeline.accounting.ledger._base import (
    DatasetState,
    canonical_json,
    record_hash,
    record_hash_of_text,
)
from dp_pipeline.exceptions import LedgerError

# ------------------------------------------------------------------------------------------------ hashes

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _reference_hash(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@given(
    dataset=st.text(min_size=1),
    seq=st.integers(min_value=1, max_value=2**40),
    kind=st.sampled_from(["budget", "reserve", "commit", "release"]),
    time=st.text(),
    key=st.none() | st.text(),
    reservation=st.none() | st.integers(min_value=1, max_value=2**40),
    body=st.dictionaries(st.text(max_size=10), _json, max_size=6),
    prev_hash=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_hash_of_an_encoded_body_is_the_hash_of_the_canonical_record(
    dataset: str,
    seq: int,
    kind: str,
    time: str,
    key: str | None,
    reservation: int | None,
    body: dict[str, Any],
    prev_hash: str,
) -> None:
    fields = {
        "body": body,
        "dataset": dataset,
        "key": key,
        "kind": kind,
        "prev_hash": prev_hash,
        "reservation": reservation,
        "seq": seq,
        "time": time,
    }
    expected = _reference_hash(fields)
    assert record_hash_of_text(
        dataset, seq, kind, time, key, reservation, canonical_json(body), prev_hash
    ) == (expected)
    assert record_hash(dataset, seq, kind, time, key, reservation, body, prev_hash) == expected


def test_hash_of_a_tampered_seq_type_is_encoded_as_json() -> None:
    # a row edited to hold text or a boolean where the seq was: still JSON, and not the original hash
    for odd in ("3", True):
        fields = {
            "body": {},
            "dataset": "d",
            "key": None,
            "kind": "commit",
            "prev_hash": "0" * 64,
            "reservation": None,
            "seq": odd,
            "time": "t",
        }
        digest = record_hash_of_text("d", odd, "commit", "t", None, None, "{}", "0" * 64)  # type: ignore[arg-type]
        assert digest == _reference_hash(fields)
        assert digest != record_hash_of_text("d", 3, "commit", "t", None, None, "{}", "0" * 64)


# ------------------------------------------------------------------------------------------ transactions
# (lookups and rollbacks inside a transaction: the store contract, tests/accounting/test_ledger_stores.py)


@pytest.mark.postgres
def test_the_loser_of_the_race_to_create_a_dataset_retries_on_the_winners_head(pg_url: str) -> None:
    slow, fast = SQLLedger(pg_url, create=True), SQLLedger(pg_url)
    inside, fast_done = threading.Event(), threading.Event()
    heads: list[Any] = []

    def create(tx: Any) -> int:
        heads.append(tx.head)
        if len(heads) == 1:  # the first attempt read "no dataset yet"; let the other writer create it
            inside.set()
            assert fast_done.wait(30)
        state = DatasetState({"guarantee": {"type": "approx", "epsilon": 1.0, "delta": 0.0}}, "basic", {})
        return tx.append("budget", {"attempt": len(heads)}, state).seq

    def create_fast() -> None:
        assert inside.wait(30)
        fast.atomic("d", create_other)
        fast_done.set()

    def create_other(tx: Any) -> int:
        assert tx.head is None
        state = DatasetState({"guarantee": {"type": "approx", "epsilon": 1.0, "delta": 0.0}}, "basic", {})
        return tx.append("budget", {"attempt": "other"}, state).seq

    thread = threading.Thread(target=create_fast)
    thread.start()
    seq = slow.atomic("d", create)
    thread.join(30)
    assert heads[0] is None and heads[1] is not None and heads[1].seq == 1  # retried on the winner's head
    assert seq == 2 and [r.body["attempt"] for r in slow.records("d")] == ["other", 2]
    slow.close()
    fast.close()


@pytest.mark.postgres
def test_a_lost_connection_raises_once_and_the_next_spend_reconnects(pg_url: str) -> None:
    acct = PrivacyAccountant(pg_url, create=True)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.spend("d", PureDP(0.25))
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:  # as a server restart would: end every other session
        killed = conn.execute(
            sa.text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar_one()
    admin.dispose()
    assert killed >= 1
    with pytest.raises(LedgerError, match=r"terminat|closed|connection"):
        acct.spend("d", PureDP(0.25))
    acct.spend("d", PureDP(0.25))
    assert acct.spent("d").epsilon == 0.5  # the failed spend wrote nothing
    acct.verify()
    acct.close()


# ------------------------------------------------------------------------------------------- durability


def _synchronous(ledger: SQLLedger) -> int:
    raw = ledger._engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA synchronous")
        return int(cursor.fetchone()[0])
    finally:
        raw.close()


def test_sqlite_commits_are_durable_by_default_and_normal_only_when_asked(tmp_path: Path) -> None:
    durable = SQLLedger(f"sqlite:///{tmp_path / 'a.db'}", create=True)
    fast = SQLLedger(f"sqlite:///{tmp_path / 'b.db'}?synchronous=normal", create=True)
    assert _synchronous(durable) == 2 and _synchronous(fast) == 1  # FULL, NORMAL
    for store in (durable, fast):
        acct = PrivacyAccountant(store)
        acct.set_budget("d", ApproxDP(1.0, 0.0))
        acct.spend("d", PureDP(0.5))
        acct.close()
    assert PrivacyAccountant(f"sqlite:///{tmp_path / 'b.db'}").spent("d").epsilon == 0.5
    with pytest.raises(LedgerError, match="synchronous must be full, normal or extra"):
        SQLLedger(f"sqlite:///{tmp_path / 'c.db'}?synchronous=off", create=True)
