"""A short tour of dp-pipeline: guarantees, mechanisms and what each release costs."""

from __future__ import annotations

import numpy as np

from dp_pipeline import GaussianDP, PureDP
from dp_pipeline.mechanisms import Laplace


def main() -> None:
    rng = np.random.default_rng(2026)
    true_count = 412
    laplace = Laplace(epsilon=0.5, sensitivity=1.0)
    print(f"Laplace count: scale b = Δ/ε = {laplace.scale:.3f}; "
          f"noisy count {laplace.randomize(true_count, rng=rng):.1f} (true {true_count})")
    print(f"  guarantee {laplace.guarantee!r}, as μ-GDP {PureDP(0.5).to_gdp()!r}")
    gdp = GaussianDP(mu=0.5)
    print(f"0.5-GDP at δ = 1e-5 is {gdp.to_approx_dp(1e-5)!r}")


if __name__ == "__main__":
    main()
