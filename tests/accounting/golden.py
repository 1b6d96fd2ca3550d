"""Golden replay: what ``verify()`` says about a set of ledgers, every dataset's totals and reports, and the
allocation outputs, recorded once and compared after every change to the accounting core.

The ledgers: every SQLite ledger in ``tests/accounting/data`` (written by earlier releases), the ledger the
scenario below wrote with the code that recorded the golden file (``data/golden/scenario.db``), and the
scenario written afresh by the code under test (on SQLite, and on PostgreSQL in the postgres test). The
scenario covers every record kind (budget, reserve, commit, release, pay with and without shares, shrink),
refused spends, partitions, plans, and every rule (basic, gdp_filter, pure_or_gdp, zcdp), plus forged records
whose problems ``verify()`` must name.

Regenerate (only with the code whose behaviour is the reference)::

    python -m tests.accounting.golden
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dp_pipeline import ApproxDP, GaussianDP, PlannedRelease, PrivacyAccountant, PureDP, allocate
from dp_pipeline.accounting import partition_spending
from dp_pipeline.events import composite_event
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    UnsupportedCompositionError,
)
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, Laplace

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
GOLDEN_JSON = GOLDEN / "golden.json"
SCENARIO_DB = GOLDEN / "scenario.db"
REFUSALS = (BudgetExceededError, InvalidParameterError, LedgerError, UnsupportedCompositionError)
RECORDED = sorted(p.name for p in DATA.glob("ledger_*.db"))


# ------------------------------------------------------------------------------------------- the scenario


def _refused(fn: Callable[[], Any]) -> str:
    """Run a call that must be refused; the error's type (the ledger must be unchanged, which the golden
    totals show)."""
    try:
        fn()
    except REFUSALS as err:
        return type(err).__name__
    raise AssertionError("the call was expected to be refused")


def _basic(a: PrivacyAccountant) -> list[str]:
    lap, gauss = Laplace(epsilon=0.3, sensitivity=1.0), Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0)
    rr = BinaryRandomizedResponse(epsilon=0.4)
    a.set_budget("basic", ApproxDP(20.0, 1e-4), rule="basic", reason="first")
    a.spend("basic", lap, label="count", key="s1")
    a.spend("basic", gauss, group_size=2, key="s2")
    a.spend("basic", PureDP(0.1))
    a.spend("basic", composite_event([lap.event, rr.event], "replace_one"), key="composite")
    a.reserve("basic", lap, key="r-commit").commit()
    a.reserve("basic", lap, key="r-cancel").cancel("never read")
    a.reserve("basic", gauss, key="r-open", label="stays open")
    a.spend_plan("basic", [lap, gauss, rr], key="plan-pld", delta=1e-6)
    a.spend_plan("basic", [lap] * 4, key="plan-pure")
    a.spend_plan("basic", [lap, lap, gauss, rr], key="plan-shrunk", delta=1e-6)
    a.shrink("basic", "plan-shrunk", [lap, gauss], reason="two tasks never started")
    paid = a.spend_plan("basic", [lap, lap, gauss], key="plan-paid", delta=1e-6)
    paid.spend("basic", lap, label="paid 1")
    paid.spend("basic", gauss, label="paid 2")
    held = a.reserve("basic", PureDP(1.0), key="r-paid")
    held.spend("basic", PureDP(0.25))
    held.spend("basic", lap)
    held.commit()
    run = a.spend_plan("basic", [lap, lap, gauss], key="run", delta=1e-6)
    share = run.claim("attempt-1", lap)
    share.spend("basic", PureDP(0.1))
    share.spend("basic", PureDP(0.125))
    run.claim("attempt-2", gauss).spend("basic", gauss)
    refused = [
        _refused(lambda: a.spend("basic", PureDP(500.0), key="too-much")),
        _refused(lambda: a.spend("basic", PureDP(0.1), key="s1")),
        _refused(lambda: a.spend_plan("basic", [lap] * 200, key="plan-too-much")),
        _refused(lambda: held.spend("basic", PureDP(5.0))),
        _refused(lambda: share.spend("basic", PureDP(5.0))),
    ]
    a.set_budget("basic", ApproxDP(30.0, 1e-4), reason="raised")
    refused.append(_refused(lambda: a.set_budget("basic", ApproxDP(0.5, 1e-4))))
    return refused


def _gaussian(a: PrivacyAccountant) -> list[str]:
    a.set_budget("gdp", GaussianDP(1.0), rule="gdp_filter")
    a.spend("gdp", Gaussian.from_mu(0.3, sensitivity=1.0), key="g1")
    a.spend("gdp", Gaussian.from_mu(0.2, sensitivity=2.0), group_size=2, key="g2")
    a.spend_plan("gdp", [Gaussian.from_mu(0.1, sensitivity=1.0)] * 5, key="gplan")
    a.reserve("gdp", Gaussian.from_mu(0.2, sensitivity=1.0), key="g-open")
    return [
        _refused(lambda: a.spend("gdp", Gaussian.from_mu(0.99, sensitivity=1.0))),
        _refused(lambda: a.spend("gdp", ApproxDP(0.1, 1e-9))),
    ]


def _mixed(a: PrivacyAccountant, name: str, rule: str) -> list[str]:
    a.set_budget(name, ApproxDP(8.0, 1e-5), rule=rule)
    a.spend(name, Laplace(epsilon=0.2, sensitivity=1.0), key="m1")
    a.spend(name, PureDP(0.3), key="m2")
    a.spend(name, Gaussian.from_mu(0.4, sensitivity=1.0), key="m3")
    a.spend_plan(
        name, [Laplace(epsilon=0.1, sensitivity=1.0), Gaussian.from_mu(0.2, sensitivity=1.0)], key="mp"
    )
    plan = a.spend_plan(name, [Gaussian.from_mu(0.3, sensitivity=1.0)] * 2, key="mpaid")
    plan.spend(name, Gaussian.from_mu(0.3, sensitivity=1.0))
    return [_refused(lambda: a.spend(name, Gaussian.from_mu(50.0, sensitivity=1.0)))]


def _partitioned(a: PrivacyAccountant, name: str, per_person: int) -> list[str]:
    lap = Laplace(epsilon=0.5, sensitivity=1.0)
    a.set_budget(name, PureDP(5.0), relation="add_remove", partitions=per_person)
    a.spend(name, lap, partition="2026-11-01", key="p1")
    a.spend(name, lap, partition=["2026-11-01", "2026-11-02"], key="p2")
    a.spend(name, PureDP(0.25), key="whole")
    a.spend_plan(name, [lap, lap], partition="2026-11-03", key="pplan")
    held = a.reserve(name, PureDP(0.5), partition=["2026-11-04", "2026-11-05"], key="pres")
    held.spend(name, PureDP(0.2), partition="2026-11-04")
    held.commit()
    a.reserve(name, PureDP(0.5), partition="2026-11-06", key="pcancel").cancel("not run")
    refused = [
        _refused(lambda: a.spend(name, PureDP(4.5), partition="2026-11-01")),
        _refused(lambda: held.spend(name, PureDP(0.1))),
    ]
    a.set_budget(name, PureDP(5.0), relation="add_remove", partitions=per_person + 1)
    return refused


def write_scenario(url: str) -> dict[str, list[str]]:
    """Write the scenario ledger at ``url``; the refusals met on the way (error type names) by dataset."""
    with PrivacyAccountant(url, create=True) as a:
        return {
            "basic": _basic(a),
            "gdp": _gaussian(a),
            "mixed": _mixed(a, "mixed", "pure_or_gdp"),
            "zcdp": _mixed(a, "zcdp", "zcdp"),
            "parts": _partitioned(a, "parts", 2),
            "parts1": _partitioned(a, "parts1", 1),
        }


def forge(url: str) -> None:
    """Add datasets with forged records (written around the accountant) that ``verify()`` must refuse."""
    from tests.accounting.test_forged_records import Forger

    with PrivacyAccountant(url) as a:
        for name in ("forged-charge", "forged-totals", "forged-payment"):
            a.set_budget(name, PureDP(1.0))
            a.spend(name, PureDP(0.25), key="honest")
        a.reserve("forged-charge", PureDP(0.25), key="open")
        a.reserve("forged-totals", PureDP(0.25), key="open")
        a.reserve("forged-payment", PureDP(0.3), key="held")
    forger = Forger(url)
    try:
        _, totals = forger.head("forged-charge")
        _, _, last = forger.last("forged-charge")
        forged = {**totals, "epsilon": "-4.25", "active": totals["active"] + 1, "open": 1}
        body = {**last, "charge": {"delta": "0", "epsilon": "-4.25", "mu2": None}, "totals": forged}
        forger.append("forged-charge", "reserve", body, totals=forged, key="forged")
        _, totals = forger.head("forged-totals")
        _, _, last = forger.last("forged-totals")
        understated = {
            **totals,
            "epsilon": "0.25",
            "active": totals["active"] + 1,
            "open": totals["open"] + 1,
        }
        body = {**last, "totals": understated}
        forger.append("forged-totals", "reserve", body, totals=understated, key="forged")
        seq = forger.seq_of_key("forged-payment", "held")
        _, totals = forger.head("forged-payment")
        _, _, reserve = forger.last("forged-payment")
        pay = {**reserve, "paid": {"delta": "0", "epsilon": "5", "mu2": None}, "route": "adaptive"}
        pay["charge"] = {"delta": "0", "epsilon": "5", "mu2": None}
        pay["events"] = [{**reserve["events"][0], "guarantee": PureDP(5.0).to_dict()}]
        pay["cost"] = PureDP(5.0).to_approx_dp().to_dict()
        forger.append("forged-payment", "pay", pay, totals=totals, key="held", reservation=seq)
    finally:
        forger.engine.dispose()


# ------------------------------------------------------------------------------------------- the snapshot


def _report(report: Any) -> dict[str, Any]:
    return {"guarantee": repr(report.guarantee), "method": report.method, "open": report.open_reservations}


def _key(key: str | None) -> str | None:
    """A key as recorded, or ``"auto"`` for one the accountant drew at random."""
    return "auto" if key is not None and key.startswith("auto-") else key


def _dataset(a: PrivacyAccountant, name: str) -> dict[str, Any]:
    try:
        a.verify(name)
        verdict = "ok"
    except REFUSALS as err:
        verdict = str(err)
    head = a.store.head(name)
    assert head is not None
    out: dict[str, Any] = {
        "verify": verdict,
        "head": {
            "budget": dict(head.state.budget),
            "method": head.state.method,
            "totals": dict(head.state.totals),
        },
    }
    if verdict != "ok":
        return out
    out["budget"] = _report(a.budget(name))
    out["spent"] = _report(a.spent(name))
    out["remaining"] = _report(a.remaining(name))
    out["partitions"] = {p: _report(r) for p, r in partition_spending(a.store, name).items()}
    out["history"] = [
        [_key(e.key), e.label, e.status, repr(e.cost), e.method, e.group_size, e.paid_from]
        for e in a.history(name)
    ]
    return out


def snapshot(url: str) -> dict[str, Any]:
    """What the ledger at ``url`` verifies to, and every dataset's totals and reports."""
    with PrivacyAccountant(url, create=False) as a:
        names = a.datasets()
        findings: list[str] | str
        try:
            findings = list(a.verify().findings) if not any(n.startswith("forged") for n in names) else []
        except REFUSALS as err:
            findings = str(err)
        return {"findings": findings, "datasets": {name: _dataset(a, name) for name in names}}


