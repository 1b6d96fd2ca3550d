"""A ledger written before budget rules were classes (dp-pipeline at 02bbe03, by data/make_ledger_0_1.py)
opens without migration, reports what that version reported, takes new spends and still verifies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dp_pipeline import ApproxDP, PrivacyAccountant
from dp_pipeline.accounting.rules import BasicComposition, GaussianDPFilter, PureOrGaussianDP
from dp_pipeline.mechanisms import Gaussian, Laplace

DATA = Path(__file__).parent / "data"


def _report(report: Any) -> dict[str, Any]:
    return {
        "guarantee": report.guarantee.to_dict(),
        "method": report.method,
        "open": report.open_reservations,
    }


def test_an_earlier_ledger_opens_reports_the_same_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    shutil.copy(DATA / "ledger_0_1_rules_as_branches.db", path)
    expected = json.loads((DATA / "ledger_0_1_rules_as_branches.json").read_text(encoding="utf-8"))
    acct = PrivacyAccountant(f"sqlite:///{path}")
    assert acct.verify().records == 48
    for ds in acct.datasets():
        got = {"spent": acct.spent(ds), "remaining": acct.remaining(ds), "budget": acct.budget(ds)}
        assert {what: _report(r) for what, r in got.items()} == expected[ds], ds
    for ds in ("basic", "mixed"):  # the recorded plans' events: their noise is what the ledger holds
        events = next(e.events for e in acct.history(ds) if len(e.events) > 1)
        assert _report(acct.plan_cost(ds, [*events, *events][:5])) == expected["plans"][ds]
    # the stored (method, budget type) pairs pick the rule classes, and the head rows stay as written
    from dp_pipeline.accounting._records import budget_of

    rules = {ds: type(budget_of(acct.store.head(ds).state, ds).rule) for ds in acct.datasets()}  # type: ignore[union-attr]
    assert rules == {
        "aggr": BasicComposition,
        "basic": BasicComposition,
        "fresh": GaussianDPFilter,
        "gdp": GaussianDPFilter,
        "mixed": PureOrGaussianDP,
        "pure": BasicComposition,
    }
    acct.cancel("gdp", "gdp-open", "never read")
    acct.spend("mixed", Gaussian.from_mu(0.1, sensitivity=1.0))
    acct.spend("basic", Laplace(epsilon=0.1, sensitivity=1.0))
    acct.set_budget("aggr", ApproxDP(6.0, 1e-6))
    assert acct.verify().records == 48 + 1 + 2 + 2 + 1
    acct.close()
