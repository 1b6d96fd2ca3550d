"""Forged records: what someone who can insert rows (the least-privilege PostgreSQL writer role included)
can make honest workers do, and that every write first checks the records appended since it last looked.

Each attack is played as such an attacker plays it, with the triggers in place: compute the next record's hash
(the hash function is public), insert the record, and move the head row onto it with the state the attacker
wants honest writers to read. The overspend each attack would cause is computed independently in the test
(plain sums, and the μ-GDP trade-off's δ(ε) in closed form through scipy).
"""

from __future__ import annotations

import json
import math
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from scipy.stats import norm

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting.ledger._base import canonical_json, record_hash
from dp_pipeline.accounting.ledger._schema import HEAD_REVISION
from dp_pipeline.exceptions import LedgerError
from tests.accounting.conftest import dump_rows, untriggered

KEY = "a test key that is long enough"
_TIME = "2027-01-01T00:00:00.000000+00:00"


# ------------------------------------------------------------------------------------------- the forger


class Forger:
    """Someone who can INSERT records and UPDATE the head row, through an engine whose triggers apply."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url, poolclass=sa.pool.NullPool)

    def last(self, dataset: str) -> tuple[int, str, dict[str, Any]]:
        """The last record's seq, hash and body."""
        with self.engine.connect() as conn:
            seq, digest, body = conn.execute(
                sa.text(
                    "SELECT seq, hash, body FROM dp_ledger_records WHERE dataset = :d ORDER BY seq DESC "
                    "LIMIT 1"
                ),
                {"d": dataset},
            ).one()
        return int(seq), str(digest), json.loads(body)

    def seq_of_key(self, dataset: str, key: str) -> int:
        """The seq of the reservation with idempotency ``key``."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT seq FROM dp_ledger_records WHERE dataset = :d AND kind = 'reserve' "
                        "AND idem_key = :k"
                    ),
                    {"d": dataset, "k": key},
                ).scalar_one()
            )

    def head(self, dataset: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The head row's budget and totals."""
        with self.engine.connect() as conn:
            budget, totals = conn.execute(
                sa.text("SELECT budget, totals FROM dp_ledger_budgets WHERE dataset = :d"), {"d": dataset}
            ).one()
        return json.loads(budget), json.loads(totals)

    def append(
        self,
        dataset: str,
        kind: str,
        body: dict[str, Any],
        *,
        totals: dict[str, Any],
        budget: dict[str, Any] | None = None,
        key: str | None = None,
        reservation: int | None = None,
    ) -> int:
        """Insert one record that extends the chain and move the head onto it; return its seq."""
        seq, prev, _ = self.last(dataset)
        seq += 1
        digest = record_hash(dataset, seq, kind, _TIME, key, reservation, body, prev)
        head_budget, _ = self.head(dataset)
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dp_ledger_records (dataset, seq, kind, created_at, idem_key, reservation, "
                    "body, prev_hash, hash) VALUES (:d, :s, :k, :t, :key, :r, :b, :p, :h)"
                ),
                {
                    "d": dataset,
                    "s": seq,
                    "k": kind,
                    "t": _TIME,
                    "key": key,
                    "r": reservation,
                    "b": canonical_json(body),
                    "p": prev,
                    "h": digest,
                },
            )
            conn.execute(
                sa.text(
                    "UPDATE dp_ledger_budgets SET head_seq = :s, head_hash = :h, totals = :t, budget = :b "
                    "WHERE dataset = :d"
                ),
                {
                    "s": seq,
                    "h": digest,
                    "t": canonical_json(totals),
                    "b": canonical_json(budget if budget is not None else head_budget),
                    "d": dataset,
                },
            )
        return seq


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Forger]]:
    """An empty ledger's URL for honest workers, and a forger: on SQLite a plain connection to the file
    (its triggers apply), on PostgreSQL the least-privilege writer role."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        PrivacyAccountant(url, create=True).close()
        forger = Forger(url)
        yield url, forger
    else:
        owner_url = str(request.getfixturevalue("pg_url"))
        owner = PrivacyAccountant(owner_url, create=True)
        role = f"forger_{uuid.uuid4().hex[:12]}"
        engine = sa.create_engine(owner_url, poolclass=sa.pool.NullPool)
        with engine.begin() as conn:
            conn.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        engine.dispose()
        owner.store.grant_writer(role)  # type: ignore[attr-defined]
        owner.close()
        writer_url = owner_url.replace("postgresql+psycopg://postgres@", f"postgresql+psycopg://{role}@")
        forger = Forger(writer_url)
        yield writer_url, forger
    forger.engine.dispose()


def _zero_totals(totals: dict[str, Any]) -> dict[str, Any]:
    return {name: ("0" if isinstance(value, str) else 0) for name, value in totals.items()}


# ------------------------------------------------------------------------------------------- the attacks


def _spend_until_refused(acct: PrivacyAccountant, cost: Any, limit: int = 40) -> int:
    """How many spends of ``cost`` the accountant accepts (stops at ``limit``)."""
    for count in range(limit):
        try:
            acct.spend("d", cost)
        except BudgetExceededError:
            return count
    return limit


def test_a_forged_record_and_head_cannot_reset_what_was_spent(ledger: tuple[str, Forger]) -> None:
    url, forger = ledger
    honest = PrivacyAccountant(url)
    honest.set_budget("d", ApproxDP(1.0, 0.0))
    for _ in range(3):
        honest.spend("d", PureDP(0.25), key=f"k{_}")  # 0.75 of 1 spent
    _, totals = forger.head("d")
    reserve = forger.seq_of_key("d", "k2")
    # a second commit of the last spend, whose totals (and the head's) are back to zero: the triggers
    # check that it names a reservation of the dataset under its key, not what it says
    seq = forger.append(
        "d",
        "commit",
        {"totals": _zero_totals(totals)},
        totals=_zero_totals(totals),
        key="k2",
        reservation=reserve,
    )
    before = dump_rows(url)
    for acct in (honest, PrivacyAccountant(url)):  # a process that wrote before, and a new one
        with pytest.raises(LedgerError, match=rf"record seq={seq}: reservation seq={reserve} was already"):
            acct.spend("d", PureDP(0.25))
        assert dump_rows(url) == before  # nothing written
        acct.close()
    # without the check, 4 more spends of 0.25 fit: 0.75 + 4 × 0.25 = 1.75 on a budget of 1
    assert 0.75 + 4 * 0.25 == 1.75


def test_a_record_of_no_known_kind_stops_spends_once_the_triggers_are_gone(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    honest = PrivacyAccountant(url, create=True)
    honest.set_budget("d", ApproxDP(1.0, 0.0))
    honest.spend("d", PureDP(0.75))
    forger = Forger(url)
    _, totals = forger.head("d")
    with pytest.raises(sa.exc.DBAPIError, match="known kind"):
        forger.append("d", "note", {}, totals=_zero_totals(totals))  # the trigger refuses it
    untriggered(path).close()  # the file's owner drops the triggers first
    seq = forger.append("d", "note", {}, totals=_zero_totals(totals))
    with pytest.raises(LedgerError, match=rf"record seq={seq}: unknown record kind 'note'"):
        honest.spend("d", PureDP(0.25))
    forger.engine.dispose()
    honest.close()


def test_a_negative_charge_cannot_make_room(ledger: tuple[str, Forger]) -> None:
    url, forger = ledger
    honest = PrivacyAccountant(url)
    honest.set_budget("d", ApproxDP(1.0, 0.0))
    honest.spend("d", PureDP(0.25))
    _, totals = forger.head("d")
    _, _, last = forger.last("d")
    forged_totals = {**totals, "epsilon": "-4.25", "active": totals["active"] + 1, "open": 1}
    body = {
        "charge": {"delta": "0", "epsilon": "-4.25", "mu2": None},
        "composition": "basic",
        "cost": {"delta": 0.0, "epsilon": 0.0, "type": "approx"},
        "delta": None,
        "events": [
            {
                "guarantee": {"epsilon": 0.0, "type": "pure"},
                "kind": "guarantee",
                "parameters": {},
                "relation": "replace_one",
                "sensitivity": None,
            }
        ],
        "group_size": 1,
        "label": None,
        "plan": False,
        "relation": "replace_one",
        "spend": False,
        "totals": forged_totals,
    }
    assert last["totals"]["epsilon"] == "0.25"
    seq = forger.append("d", "reserve", body, totals=forged_totals, key="forged")
    before = dump_rows(url)
    with pytest.raises(LedgerError, match=rf"record seq={seq}: the recorded charge .* is below what"):
        honest.spend("d", PureDP(0.25))
    assert dump_rows(url) == before
    # without the check, -4.25 + 21 × 0.25 = 1.0 fits the budget of 1 while 0.25 + 21 × 0.25 = 5.5 was spent
    assert -4.25 + 21 * 0.25 <= 1.0 < 0.25 + 21 * 0.25
    honest.close()


def _gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP (Dong, Roth and Su 2022, Corollary 2.13), computed here with scipy."""
    return float(norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2))


