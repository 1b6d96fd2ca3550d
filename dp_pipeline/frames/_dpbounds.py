"""``bounds="dp"`` in the pandas functions: their arguments, and the aggregates' one fixed-cost charge.

The method, its accuracy and why the cost is fixed in advance: :mod:`dp_pipeline._learned_bounds`. A call
spends :data:`~dp_pipeline._learned_bounds.SEARCH_SHARE` (10%) of its ε on the search and the rest on its
release, and is charged once for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._learned_bounds import BoundsSearch, check_outer, search_share, worst_bounds
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.splitting import NoisePlan

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


def learn_and_charge(
    release: Any, outer: tuple[float, float], values: NDArray[np.float64], ranges: Ranges, label: str
) -> tuple[float, float, NoisePlan, PrivacyEvent]:
    """Charge an aggregate's whole call once, then learn the bounds from ``values`` (clipped to ``outer``)
    and plan the release's noise for them: (low, high, plan, charged event).

    ``release`` is the aggregate's ``_Release``; ``ranges(low, high)`` the value ranges of its parts. The
    parts are priced at the worst bounds inside ``outer`` (the largest sensitivity ratio between the
    relations), so the charge does not depend on the learned bounds.
    """
    search_epsilon, rest = search_share(release.epsilon)
    search = BoundsSearch.plan(
        search_epsilon, np.array([outer[0]]), np.array([outer[1]]), release.relation, release.m
    )
    priced = release.plan(ranges(*worst_bounds(*outer)), rest).event
    ledger = (release.accountant, release.dataset, label, release.group_size)
    low, high, event = search.charge_and_learn([values], release.rng, [priced], ledger)
    learned = float(low[0]), float(high[0])
    return *learned, release.plan(ranges(*learned), rest), event
