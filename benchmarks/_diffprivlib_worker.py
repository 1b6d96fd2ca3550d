"""Times diffprivlib's mechanisms; runs inside benchmarks/.venv-diffprivlib (diffprivlib 0.6.6 needs an older
scikit-learn than the project's lock). Prints one JSON object: values per second for each mechanism."""

from __future__ import annotations

import json
import sys
import time

from diffprivlib.mechanisms import GaussianAnalytic, Laplace


def rate(mechanism: object, n: int) -> float:
    randomise = mechanism.randomise  # type: ignore[attr-defined]
    start = time.perf_counter()
    for _ in range(n):
        randomise(0.0)
    return n / (time.perf_counter() - start)


if __name__ == "__main__":
    n = int(sys.argv[1])
    print(json.dumps({
        "laplace": rate(Laplace(epsilon=1.0, sensitivity=1.0), n),
        "gaussian": rate(GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0), n),
    }))