def test_an_inflated_stored_mu_limit_cannot_widen_the_budget(ledger: tuple[str, Forger]) -> None:
    url, forger = ledger
    honest = PrivacyAccountant(url)
    honest.set_budget("d", ApproxDP(1.0, 1e-6), rule="pure_or_gdp")
    shown = str(honest.budget("d"))
    budget, totals = forger.head("d")
    _, _, first = forger.last("d")
    inflated = {**budget, "mu_limit": "100"}
    body = {**first, "mu_limit": "100", "previous": first["budget"], "reason": "forged"}
    seq = forger.append("d", "budget", body, totals=totals, budget=inflated)
    assert str(honest.budget("d")) == shown  # the displayed budget did not change
    before = dump_rows(url)
    mu_one = GaussianDP(1.0)  # the μ of one release; 20 of them are √20-GDP together
    with pytest.raises(LedgerError, match=rf"record seq={seq}: the budget's μ limit 100 is above"):
        honest.spend("d", mu_one)
    assert dump_rows(url) == before
    # without the check 20 such releases fit; their δ at ε = 1 is far above the budget's 1e-6
    assert _gdp_delta(math.sqrt(20), 1.0) > 0.5
    honest.close()


def _forge_raise(forger: Forger, epsilon: float) -> int:
    """Append a budget record raising the budget to ``epsilon``, exactly as set_budget writes one."""
    with forger.engine.connect() as conn:
        body = json.loads(
            conn.execute(sa.text("SELECT body FROM dp_ledger_records WHERE kind = 'budget'")).scalar_one()
        )
    budget, totals = forger.head("d")
    raised = {"delta": 0.0, "epsilon": epsilon, "type": "approx"}
    body = {**body, "budget": raised, "previous": body["budget"], "totals": totals}
    return forger.append("d", "budget", body, totals=totals, budget={**budget, "guarantee": raised})


