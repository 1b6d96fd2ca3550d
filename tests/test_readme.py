"""The README's Python snippets run as written, and its worked numbers (the rule table, the bounded
staircase settings for ldp_mean) hold, checked against independent computations."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from dp_pipeline.accounting import Request

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
SNIPPETS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def test_the_readme_has_the_tour_and_the_pandas_and_sklearn_snippets() -> None:
    assert len(SNIPPETS) >= 3
    assert any("dp_pipeline.frames" in s for s in SNIPPETS) and any("sklearn" in s for s in SNIPPETS)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"block-{i}" for i in range(len(SNIPPETS))])
def test_readme_snippet_runs(snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("sklearn")
    monkeypatch.chdir(tmp_path)  # the tour writes ledger.db in the working directory
    exec(compile(snippet, str(README), "exec"), {"__name__": "readme"})


def _gdp_delta(mu: float, eps: float) -> float:
    """δ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13), from scipy's normal distribution."""
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def _fitting(accountant_method: str, mechanism: object) -> int:
    from dp_pipeline import ApproxDP, BudgetExceededError, PrivacyAccountant

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(3.0, 1e-5), rule=accountant_method)
    n = 0
    while n < 1000:
        try:
            acct.spend("d", mechanism)
        except BudgetExceededError:
            return n
        n += 1
    return n


def test_the_rule_table_counts() -> None:
    from dp_pipeline import ApproxDP, PrivacyAccountant
    from dp_pipeline.mechanisms import Gaussian, Laplace

    row = re.search(
        r"\| `Gaussian\(epsilon=0\.5, delta=1e-6, sensitivity=1\)` \(σ ≈ ([\d.]+)\) \| (\d+) .*?\| (\d+) .*?"
        r"\| (\d+) fit, (\d+) do not",
        TEXT,
    )
    assert row is not None
    sigma, basic, gdp, fit, unfit = float(row[1]), int(row[2]), int(row[3]), int(row[4]), int(row[5])
    gaussian = Gaussian(epsilon=0.5, delta=1e-6, sensitivity=1.0)
    assert gaussian.sigma == pytest.approx(sigma, abs=0.01)
    assert _fitting("basic", gaussian) == basic == math.floor(3.0 / 0.5)
    mu_b = optimize.brentq(lambda mu: _gdp_delta(mu, 3.0) - 1e-5, 0.01, 10.0)  # largest μ that fits
    assert _fitting("pure_or_gdp", gaussian) == gdp == math.floor((mu_b * gaussian.sigma) ** 2)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(3.0, 1e-5))
    assert (
        acct.quote("d", Request.plan([gaussian] * fit)).fits
        and not acct.quote("d", Request.plan([gaussian] * unfit)).fits
    )
    laplace = re.search(
        r"\| `Laplace\(epsilon=0\.5, sensitivity=1\)` \| (\d+) .*?\| (\d+) .*?\| (\d+) ", TEXT
    )
    assert laplace is not None
    assert _fitting("basic", Laplace(epsilon=0.5, sensitivity=1.0)) == int(laplace[1]) == 6
    assert _fitting("pure_or_gdp", Laplace(epsilon=0.5, sensitivity=1.0)) == int(laplace[2]) == 6


@pytest.mark.slow
def test_the_recommended_bounded_staircase_settings_work_with_ldp_mean() -> None:
    """Each (ε, least γ) of the README table: ldp_mean accepts γ and refuses γ − 0.01, on two ranges."""
    sys.path.insert(0, str(README.parent / "examples"))
    from dp_pipeline.estimation import ldp_mean
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import BoundedLaplace, BoundedStaircase

    table = re.search(r"\| ε \| ([^\n]*)\|\n\|[-| ]*\|\n\| least γ for `ldp_mean` \| ([^\n]*)\|", TEXT)
    assert table is not None
    epsilons = [float(v) for v in table[1].split("|")]
    gammas = [float(v) for v in table[2].split("|")]
    for lower, upper in ((1.67, 1.85), (0.0, 100.0)):
        reports = np.full(50, (lower + upper) / 2)
        for eps, gamma in zip(epsilons, gammas, strict=True):
            ldp_mean(reports, BoundedStaircase(epsilon=eps, lower=lower, upper=upper, gamma=gamma))
            with pytest.raises(InvalidParameterError, match=f"use gamma ≥ {gamma:.2f}"):
                ldp_mean(reports, BoundedStaircase(epsilon=eps, lower=lower, upper=upper, gamma=gamma - 0.01))
            ldp_mean(reports, BoundedLaplace(epsilon=eps, lower=lower, upper=upper))
    from bounded_staircase_vs_laplace import LOWER, UPPER, expected_mse  # the README's experiment

    for eps, percent in ((0.2, 0.3), (1.0, 6), (2.0, 19)):  # "below bounded Laplace's (by 0.3% …)"
        gamma = gammas[epsilons.index(eps)]
        staircase = expected_mse(BoundedStaircase(epsilon=eps, lower=LOWER, upper=UPPER, gamma=gamma))
        laplace = expected_mse(BoundedLaplace(epsilon=eps, lower=LOWER, upper=UPPER))
        assert round(100 * (1 - staircase / laplace), 1 if percent < 1 else 0) == percent
