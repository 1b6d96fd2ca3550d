"""Accountants for the pandas-function tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries


@pytest.fixture
def acct() -> Iterator[PrivacyAccountant]:
    """An in-memory ledger with a budget of ε = 100 on dataset "d" (and δ-free)."""
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(100.0))
    yield accountant
    accountant.close()


def charges(accountant: PrivacyAccountant, dataset: str = "d") -> list[object]:
    """The reservations (one per charge) in the dataset's history."""
    return [e for e in ledger_entries(accountant.store, dataset) if e.kind == "reserve"]
