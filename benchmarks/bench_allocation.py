"""Noise of planned releases under one budget, side by side in one run.

For plans of 10, 20 and 100 releases (all Gaussian; half Laplace, half Gaussian), sensitivity 1, budget
ε = 1, δ = 1e-6:

- an even basic split: each release gets ε/n (and the Gaussian ones δ/n_Gaussian), σ by the exact (analytic)
  Gaussian calibration;
- PipelineDP 0.3.1: ``NaiveBudgetAccountant`` (the same even split, σ from PyDP) and ``PLDBudgetAccountant``
  (one noise scale found by bisection over dp-accounting's PLD). PipelineDP runs in its own environment,
  benchmarks/.venv-pipelinedp, created from requirements-pipelinedp.txt on first use (it pins dp-accounting
  0.6, which needs an attrs that Airflow 3.3 cannot use);
- dp-pipeline's ``allocate`` (fitted to a dataset's budget through the accountant's plan check).

It prints the noise standard deviation of each kind of release, the seconds each calibration took, whether
dp-pipeline's plan check accepts each plan, and the mean squared error of a DP mean (a noisy sum over 10,000
synthetic values in [0, 1], divided by the public count), measured over 2,000 draws of each release's noise.

Run: ``.venv/bin/python benchmarks/bench_allocation.py`` (prints Markdown tables; PipelineDP's PLD search
takes a few minutes for 100 releases).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
from _worker_env import run_worker

from dp_pipeline import ApproxDP, PlannedRelease, PrivacyAccountant, allocate
from dp_pipeline.accounting import Request
from dp_pipeline.mechanisms import Gaussian, Laplace

EPSILON, DELTA = 1.0, 1e-6
SIZES = (10, 20, 100)
ROWS, DRAWS = 10_000, 2_000
METHODS = ("even basic split", "PipelineDP Naive", "PipelineDP PLD", "dp-pipeline allocate")


def plans() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in SIZES:
        out[f"{n} Gaussian"] = ["gaussian"] * n
        out[f"{n} mixed"] = ["laplace", "gaussian"] * (n // 2)
    return out


def mechanism(kind: str, std: float) -> Any:
    """Noise of standard deviation ``std`` at sensitivity 1."""
    if kind == "gaussian":
        return Gaussian.from_mu(mu=1.0 / std, sensitivity=1.0)
    return Laplace(epsilon=math.sqrt(2.0) / std, sensitivity=1.0)


def even_split(kinds: list[str]) -> tuple[list[float], float]:
    start = time.perf_counter()
    n, n_gaussian = len(kinds), kinds.count("gaussian")
    stds = [
        Gaussian(epsilon=EPSILON / n, delta=DELTA / n_gaussian, sensitivity=1.0).sigma
        if kind == "gaussian"
        else math.sqrt(2.0) * Laplace(epsilon=EPSILON / n, sensitivity=1.0).scale
        for kind in kinds
    ]
    return stds, time.perf_counter() - start


def ours(kinds: list[str]) -> tuple[list[float], float]:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("survey", ApproxDP(EPSILON, DELTA))
    start = time.perf_counter()
    allocation = allocate(
        [PlannedRelease(k, sensitivity=1.0) for k in kinds], accountant=acct, dataset="survey"
    )
    return [r.std for r in allocation], time.perf_counter() - start


def pipelinedp(requested: dict[str, list[str]]) -> dict[str, Any]:
    request = json.dumps({"epsilon": EPSILON, "delta": DELTA, "plans": requested})
    return dict(json.loads(run_worker("pipelinedp", stdin=request)))


def fits(kinds: list[str], stds: list[float]) -> bool:
    """Whether dp-pipeline's plan check accepts these noise levels against the budget."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("survey", ApproxDP(EPSILON, DELTA))
    plan = Request.plan([mechanism(k, s) for k, s in zip(kinds, stds, strict=True)])
    return acct.quote("survey", plan).fits


def dp_mean_mse(kinds: list[str], stds: list[float], seed: int) -> float:
    """Mean over the releases of the empirical MSE of a DP mean: release i adds its noise to the sum of its
    own synthetic column (10,000 values ~ Beta(2, 5) in [0, 1], sensitivity 1) and divides by the count."""
    data = np.random.default_rng(seed).beta(2.0, 5.0, size=(len(kinds), ROWS))
    errors = []
    for kind, std, column in zip(kinds, stds, data, strict=True):
        total = float(column.sum())
        noisy = mechanism(kind, std).randomize(np.full(DRAWS, total))
        errors.append(float(np.mean((noisy / ROWS - total / ROWS) ** 2)))
    return float(np.mean(errors))


def shown(kinds: list[str], stds: list[float]) -> str:
    by_kind = {kind: std for kind, std in zip(kinds, stds, strict=True)}
    parts = [
        f"{'L' if kind == 'laplace' else 'G'} {by_kind[kind]:.6g}"
        for kind in ("laplace", "gaussian")
        if kind in by_kind
    ]
    return " / ".join(parts)


def main() -> None:
    requested = plans()
    external = pipelinedp(requested)
    ours(["laplace", "gaussian"])  # warm-up: import dp-accounting before timing (as the worker does)
    noise_rows, mse_rows = [], []
    for index, (name, kinds) in enumerate(requested.items()):
        results = {
            "even basic split": even_split(kinds),
            "PipelineDP Naive": (external[name]["naive"], math.nan),
            "PipelineDP PLD": (external[name]["pld"], external[name]["pld_seconds"]),
            "dp-pipeline allocate": ours(kinds),
        }
        even_g = results["even basic split"][0][kinds.index("gaussian")]
        our_g = results["dp-pipeline allocate"][0][kinds.index("gaussian")]
        cells = [
            f"{shown(kinds, stds)}{'' if fits(kinds, stds) else ' (refused)'}" for stds, _ in results.values()
        ]
        noise_rows.append(
            f"| {name} | {' | '.join(cells)} | {(even_g / our_g) ** 2:.1f}× "
            f"| {results['PipelineDP PLD'][1]:.1f} s / {results['dp-pipeline allocate'][1]:.2f} s |"
        )
        mses = [dp_mean_mse(kinds, stds, seed=index) for stds, _ in results.values()]
        mse_rows.append(f"| {name} | {' | '.join(f'{m:.3g}' for m in mses)} | {mses[0] / mses[3]:.1f}× |")
    print(f"Noise standard deviation per release (L: Laplace, G: Gaussian), ε = {EPSILON}, δ = {DELTA}")
    print()
    print(
        f"| plan | {' | '.join(METHODS)} | Gaussian variance, even ÷ dp-pipeline "
        "| time: PipelineDP PLD / dp-pipeline |"
    )
    print("|---|" + "---|" * (len(METHODS) + 2))
    print("\n".join(noise_rows))
    print()
    print(
        f"MSE of a DP mean over {ROWS:,} synthetic values in [0, 1] (mean of the releases, {DRAWS:,} draws)"
    )
    print()
    print(f"| plan | {' | '.join(METHODS)} | even ÷ dp-pipeline |")
    print("|---|" + "---|" * (len(METHODS) + 1))
    print("\n".join(mse_rows))


if __name__ == "__main__":
    main()
