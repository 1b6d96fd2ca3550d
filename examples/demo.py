"""A short tour of dp-pipeline: every mechanism, what its release costs, and an accountant that refuses.

Run with ``make demo`` (which then runs the Airflow example end to end) or ``python examples/demo.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)


def tour_mechanisms() -> None:
    print("Mechanisms (one release each, secure sampling):")
    laplace = Laplace(epsilon=0.5, sensitivity=1.0)
    print(f"  Laplace ε=0.5: scale Δ/ε = {laplace.scale:g}; count 412 -> {laplace.randomize(412)}")
    for calibration in ("analytic", "tail_bound"):
        g = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0, calibration=calibration)
        print(f"  Gaussian ε=1, δ=1e-5 ({calibration}): σ = {g.sigma:.3f}")
    classic = Gaussian(epsilon=0.9, delta=1e-5, calibration="classic", sensitivity=1.0)
    print(f"  Gaussian (classic, ε=0.9): σ = {classic.sigma:.3f}")
    from_mu = Gaussian.from_mu(mu=0.5, sensitivity=1.0)
    print(f"  Gaussian.from_mu(0.5): σ = {from_mu.sigma:g}, {from_mu.guarantee!r}")
    staircase = Staircase(epsilon=1.0, sensitivity=1.0)
    print(f"  Staircase ε=1: optimal γ = {staircase.effective_gamma:.4f}, variance {staircase.variance:.3f} "
          f"(Laplace: {Laplace(epsilon=1.0, sensitivity=1.0).variance:.3f})")
    bl = BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0)
    print(f"  BoundedLaplace on [0, 10], ε=1: scale {bl.scale:.4f}; 7.5 -> {bl.randomize(7.5):.3f}")
    bs = BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3)
    print(f"  BoundedStaircase on [10, 20], γ=0.3, ε=1: certified ε̂ = {bs.epsilon_hat:.4f}")
    rr = BinaryRandomizedResponse(epsilon=1.0, variant="spinner_coin")
    answers = np.random.default_rng(1).random(10_000) < 0.3
    reports = rr.randomize(answers)
    share = (reports.mean() - 0.5 * (1 - rr.p)) / rr.p
    print(f"  Randomized response (spinner + coin) ε=1: p = {rr.p:.4f}; true share 0.30, "
          f"estimated {share:.3f}")
    krr = KRandomizedResponse(epsilon=2.0, categories=["A", "B", "C"])
    votes = np.random.default_rng(2).choice(["A", "B", "C"], size=10_000, p=[0.5, 0.3, 0.2])
    counts = krr.estimate_counts(krr.randomize(votes))
    print(f"  k-RR ε=2, k=3: p = {krr.p:.4f}, q = {krr.q:.4f}; estimated counts "
          + ", ".join(f"{k}: {v:.0f}" for k, v in counts.items()) + " (true 5000, 3000, 2000)")


def tour_guarantees() -> None:
    print("\nGuarantees:")
    print(f"  PureDP(1).to_gdp() = {PureDP(1.0).to_gdp()!r}")
    print(f"  GaussianDP(0.5).to_approx_dp(1e-5) = {GaussianDP(0.5).to_approx_dp(1e-5)!r}")
    print(f"  ApproxDP(0.5, 1e-6).group(3) = {ApproxDP(0.5, 1e-6).group(3)!r}")


def tour_accountant() -> None:
    print("\nAccountant (SQLite ledger in a temporary directory):")
    with tempfile.TemporaryDirectory() as tmp:
        acct = PrivacyAccountant(f"sqlite:///{Path(tmp) / 'ledger.db'}", create=True)
        acct.set_budget("patients", ApproxDP(1.0, 1e-6))
        plan = [Laplace(epsilon=0.3, sensitivity=1.0)] * 3
        print(f"  three Laplace(ε=0.3) releases, {acct.plan_cost('patients', plan)}")
        acct.spend("patients", Laplace(epsilon=0.5, sensitivity=1.0), label="count diabetics")
        acct.spend("patients", Laplace(epsilon=0.5, sensitivity=1.0), label="count smokers")
        try:
            acct.spend("patients", Laplace(epsilon=0.5, sensitivity=1.0), label="count both")
        except BudgetExceededError as exc:
            print(f"  refused: {exc}")
        print(f"  {acct.spent('patients')}")
        print(f"  {acct.remaining('patients')}")
        acct.close()


if __name__ == "__main__":
    tour_mechanisms()
    tour_guarantees()
    tour_accountant()
