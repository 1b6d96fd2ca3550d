"""``bounds="dp"``: clip bounds learned with a DP quantile release inside a declared outer range.

**Method.** The call's ε is split before any data is read: :data:`SEARCH_SHARE` (10%) goes to the bound
search, the rest to the release. The search releases the :data:`SEARCH_QUANTILES` (1st and 99th
percentiles) of the column, clipped to ``outer`` and after contribution bounding, with the exponential
mechanism of :mod:`dp_pipeline.frames.quantiles` (ε_search/2 each, utility sensitivity m, the whole column
even when grouped); the learned bounds are those two grid points in order (one grid step apart at least).
The release's noise is calibrated to the sensitivities of the learned bounds at the release's ε.

**One charge, fixed in advance.** The call is charged once, before any noise is drawn, with one composite
event: the two quantile parts and the release's parts. The release's parts are priced at the ε (or ε, δ) it
is calibrated for, with the sensitivity ratios (replace-one over add/remove) of the worst bounds inside
``outer`` (a symmetric range around 0 when ``outer`` contains 0), so the cost depends on the parameters
only, never on the learned bounds, and whether the budget refuses cannot depend on the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._release import NoisePlan, declared_bounds
from dp_pipeline.accounting.composition import composite_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError

SEARCH_SHARE = 0.1
"""The share of ε spent on learning the bounds."""
SEARCH_QUANTILES = (0.01, 0.99)
"""The quantiles released as the learned bounds."""

Ranges = Callable[[float, float], list[tuple[float, float]]]


def check_outer(lower: Any, upper: Any, bounds: Any, outer: Any, name: str) -> tuple[float, float] | None:
    """The outer range with ``bounds="dp"`` (None for declared bounds), checked."""
    if bounds is None:
        return None
    if bounds != "dp":
        raise InvalidParameterError("'bounds' must be None (declared lower/upper) or 'dp'", "bounds")
    if lower is not None or upper is not None:
        raise InvalidParameterError(
            "give either 'lower'/'upper' or bounds='dp' with 'outer', not both", "bounds"
        )
    if outer is None or np.ndim(outer) != 1 or len(outer) != 2:
        raise InvalidParameterError(
            "bounds='dp' needs outer=(lo, hi), the range the bounds are learned in", "outer"
        )
    lows, highs = declared_bounds(outer[0], outer[1], [name], required=True)
    return float(lows[0]), float(highs[0])


def _shares(epsilon: float) -> tuple[float, float]:
    """(ε_search, ε_release), both rounded down so that they add up to at most ε."""
    search = epsilon * SEARCH_SHARE
    rest = epsilon - search
    while Fraction(search) + Fraction(rest) > Fraction(epsilon):
        rest = math.nextafter(rest, 0.0)
    return search, rest


def _worst(low: float, high: float) -> tuple[float, float]:
    """Bounds inside [low, high] whose sensitivity ratios are the largest: symmetric around 0 if possible."""
    if low < 0.0 < high:
        side = min(-low, high)
        return -side, side
    return low, high


def learn_and_charge(
    release: Any, outer: tuple[float, float], values: NDArray[np.float64], ranges: Ranges, label: str
) -> tuple[float, float, NoisePlan, PrivacyEvent]:
    """Charge the whole call once, then learn the bounds from ``values`` (clipped to ``outer``) and plan the
    release's noise for them: (low, high, plan, charged event)."""
    from dp_pipeline.frames import quantiles  # it builds on the aggregates, which import this module

    search, rest = _shares(release.epsilon)
    mechanism = quantiles.quantile_mechanism(search / 2.0, False, release.relation, release.m)
    parts = [mechanism.event.under(release.relation)] * len(SEARCH_QUANTILES)
    priced = release.plan(ranges(*_worst(*outer)), rest)
    event = composite_event([*parts, priced.event], release.relation)
    release.charge_event(event, label)
    grid = quantiles._grid(*outer)
    ordered = np.sort(values)
    picked = sorted(
        quantiles.select_quantile(mechanism, ordered, grid, q, release.rng) for q in SEARCH_QUANTILES
    )
    low, high = picked
    if high <= low:  # one grid step apart, inside the outer range
        step = (outer[1] - outer[0]) / (grid.size - 1)
        low, high = (low, low + step) if low + step <= outer[1] else (high - step, high)
    return low, high, release.plan(ranges(low, high), rest), event