def _allocation(result: Any) -> dict[str, Any]:
    return {
        "std": [r.std.hex() for r in result],
        "scale": result.scale.hex(),
        "target": repr(result.target),
        "cost": repr(result.cost),
        "method": result.method,
        "delta": repr(result.delta),
    }


def allocations(url: str) -> dict[str, Any]:
    """Allocation outputs, bit for bit (floats as hex), against bare targets and the scenario's datasets."""
    gauss = [PlannedRelease("gaussian", sensitivity=1.0, weight=w) for w in (1.0, 2.0, 4.0)]
    mixed = [
        PlannedRelease("laplace", sensitivity=1.0),
        PlannedRelease("gaussian", sensitivity=2.0, weight=3.0),
        PlannedRelease("randomized_response", categories=3),
    ]
    laplace = [PlannedRelease("laplace", sensitivity=1.0, group_size=2) for _ in range(5)]
    fixed = [Laplace(epsilon=0.2, sensitivity=1.0)]
    out: dict[str, Any] = {
        "gauss-approx": _allocation(allocate(gauss, target=ApproxDP(1.0, 1e-6))),
        "gauss-gdp": _allocation(allocate(gauss, target=GaussianDP(0.8))),
        "mixed-approx": _allocation(allocate(mixed, target=ApproxDP(2.0, 1e-6))),
        "laplace-pure": _allocation(allocate(laplace, target=PureDP(1.0))),
        "laplace-fixed": _allocation(allocate(laplace, target=ApproxDP(2.0, 1e-6), fixed=fixed)),
    }
    with PrivacyAccountant(url, create=False) as a:
        for dataset, plan in (("basic", mixed), ("gdp", gauss), ("mixed", gauss), ("zcdp", gauss)):
            for against in ("remaining", "budget"):
                result = allocate(plan, accountant=a, dataset=dataset, against=against)  # type: ignore[arg-type]
                out[f"{dataset}-{against}"] = _allocation(result)
    return out


