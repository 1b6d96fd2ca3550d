"""Throughput of the secure default path against the fast path and OpenDP, side by side in one run.

- dp-pipeline's secure default (``rng=None``: AES-128 counter CSPRNG, exact lattice sampling) on 10⁷ values;
- the fast path on the same 10⁷ values (``rng=fast_rng(...)``: numpy's PCG64 float samplers, not
  floating-point safe);
- OpenDP's vectorised ``make_laplace`` / ``make_gaussian`` on 10⁵ values (exact sampling with
  arbitrary-precision integers; it runs at tens of thousands of values per second here).

Each rate is the best of three runs (wall clock). Targets for Laplace: at least 10× OpenDP and within 5× of
the fast path.

Run: ``.venv/bin/python benchmarks/bench_secure.py`` (prints a Markdown table).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from bench_mechanisms import best_rate  # the same timing rule as the mechanism benchmark (same folder)

from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, Laplace, Staircase, fast_rng

BIG, SMALL = 10_000_000, 100_000


def opendp_rate(kind: str, n: int) -> float | None:
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover - the dev extra installs it
        return None
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if kind == "laplace":
        measurement = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=1.0)
    else:
        measurement = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=3.73)
    values = [0.0] * n
    return best_rate(lambda: measurement(values), n, repeat=1)


def main() -> None:
    x = np.zeros(BIG)
    counts = np.zeros(BIG, dtype=np.int64)
    bits = np.zeros(BIG, dtype=np.int8)
    laplace = Laplace(epsilon=1.0, sensitivity=1.0)
    gaussian = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    staircase = Staircase(epsilon=1.0, sensitivity=1.0)
    rr = BinaryRandomizedResponse(epsilon=1.0)
    rows: list[tuple[str, float, float, float | None]] = []
    cases: list[tuple[str, Any, Any, str | None]] = [
        ("Laplace (floats)", laplace, x, "laplace"),
        ("Gaussian (floats)", gaussian, x, "gaussian"),
        ("Laplace (integer counts)", laplace, counts, None),
        ("Staircase (floats)", staircase, x, None),
        ("Binary randomized response", rr, bits, None),
    ]
    for name, mechanism, values, other in cases:
        secure = best_rate(functools.partial(mechanism.randomize, values), BIG)
        fast = best_rate(lambda: mechanism.randomize(values, rng=fast_rng(1)), BIG)  # noqa: B023
        opendp = opendp_rate(other, SMALL) if other else None
        rows.append((name, secure, fast, opendp))
    title = f"Secure default on 10⁷ values vs the fast path (10⁷) and OpenDP {_opendp_version()} (10⁵)"
    print(title + "\n")
    print(
        "| mechanism | secure default (values/s) | fast path (values/s) | slowdown (fast ÷ secure) "
        "| OpenDP (values/s) | speed-up (secure ÷ OpenDP) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, secure, fast, opendp in rows:
        versus = "–" if opendp is None else f"{secure / opendp:,.0f}×"
        odp = "–" if opendp is None else f"{opendp:,.0f}"
        print(f"| {name} | {secure:,.0f} | {fast:,.0f} | {fast / secure:.1f}× | {odp} | {versus} |")


def _opendp_version() -> str:
    try:
        from importlib.metadata import version

        return version("opendp")
    except Exception:  # pragma: no cover
        return "(not installed)"


if __name__ == "__main__":
    main()
