"""Writes ledger_0_1_rules_as_branches.db and .json with dp-pipeline as of commit 02bbe03 (budget rules as
``if`` branches, ``method=``, ``release``), for the test that such ledgers open unchanged.

Run with that version importable: ``python make_ledger_0_1.py sqlite:///PATH.db > PATH.json``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, Laplace


def _report(report: Any) -> dict[str, Any]:
    return {
        "guarantee": report.guarantee.to_dict(),
        "method": report.method,
        "open": report.open_reservations,
    }


def recorded_plan(acct: PrivacyAccountant, dataset: str) -> list[Any]:
    """Five releases whose events are those of the dataset's recorded plan (fixed noise parameters)."""
    events = next(e.events for e in acct.history(dataset) if len(e.events) > 1)
    return [*events, *events][:5]


def main(url: str) -> None:
    a = PrivacyAccountant(url, create=True)
    a.set_budget("basic", ApproxDP(3.0, 1e-5))
    a.set_budget("pure", PureDP(2.0))
    a.set_budget("gdp", GaussianDP(1.0))
    a.set_budget("mixed", ApproxDP(4.0, 1e-5), method="gdp")
    a.set_budget("aggr", ApproxDP(5.0, 1e-6), relation="add_remove")
    for ds in ("basic", "pure"):
        a.spend(ds, Laplace(epsilon=0.2, sensitivity=1.0), label="lap", key=ds + "1")
        a.spend(ds, Laplace(epsilon=0.1, sensitivity=1.0), group_size=3)
        a.spend(ds, BinaryRandomizedResponse(epsilon=0.3))
    a.spend("basic", Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0))
    a.spend_plan("basic", [Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0)] * 3, key="plan")
    a.spend_plan("pure", [Laplace(epsilon=0.1, sensitivity=1.0)] * 3)
    for ds in ("gdp", "mixed"):
        a.spend(ds, Gaussian.from_mu(0.3, sensitivity=1.0))
        a.spend(ds, Laplace(epsilon=0.1, sensitivity=1.0), group_size=2)
        a.spend_plan(ds, [Gaussian.from_mu(0.1, sensitivity=1.0)] * 4)
        a.reserve(ds, Gaussian.from_mu(0.2, sensitivity=1.0), key=ds + "-open")
        a.reserve(ds, Gaussian.from_mu(0.2, sensitivity=1.0), key=ds + "-rel").release("never read")
    a.spend("aggr", Laplace(epsilon=0.5, sensitivity=1.0).event.under("add_remove"))
    a.spend("aggr", Laplace(epsilon=0.5, sensitivity=1.0))
    a.set_budget("basic", ApproxDP(4.0, 1e-5), reason="raised")
    a.set_budget("fresh", ApproxDP(1.0, 1e-6))
    a.set_budget("fresh", GaussianDP(1.0))
    a.verify()
    reports = {
        ds: {
            "spent": _report(a.spent(ds)),
            "remaining": _report(a.remaining(ds)),
            "budget": _report(a.budget(ds)),
        }
        for ds in a.datasets()
    }
    reports["plans"] = {ds: _report(a.plan_cost(ds, recorded_plan(a, ds))) for ds in ("basic", "mixed")}
    a.close()
    print(json.dumps(reports, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
