"""Accountants for the transformer tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries


@pytest.fixture
def acct() -> Iterator[PrivacyAccountant]:
    """An in-memory ledger with a budget of ε = 100 on dataset "d"."""
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(100.0))
    yield accountant
    accountant.close()


@pytest.fixture
def sqlite_acct(tmp_path: Path) -> Iterator[PrivacyAccountant]:
    """A persistent SQLite ledger with a budget of ε = 100 on dataset "d"."""
    accountant = PrivacyAccountant(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    accountant.set_budget("d", PureDP(100.0))
    yield accountant
    accountant.close()


def charges(accountant: PrivacyAccountant, dataset: str = "d") -> list[object]:
    """The reservations (one per charge) in the dataset's history."""
    return [e for e in ledger_entries(accountant.store, dataset) if e.kind == "reserve"]
