"""Empirical privacy auditing: a statistical lower bound on a mechanism's ε, set beside its claim.

:func:`audit` runs a mechanism many times on neighbouring inputs and looks for an output event whose
probability differs between them more than the claimed guarantee allows, in the style of DP-Sniper
(Bichsel et al. 2021) and StatDP (Ding et al. 2018). It can show that a mechanism is *not* as private as it
claims; it can never prove that it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, PureDP, format_guarantee
from dp_pipeline.mechanisms.sampling import secure_rng

__all__ = ["AuditReport", "audit"]


@dataclass(frozen=True)
class AuditReport:
    """The result of :func:`audit`.

    Attributes
    ----------
    epsilon_lower_bound : float
        ε̂: with probability at least 1 − ``alpha`` the mechanism is not (ε, δ)-DP for any ε < ε̂
        (0.0 when nothing is certified).
    claimed_epsilon, claimed_delta : float
        The mechanism's claim (a μ-GDP claim is converted to (ε, δ) at the audit's δ).
    alpha : float
        The probability that a correct mechanism gets ε̂ > claimed ε.
    samples : int
        Releases drawn per input (half choose the event, half measure it).
    pair : tuple
        (x, x'): the ordered neighbours of the event, P[M(x) ∈ S] ≥ e^ε̂ P[M(x') ∈ S] + δ.
    event : str
        The chosen event S.
    probabilities : tuple of float
        The lower confidence bound of P[M(x) ∈ S] and the upper one of P[M(x') ∈ S].
    """

    epsilon_lower_bound: float
    claimed_epsilon: float
    claimed_delta: float
    alpha: float
    samples: int
    pair: tuple[Any, Any]
    event: str
    probabilities: tuple[float, float]

    @property
    def consistent(self) -> bool:
        """True when the empirical lower bound does not exceed the claimed ε."""
        return self.epsilon_lower_bound <= self.claimed_epsilon

    def __str__(self) -> str:
        verdict = "consistent with" if self.consistent else "VIOLATES"
        claim = format_guarantee(ApproxDP(self.claimed_epsilon, self.claimed_delta))
        return (
            f"empirical ε ≥ {self.epsilon_lower_bound:.4f} (confidence {1 - self.alpha:g}) {verdict} the "
            f"claim {claim}; event {self.event} on "
            f"{self.pair!r}, {self.samples} samples per input"
        )


def _claim(mechanism: Any, delta: float | None) -> tuple[float, float]:
    guarantee = mechanism.guarantee
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon, 0.0
    if isinstance(guarantee, ApproxDP):
        return guarantee.epsilon, guarantee.delta
    if isinstance(guarantee, GaussianDP):
        at = 1e-5 if delta is None else delta
        approx = guarantee.to_approx_dp(at)
        return approx.epsilon, approx.delta
    raise InvalidParameterError(f"unsupported guarantee {guarantee!r}", "mechanism")


def _ratio_bound(
    hits_x: NDArray[np.int64], hits_y: NDArray[np.int64], n: int, alpha: float, delta: float
) -> NDArray[np.float64]:
    """ln((P̲_x − δ)/P̄_y) with one-sided Clopper–Pearson bounds at level α/2 each (−inf when ≤ 0)."""
    lower = np.where(hits_x > 0, stats.beta.ppf(alpha / 2, hits_x, n - hits_x + 1), 0.0)
    upper = np.where(hits_y < n, stats.beta.ppf(1 - alpha / 2, hits_y + 1, n - hits_y), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lower > delta, np.log(np.maximum(lower - delta, 1e-300) / upper), -np.inf)


def _categories(outputs: Sequence[NDArray[Any]], bins: int) -> tuple[NDArray[Any], str]:
    """Bin edges (continuous outputs) or the distinct values (discrete outputs), from the selection half."""
    pooled = np.concatenate([np.asarray(o).ravel() for o in outputs])
    if pooled.dtype.kind in "fiu" and np.unique(pooled).size > bins:
        quantiles = np.quantile(pooled.astype(np.float64), np.linspace(0.0, 1.0, bins + 1)[1:-1])
        return np.unique(quantiles), "bins"
    return np.unique(pooled), "values"


def _bin(output: NDArray[Any], grid: NDArray[Any], kind: str) -> NDArray[np.intp]:
    if kind == "bins":
        return np.searchsorted(grid, np.asarray(output, dtype=np.float64).ravel(), side="right")
    index = np.searchsorted(grid, np.asarray(output).ravel())
    index = np.minimum(index, grid.size - 1)
    known = grid[index] == np.asarray(output).ravel()
    return np.where(known, index, grid.size)  # values unseen in the selection half share one extra cell


def _describe(cells: NDArray[np.intp], grid: NDArray[Any], kind: str) -> str:
    if kind == "values":
        return "output ∈ {" + ", ".join(repr(grid[c].item()) for c in sorted(cells) if c < grid.size) + "}"
    edges = np.concatenate([[-np.inf], grid, [np.inf]])
    parts = [f"[{edges[c]:.4g}, {edges[c + 1]:.4g})" for c in sorted(cells)]
    shown = ", ".join(parts[:4]) + (f", … ({len(parts)} bins)" if len(parts) > 4 else "")
    return "output ∈ " + shown


def audit(
    mechanism: Any,
    neighbours: Sequence[Any],
    *,
    samples: int = 200_000,
    alpha: float = 0.05,
    seed: int = 0,
    bins: int = 50,
    delta: float | None = None,
) -> AuditReport:
    """Lower-bound a mechanism's ε from samples, and report it beside the claimed ε (and δ).

    Parameters
    ----------
    mechanism : object
        Anything with ``randomize(values, rng=...)`` (vectorised) and ``guarantee`` (PureDP, ApproxDP or
        GaussianDP): every mechanism of :mod:`dp_pipeline.mechanisms`.
    neighbours : pair or sequence of pairs
        Neighbouring inputs (x, x'), e.g. ``(0.0, 1.0)`` for a query of sensitivity 1, ``(l, u)`` for a
        bounded (local) mechanism, two categories for randomized response. Both orders are tried.
    samples : int
        Releases per input; the first half chooses the event, the second half measures it.
    alpha : float
        Error probability of the bound (see Notes).
    seed : int
        Seed of the AES-128 counter generator that drives the mechanism: the audit is deterministic.
    bins : int
        Cells for continuous outputs (quantiles of the pooled selection half); discrete outputs with at
        most ``bins`` distinct values are used value by value.
    delta : float, optional
        The δ at which a μ-GDP claim is turned into (ε, δ) (default 1e-5); an (ε, δ) claim uses its own δ.

    Returns
    -------
    AuditReport
        The lower bound ε̂, the claim, the chosen pair and event.

    Notes
    -----
    (ε, δ)-DP requires P[M(x) ∈ S] ≤ e^ε P[M(x') ∈ S] + δ for every event S and neighbours x, x'. The audit

    1. draws ``samples`` releases of M(x) and of M(x') for every pair, and splits each into halves;
    2. on the first half, for both orders of every pair, sorts the output cells by their estimated
       probability ratio and considers every union of the top-j cells (a likelihood-ratio threshold event,
       as DP-Sniper does), scoring each by the bound of step 3 computed on the first half; the best
       (pair, order, event) is kept;
    3. on the second half only, bounds p = P[M(x) ∈ S] from below and p' = P[M(x') ∈ S] from above with
       one-sided Clopper–Pearson intervals at level α/2 each, and reports
       ε̂ = ln((p̲ − δ)/p̄') (0 when p̲ ≤ δ).

    Guarantee: the event is chosen independently of the second half, so with probability at least 1 − α
    both bounds hold, and then (p̲ − δ)/p̄' ≤ (p − δ)/p' ≤ e^ε. Hence for a mechanism that is truly
    (ε, δ)-DP, P[ε̂ > ε] ≤ α, whatever the event chosen. The bound's power depends on the bins: ε̂ reaches
    the true ε only when some union of cells separates the outputs where the privacy loss is largest.

    References
    ----------
    Bichsel, Steffen, Bogunovic & Vechev, "DP-Sniper: black-box discovery of differential privacy
    violations using classifiers", IEEE S&P 2021.
    Ding, Wang, Wang, Zhang & Kifer, "Detecting violations of differential privacy", CCS 2018.
    Clopper & Pearson, "The use of confidence or fiducial limits illustrated in the case of the binomial",
    Biometrika 26(4), 1934.
    """
    if not 0.0 < alpha < 1.0:
        raise InvalidParameterError(f"'alpha' must lie in (0, 1), got {alpha}", "alpha")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 20:
        raise InvalidParameterError(f"'samples' must be an int ≥ 20, got {samples!r}", "samples")
    single = len(neighbours) == 2 and not _is_pair(neighbours[0])
    pairs = [tuple(neighbours)] if single else list(neighbours)
    if not pairs or any(len(p) != 2 for p in pairs):
        message = "'neighbours' must be a pair (x, x') or a sequence of pairs"
        raise InvalidParameterError(message, "neighbours")
    claimed_epsilon, claimed_delta = _claim(mechanism, delta)
    rng = secure_rng(seed)
    half = samples // 2
    inputs = list(dict.fromkeys(x for pair in pairs for x in pair))
    outputs = {}
    for x in inputs:
        released = np.asarray(mechanism.randomize(np.full(samples, x, dtype=np.asarray(x).dtype), rng=rng))
        outputs[x] = (released[:half], released[half : 2 * half])
    grid, kind = _categories([outputs[x][0] for x in inputs], bins)
    cells = grid.size + 1
    counts = {
        x: [np.bincount(_bin(part, grid, kind), minlength=cells) for part in outputs[x]] for x in inputs
    }
    best: tuple[float, tuple[Any, Any], NDArray[np.intp]] | None = None
    for a, b in pairs:
        for x, y in ((a, b), (b, a)):
            select_x, select_y = counts[x][0], counts[y][0]
            order = np.argsort(-(select_x + 0.5) / (select_y + 0.5), kind="stable")
            hits_x = np.cumsum(select_x[order])
            hits_y = np.cumsum(select_y[order])
            scores = _ratio_bound(hits_x, hits_y, half, alpha, claimed_delta)
            j = int(np.argmax(scores))
            if best is None or scores[j] > best[0]:
                best = (float(scores[j]), (x, y), order[: j + 1])
    assert best is not None
    _, (x, y), event = best
    hits_x = np.array([counts[x][1][event].sum()])
    hits_y = np.array([counts[y][1][event].sum()])
    bound = float(_ratio_bound(hits_x, hits_y, half, alpha, claimed_delta)[0])
    p_low = float(stats.beta.ppf(alpha / 2, hits_x[0], half - hits_x[0] + 1)) if hits_x[0] > 0 else 0.0
    p_high = (
        float(stats.beta.ppf(1 - alpha / 2, hits_y[0] + 1, half - hits_y[0])) if hits_y[0] < half else 1.0
    )
    return AuditReport(
        epsilon_lower_bound=max(bound, 0.0) if math.isfinite(bound) else 0.0,
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
        alpha=alpha,
        samples=samples,
        pair=(x, y),
        event=_describe(event, grid, kind),
        probabilities=(p_low, p_high),
    )


def _is_pair(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) == 2
