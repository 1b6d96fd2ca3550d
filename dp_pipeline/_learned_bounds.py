"""``bounds="dp"``: each column's clip bounds learned by a DP quantile release inside a declared outer range.

Shared by the pandas functions (``dp_sum``, ``dp_mean``, ``add_noise``) and the scikit-learn transformers;
needs neither pandas nor scikit-learn.

**Method.** The *search* releases the :data:`SEARCH_QUANTILES` (the 1st and 99th percentiles) of each
column, clipped to its declared outer range [lo, hi], with the exact grid quantile of
:mod:`dp_pipeline._quantile` (2¹⁶ + 1 candidates spanning [lo, hi], utility sensitivity m, the whole column
even when a release is grouped). With d columns the search's ε is split evenly over its 2d quantiles
(ε_search/(2d) each, rounded down). A column's learned bounds are its two released grid points in order,
one grid step ((hi − lo)/2¹⁶) apart at least, inside [lo, hi].

**Accuracy.** Each learned bound's rank in the column is, with probability at least 1 − β, within
ρ = (2m/ε_q)·(ln(2¹⁶ + 1) + ln(1/β)) of its target rank (n/100 or 99n/100), ε_q = ε_search/(2d), up to ½
rank for the grid (:mod:`dp_pipeline._quantile`). For example one column, n = 10⁴ rows, ε_search = 0.1
(the default share of ε = 1): ρ ≈ 630 ranks at β = 0.01, i.e. each learned bound lies between the 0th and
the 7.3th (the 92.7th and the 100th) percentile. With few rows or a small ε the bounds are loose: they stay
inside the outer range, so the release stays as private, only noisier or more clipped.

**Cost, fixed before the data are read.** The search costs its 2d exponential events, pure ε_search in
total (and each ε-bounded range, which plan pricing uses). A release that learns its bounds charges them
together with its own parts as one composite event, before anything is read; its own parts are priced at
the outer range (:func:`worst_bounds` where the relation makes the price depend on the bounds), so the
charge, and whether the budget refuses it, never depend on the data. The noise is then calibrated to the
learned bounds at the same ε: Laplace, Gaussian and staircase noise scaled to a range lose the same
privacy whatever its width, so the release's loss is the one priced.

References
----------
Smith, "Privacy-preserving statistical estimation with optimal convergence rates", STOC 2011.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._exact import split_epsilon
from dp_pipeline._quantile import grid, quantile_mechanism, ranks_of, select_from_ranks
from dp_pipeline._spending import as_spender
from dp_pipeline._tabular import declared_bounds
from dp_pipeline._validation import check_positive_int
from dp_pipeline.events import PrivacyEvent, Relation, composite_event
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.mechanisms import Exponential

__all__ = [
    "SEARCH_QUANTILES",
    "SEARCH_SHARE",
    "BoundsSearch",
    "check_outer",
    "search_share",
    "worst_bounds",
]

SEARCH_SHARE = 0.1
"""The share of a call's ε spent on learning its bounds (when the call splits one ε)."""
SEARCH_QUANTILES = (0.01, 0.99)
"""The quantiles released as the learned bounds."""