def test_with_a_key_an_unsigned_record_stops_spends_even_if_it_replays(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    honest = PrivacyAccountant(url, create=True, key=KEY)
    honest.set_budget("d", ApproxDP(1.0, 0.0))
    honest.spend("d", PureDP(0.25))
    forger = Forger(url)
    seq = _forge_raise(forger, 5.0)  # well formed: it replays, but carries no signature
    before = dump_rows(url)
    with pytest.raises(LedgerError, match=rf"record seq={seq}: unsigned"):
        honest.spend("d", PureDP(1.0))
    assert dump_rows(url) == before
    forger.engine.dispose()
    honest.close()


def test_without_a_key_a_well_formed_record_is_what_the_api_allows(tmp_path: Path) -> None:
    """Without a key a row inserter can do what the accountant's API does (here: raise the budget), and
    nothing more: the record replays, so spends go on against the raised budget."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    honest = PrivacyAccountant(url, create=True)
    honest.set_budget("d", ApproxDP(1.0, 0.0))
    honest.spend("d", PureDP(0.25))
    forger = Forger(url)
    _forge_raise(forger, 5.0)
    honest.spend("d", PureDP(1.0))
    assert honest.verify().records == 6
    forger.engine.dispose()
    honest.close()


# ------------------------------------------------------------------------------------------- replace


def _downgrade(path: Path, revision: str) -> None:
    from alembic import command

    from dp_pipeline.accounting.ledger._sql_schema import _alembic_config

    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), revision)
    engine.dispose()


@pytest.mark.parametrize("upgraded", [False, True])
def test_insert_or_replace_on_an_idempotency_key_cannot_delete_a_reservation(
    tmp_path: Path, upgraded: bool
) -> None:
    path = tmp_path / "ledger.db"
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.spend("d", PureDP(0.5), key="old")
    if upgraded:  # a ledger of the previous schema gains the guard when it is next opened for writing
        acct.close()
        _downgrade(path, "0003_payments")
        acct = PrivacyAccountant(f"sqlite:///{path}")
        assert acct.store.schema_revision() == HEAD_REVISION  # type: ignore[attr-defined]
    forger = Forger(f"sqlite:///{path}")
    seq, prev, _ = forger.last("d")
    body: dict[str, Any] = {}
    digest = record_hash("d", seq + 1, "reserve", _TIME, "old", None, body, prev)
    conn = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="idempotency key"):
        conn.execute(
            "INSERT OR REPLACE INTO dp_ledger_records (dataset, seq, kind, created_at, idem_key, body, "
            "prev_hash, hash) VALUES ('d', ?, 'reserve', ?, 'old', '{}', ?, ?)",
            (seq + 1, _TIME, prev, digest),
        )
    conn.close()
    assert [r.kind for r in acct.store.records("d")] == ["budget", "reserve", "commit"]
    forger.engine.dispose()
    acct.close()
