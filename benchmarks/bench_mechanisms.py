"""Mechanism throughput, side by side in one run.

- dp-pipeline's vectorised Laplace and Gaussian on 10⁷ values against the raw numpy Generator call that draws
  the same noise (``values + rng.laplace(...)``), in the same process;
- OpenDP's vectorised measurements and diffprivlib's per-value mechanisms on 10⁵ values. diffprivlib 0.6.6
  runs in its own environment, benchmarks/.venv-diffprivlib, created from requirements-diffprivlib.txt on
  first use, because it does not import with scikit-learn 1.9.

Run: ``.venv/bin/python benchmarks/bench_mechanisms.py`` (prints a Markdown table).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
from _worker_env import run_worker

from dp_pipeline.mechanisms import Gaussian, Laplace, fast_rng

BIG, SMALL = 10_000_000, 100_000


def best_rate(func: Callable[[], object], n: int, repeat: int = 3) -> float:
    """Values per second of the fastest of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return n / min(times)


def opendp_rates(n: int) -> dict[str, float]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = [0.0] * n
    laplace = (
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.l1_distance(T=float),
    ) >> dp.m.then_laplace(scale=1.0)
    gaussian = (
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.l2_distance(T=float),
    ) >> dp.m.then_gaussian(scale=3.73)
    return {
        "laplace": best_rate(lambda: laplace(values), n, repeat=1),
        "gaussian": best_rate(lambda: gaussian(values), n, repeat=1),
    }


def diffprivlib_rates(n: int) -> dict[str, float]:
    return dict(json.loads(run_worker("diffprivlib", ["rates", str(n)])))


def main() -> None:
    values = np.zeros(BIG)
    rng = fast_rng(1)
    laplace = Laplace(epsilon=1.0, sensitivity=1.0)
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    sigma = gaussian.sigma
    rows = {
        "laplace": {
            "numpy": best_rate(lambda: values + rng.laplace(0.0, 1.0, size=BIG), BIG),
            "dp-pipeline": best_rate(lambda: laplace.randomize(values, rng=rng), BIG),
        },
        "gaussian": {
            "numpy": best_rate(lambda: values + rng.normal(0.0, sigma, size=BIG), BIG),
            "dp-pipeline": best_rate(lambda: gaussian.randomize(values, rng=rng), BIG),
        },
    }
    for name, rates in (("OpenDP", opendp_rates(SMALL)), ("diffprivlib", diffprivlib_rates(SMALL))):
        for mechanism, rate in rates.items():
            rows[mechanism][name] = rate
    print(
        "| mechanism | numpy (10⁷) | dp-pipeline (10⁷) | OpenDP (10⁵) | diffprivlib (10⁵) "
        "| dp-pipeline / numpy | dp-pipeline / diffprivlib |"
    )
    print("|---|---|---|---|---|---|---|")
    for mechanism, r in rows.items():
        print(
            f"| {mechanism} | {r['numpy']:.3g}/s | {r['dp-pipeline']:.3g}/s | {r['OpenDP']:.3g}/s "
            f"| {r['diffprivlib']:.3g}/s | {r['dp-pipeline'] / r['numpy']:.2f}× "
            f"| {r['dp-pipeline'] / r['diffprivlib']:.0f}× |"
        )


if __name__ == "__main__":
    main()
