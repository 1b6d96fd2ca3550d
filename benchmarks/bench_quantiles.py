"""DP median and quartiles on 10⁶ values: dp-pipeline against OpenDP and diffprivlib, same ε, same data.

Data: 10⁶ draws of N(50, 10²) (seeded), declared bounds [0, 100]. The median is released at ε = 1; the three
quartiles together at ε = 1 (ε/3 each on every side). dp-pipeline: :func:`~dp_pipeline.frames.dp_median` and
:func:`~dp_pipeline.frames.dp_quantiles` (exponential mechanism on its 2¹⁶ + 1-point grid, exact sampling,
the secure generator, ``accountant="unaccounted"``). OpenDP: ``make_private_quantile`` (Smith's scores,
permute-and-flip/Gumbel selection) on a 1,025-point candidate grid over the same bounds (its scoring is
linear in the candidates; a finer grid made it far slower), with the noise scale that gives ε at
``d_in = 1`` (``binary_search_param``), under MaxDivergence. diffprivlib: ``diffprivlib.tools.quantile``
(Smith's interval exponential mechanism, continuous output, float probabilities) with ``bounds`` and ε
(split evenly over the quartiles), run in its own environment through benchmarks/_diffprivlib_worker.py
(benchmarks/_worker_env.py), on the same array saved to a temporary file. Each library releases ``runs`` times
(100 by default); the table shows the mean wall time per call and the mean absolute error against
``numpy.quantile``.

Run: ``.venv/bin/python benchmarks/bench_quantiles.py [--runs 100]`` (prints a Markdown table).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from _worker_env import run_worker

from dp_pipeline.frames import dp_median, dp_quantiles

ROWS, LOWER, UPPER, EPSILON = 1_000_000, 0.0, 100.0, 1.0
QUARTILES = [0.25, 0.5, 0.75]


def measure(release: Callable[[], list[float]], truth: list[float], runs: int) -> tuple[float, float]:
    """(mean seconds per call, mean absolute error over all released values)."""
    errors, start = [], time.perf_counter()
    for _ in range(runs):
        errors.extend(abs(v - t) for v, t in zip(release(), truth, strict=True))
    return (time.perf_counter() - start) / runs, float(np.mean(errors))


def opendp_release(data: np.ndarray, qs: list[float], epsilon: float) -> Callable[[], list[float]] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    candidates = list(np.linspace(LOWER, UPPER, 1025))
    domain, metric = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
    measurements = []
    for q in qs:

        def make(scale: float, q: float = q) -> object:
            return dp.m.make_private_quantile(domain, metric, dp.max_divergence(), candidates, q, scale)

        scale = dp.binary_search_param(make, d_in=1, d_out=epsilon / len(qs))
        measurements.append(make(scale))
    values = list(np.clip(data, LOWER, UPPER))
    return lambda: [float(m(values)) for m in measurements]  # type: ignore[operator]


def diffprivlib_measure(
    data: np.ndarray, qs: list[float], truth: list[float], runs: int
) -> tuple[float, float]:
    """(mean seconds per call, mean absolute error) of diffprivlib's quantile, in its own environment."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npy"
        np.save(path, data)
        bounds = [str(LOWER), str(UPPER)]
        args = ["quantiles", str(path), str(runs), str(EPSILON), *bounds, *map(str, qs)]
        out = json.loads(run_worker("diffprivlib", args))
    errors = [abs(v - t) for released in out["values"] for v, t in zip(released, truth, strict=True)]
    return float(out["seconds"]), float(np.mean(errors))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    runs = parser.parse_args().runs
    data = np.random.default_rng(2024).normal(50.0, 10.0, ROWS)
    df = pd.DataFrame({"x": data})
    options = {"lower": LOWER, "upper": UPPER, "epsilon": EPSILON, "accountant": "unaccounted"}
    rows = []
    for label, qs in (("median", [0.5]), ("quartiles", QUARTILES)):
        truth = list(np.quantile(data, qs))

        def ours(qs: list[float] = qs) -> list[float]:
            if len(qs) == 1:
                return [float(df.pipe(dp_median, "x", **options)["value"])]
            return list(df.pipe(dp_quantiles, "x", qs, **options)["value"])

        rows.append((label, "dp-pipeline", *measure(ours, truth, runs)))
        theirs = opendp_release(data, qs, EPSILON)
        if theirs is not None:
            rows.append((label, "OpenDP", *measure(theirs, truth, runs)))
        rows.append((label, "diffprivlib", *diffprivlib_measure(data, qs, truth, runs)))
    print(f"| release | library | seconds per call | mean absolute error ({runs} runs) |")
    print("|---|---|---:|---:|")
    for label, library, seconds, error in rows:
        print(f"| {label} | {library} | {seconds:.3f} | {error:.4f} |")


if __name__ == "__main__":
    main()
