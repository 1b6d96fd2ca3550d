"""Calibrates plans with PipelineDP's budget accountants; runs inside benchmarks/.venv-pipelinedp (PipelineDP
pulls in PyDP and dp-accounting 0.6, which pins an attrs that Airflow 3.3 cannot use).

Reads one JSON object from stdin: {"epsilon": ε, "delta": δ, "plans": {name: ["laplace" | "gaussian", ...]}}
and prints, per plan, the noise standard deviation of each release (sensitivity 1) from
``NaiveBudgetAccountant`` (an even split of ε and δ, σ from PyDP's Gaussian calibration) and from
``PLDBudgetAccountant`` (one noise scale found by bisection over dp-accounting's PLD), with the seconds the
latter took."""

from __future__ import annotations

import json
import math
import sys
import time

import dp_accounting.pld.privacy_loss_distribution  # noqa: F401  (PLDBudgetAccountant needs it imported)
from pipeline_dp.budget_accounting import MechanismType, NaiveBudgetAccountant, PLDBudgetAccountant
from pipeline_dp.dp_computations import compute_sigma

TYPES = {"laplace": MechanismType.LAPLACE, "gaussian": MechanismType.GAUSSIAN}


def naive(kinds: list[str], epsilon: float, delta: float) -> list[float]:
    accountant = NaiveBudgetAccountant(epsilon, delta)
    specs = [accountant.request_budget(TYPES[kind]) for kind in kinds]
    accountant.compute_budgets()
    return [
        compute_sigma(s.eps, s.delta, 1.0) if kind == "gaussian" else math.sqrt(2.0) / s.eps
        for kind, s in zip(kinds, specs, strict=True)
    ]


def pld(kinds: list[str], epsilon: float, delta: float) -> tuple[list[float], float]:
    start = time.perf_counter()
    accountant = PLDBudgetAccountant(epsilon, delta)
    specs = [accountant.request_budget(TYPES[kind]) for kind in kinds]
    accountant.compute_budgets()
    return [s.noise_standard_deviation for s in specs], time.perf_counter() - start


if __name__ == "__main__":
    request = json.load(sys.stdin)
    eps, dlt = request["epsilon"], request["delta"]
    out = {}
    for name, kinds in request["plans"].items():
        stds, seconds = pld(kinds, eps, dlt)
        out[name] = {"naive": naive(kinds, eps, dlt), "pld": stds, "pld_seconds": seconds}
    print(json.dumps(out))
