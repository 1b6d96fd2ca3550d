"""Runs diffprivlib inside benchmarks/.venv-diffprivlib (diffprivlib 0.6.6 needs an older scikit-learn than
the project's lock). Prints one JSON object.

- ``rates N``: values per second of diffprivlib's Laplace and analytic Gaussian mechanisms, one value a call.
- ``quantiles DATA.npy RUNS EPSILON LOWER UPPER Q…``: ``diffprivlib.tools.quantile`` of the saved array for
  the quantiles Q… together at ε = EPSILON (diffprivlib splits it evenly), RUNS times; the mean seconds per
  call and every released value.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from diffprivlib.mechanisms import GaussianAnalytic, Laplace
from diffprivlib.tools import quantile


def rate(mechanism: object, n: int) -> float:
    randomise = mechanism.randomise  # type: ignore[attr-defined]
    start = time.perf_counter()
    for _ in range(n):
        randomise(0.0)
    return n / (time.perf_counter() - start)


def rates(n: int) -> dict[str, float]:
    return {
        "laplace": rate(Laplace(epsilon=1.0, sensitivity=1.0), n),
        "gaussian": rate(GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0), n),
    }


def quantiles(path: str, runs: int, epsilon: float, bounds: tuple[float, float], qs: list[float]) -> dict:
    data = np.load(path)
    released = []
    start = time.perf_counter()
    for _ in range(runs):
        released.append(np.atleast_1d(quantile(data, qs, epsilon=epsilon, bounds=bounds)).tolist())
    return {"seconds": (time.perf_counter() - start) / runs, "values": released}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "rates":
        print(json.dumps(rates(int(args[0]))))
    else:
        path, runs, epsilon, lower, upper, *qs = args
        bounds = (float(lower), float(upper))
        print(json.dumps(quantiles(path, int(runs), float(epsilon), bounds, [float(q) for q in qs])))
