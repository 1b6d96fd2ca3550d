"""``bounds="dp"`` in the frame functions: their arguments, and one fixed-cost charge for the search and
the release.

The method, its accuracy and why the cost is fixed in advance: :mod:`dp_pipeline._learned_bounds`. A call
spends :data:`~dp_pipeline._learned_bounds.SEARCH_SHARE` (10%) of its ε on the search and the rest on its
release, and is charged once for both. The search reads each column's ranks on its grid from the engine
(:meth:`~dp_pipeline.frames._engine.Engine.grid_ranks`, the whole column even when the release is grouped),
so it runs on any engine, inside the call's charge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._learned_bounds import BoundsSearch, check_outer, search_share, worst_bounds
from dp_pipeline._quantile import grid
from dp_pipeline._splitting import NoisePlan
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._engine import Bounding

Ranges = Callable[[float, float], list[tuple[float, float]]]


def outer_range(
    lower: Any, upper: Any, bounds: Any, outer: Any, names: Sequence[str]
) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """The outer range of each column with ``bounds="dp"`` (None for declared bounds), checked."""
    if bounds is None:
        return None
    if bounds != "dp":
        raise InvalidParameterError("'bounds' must be None (declared lower/upper) or 'dp'", "bounds")
    if lower is not None or upper is not None:
        raise InvalidParameterError(
            "give either 'lower'/'upper' or bounds='dp' with 'outer', not both", "bounds"
        )
    return check_outer(outer, names)


def search_for(
    epsilon: float, outer: tuple[NDArray[np.float64], NDArray[np.float64]], relation: Relation, m: int
) -> tuple[BoundsSearch, float]:
    """The bounds search of a call of ε = ``epsilon`` over the columns' outer ranges, and the ε left for
    the release."""
    search_epsilon, rest = search_share(epsilon)
    return BoundsSearch.plan(search_epsilon, outer[0], outer[1], relation, m), rest


def learn(
    search: BoundsSearch,
    ranks_of: Callable[[Hashable, tuple[float, float], NDArray[np.float64]], Any],
    columns: Sequence[Hashable],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The learned bounds of ``columns``: ``ranks_of(column, (lo, hi), grid)`` gives a column's ranks on
    its outer range's grid (read inside the call's charge)."""
    ranks = [
        ranks_of(column, (float(lo), float(hi)), grid(float(lo), float(hi)))
        for column, lo, hi in zip(columns, search.lower, search.upper, strict=True)
    ]
    return search.learn(ranks, rng)


def search_cost(
    release: Any, outer: tuple[float, float], ranges: Ranges
) -> tuple[BoundsSearch, PrivacyEvent]:
    """An aggregate's search and the cost of its whole call, fixed before the data is read: the search's
    quantiles and the release's parts priced at the worst bounds inside ``outer``."""
    search, rest = search_for(
        release.epsilon, (np.array([outer[0]]), np.array([outer[1]])), release.relation, release.m
    )
    priced = release.plan(ranges(*worst_bounds(*outer)), rest).event
    return search, search.cost([priced])


def learn_bounds(
    release: Any, search: BoundsSearch, column: Hashable, ranges: Ranges
) -> tuple[float, float, NoisePlan]:
    """An aggregate's learned bounds of ``column`` and the release's noise planned for them, inside the
    charge of :func:`search_cost`."""
    _, rest = search_share(release.epsilon)

    def ranks_of(name: Hashable, clip: tuple[float, float], points: NDArray[np.float64]) -> Any:
        (ranks,) = release.grid_ranks(name, clip, points, whole=True)
        return ranks

    low, high = (float(side[0]) for side in learn(search, ranks_of, [column], release.rng))
    return low, high, release.plan(ranges(low, high), rest)


def whole_column(rng: np.random.Generator) -> Bounding:
    """Every row, ungrouped: the rows a per-row release (one row per person) learns its bounds from."""
    return Bounding(None, 1, None, None, rng)