def check_outer(outer: Any, names: Sequence[str]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The declared outer range of each column: ``outer=(lo, hi)``, each a number, one per column or a
    mapping column → number; both finite and lo < hi (InvalidParameterError naming ``outer``)."""
    if not isinstance(outer, (tuple, list)) or len(outer) != 2:
        raise InvalidParameterError(
            "bounds='dp' needs outer=(lo, hi), the declared range the bounds are learned in (a number, one "
            f"per column or a dict for each side), got {type(outer).__name__}",
            "outer",
        )
    try:
        return declared_bounds(outer[0], outer[1], names, required=True)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"'outer' = (lo, hi): {exc}", "outer") from None


def search_share(epsilon: float) -> tuple[float, float]:
    """(ε_search, ε_release): :data:`SEARCH_SHARE` of ``epsilon`` and the rest, both rounded down so that
    they add up to at most ``epsilon``."""
    search = epsilon * SEARCH_SHARE
    rest = epsilon - search
    while Fraction(search) + Fraction(rest) > Fraction(epsilon):
        rest = math.nextafter(rest, 0.0)
    return search, rest


def worst_bounds(low: float, high: float) -> tuple[float, float]:
    """The bounds inside [low, high] whose replace-one/add-remove sensitivity ratio is the largest: a range
    symmetric around 0 when [low, high] contains 0, else [low, high] itself."""
    if low < 0.0 < high:
        side = min(-low, high)
        return -side, side
    return low, high


@dataclass(frozen=True, eq=False)
class BoundsSearch:
    """The DP quantile release that learns the bounds of d columns: 2d exponential mechanisms.

    Attributes
    ----------
    mechanism : Exponential
        The mechanism of each quantile (ε_search/(2d), utility sensitivity m).
    lower, upper : ndarray of shape (d,)
        The declared outer range of each column.
    relation : {"replace_one", "add_remove"}
        The neighbouring relation the events state.
    """

    mechanism: Exponential
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    relation: Relation

    @classmethod
    def plan(
        cls,
        epsilon: float,
        lower: NDArray[np.float64],
        upper: NDArray[np.float64],
        relation: Relation,
        m: int = 1,
    ) -> BoundsSearch:
        """The search of ε = ``epsilon`` in total over the columns' outer ranges, m rows per person."""
        per_quantile = split_epsilon(epsilon, len(SEARCH_QUANTILES) * lower.size)
        return cls(quantile_mechanism(per_quantile, False, relation, m), lower, upper, relation)

    @property
    def events(self) -> list[PrivacyEvent]:
        """The search's cost: one exponential event per quantile."""
        return [self.mechanism.event.under(self.relation)] * (len(SEARCH_QUANTILES) * self.lower.size)

    def charge_and_learn(
        self,
        columns: Sequence[NDArray[np.float64]],
        rng: np.random.Generator,
        release: Sequence[PrivacyEvent],
        ledger: tuple[Any, Any, str, Any],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], PrivacyEvent]:
        """Charge the search with the ``release`` events priced in advance as one composite event to
        ``ledger`` = (accountant, dataset, label, group_size), then learn the bounds of ``columns`` (each
        column's values): (lower, upper, charged event)."""
        accountant, dataset, label, group_size = ledger
        event = self.cost(release)
        k = check_positive_int(group_size, "group_size")
        with as_spender(accountant, dataset).hold(event, label=label, group_size=k):
            ranks = [
                ranks_of(np.sort(np.clip(values, lo, hi)), grid(float(lo), float(hi)))
                for values, lo, hi in zip(columns, self.lower, self.upper, strict=True)
            ]
        return *self.learn(ranks, rng), event

    def cost(self, release: Sequence[PrivacyEvent]) -> PrivacyEvent:
        """The one charge of a call that learns its bounds: the search's events and the ``release`` events
        priced in advance, as one composite event."""
        return composite_event([*self.events, *release], self.relation)

    def learn(
        self, ranks: Sequence[NDArray[np.int64]], rng: np.random.Generator
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The learned (lower, upper) of each column from its ranks on its outer range's grid
        (:func:`~dp_pipeline._quantile.ranks_of`: #{x < cₖ} at each grid point, then n), after the charge."""
        learned = [
            self._learn(column, float(lo), float(hi), rng)
            for column, lo, hi in zip(ranks, self.lower, self.upper, strict=True)
        ]
        lower, upper = (np.array(side, dtype=np.float64) for side in zip(*learned, strict=True))
        return lower, upper

    def _learn(
        self, ranks: NDArray[np.int64], lo: float, hi: float, rng: np.random.Generator
    ) -> tuple[float, float]:
        candidates = grid(lo, hi)
        low, high = sorted(
            select_from_ranks(self.mechanism, ranks, candidates, q, rng) for q in SEARCH_QUANTILES
        )
        if high <= low:  # one grid step apart, inside the outer range
            step = (hi - lo) / (candidates.size - 1)
            low, high = (low, low + step) if low + step <= hi else (high - step, high)
        return low, high