def _copy(name: Path, into: Path) -> str:
    path = into / name.name
    shutil.copy(name, path)
    return f"sqlite:///{path}"


def fresh_scenario(into: Path, url: str | None = None) -> tuple[str, dict[str, Any]]:
    """Write the scenario (and its forgeries) at ``url`` (default: an SQLite file in ``into``); its URL and
    what it recorded: the refusals, the snapshot and the allocations."""
    url = url or f"sqlite:///{into / 'fresh.db'}"
    refused = write_scenario(url)
    result = {"refused": refused, "allocations": allocations(url)}
    forge(url)
    result["snapshot"] = snapshot(url)
    return url, result


def record(into: Path) -> dict[str, Any]:
    """Everything the golden file holds, computed with the code importable now."""
    recorded = {name: snapshot(_copy(DATA / name, into)) for name in RECORDED}
    if SCENARIO_DB.exists():
        recorded["golden/scenario.db"] = snapshot(_copy(SCENARIO_DB, into))
    _, scenario = fresh_scenario(into)
    return {"recorded": recorded, "scenario": scenario}


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fresh_scenario(Path(tmp))
        shutil.copy(Path(tmp) / "fresh.db", SCENARIO_DB)
    with tempfile.TemporaryDirectory() as tmp:
        result = record(Path(tmp))
    GOLDEN_JSON.write_text(json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
    sys.stdout.write(f"wrote {GOLDEN_JSON}\n")


if __name__ == "__main__":
    main()
