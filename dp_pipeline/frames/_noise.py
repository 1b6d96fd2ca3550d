"""Release whole columns for ``DataFrame.pipe``: noise on numeric columns, randomized response on answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._learned_bounds import BoundsSearch, search_share
from dp_pipeline._spending import as_spender
from dp_pipeline._splitting import NoisePlan, check_delta, check_epsilon, plan_noise
from dp_pipeline._tabular import declared_bounds, declared_sensitivity, learn_categories
from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting import Spender
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import column_list
from dp_pipeline.frames._dpbounds import learn, outer_range, whole_column
from dp_pipeline.frames._engine import Engine
from dp_pipeline.frames._registry import engine_of
from dp_pipeline.mechanisms import BinaryRandomizedResponse, KRandomizedResponse
from dp_pipeline.mechanisms.sampling import drawn_event, release_rng

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame as SparkDataFrame

RR_ATTRS = "randomized_response"  # the key of the ε (and categories) recorded in DataFrame.attrs

__all__ = ["add_noise", "randomized_response"]

_NOISES = ("laplace", "gaussian", "staircase")


def add_noise(
    df: Any,
    columns: Any,
    *,
    epsilon: float,
    accountant: Any,
    dataset: str | None = None,
    mechanism: str = "laplace",
    delta: float | None = None,
    sensitivity: Any = None,
    lower: Any = None,
    upper: Any = None,
    group_size: int = 1,
    random_state: Any = None,
    bounds: str | None = None,
    outer: Any = None,
) -> pd.DataFrame | SparkDataFrame:
    """Return a copy of ``df`` whose ``columns`` carry noise; one release, charged once, ε-DP per row.

    ``df.pipe(add_noise, ["age", "weight"], epsilon=1.0, lower={"age": 0, "weight": 30},
    upper={"age": 110, "weight": 250}, accountant=acct, dataset="patients")``

    Parameters
    ----------
    df : pandas or Spark DataFrame
        The private data; one row is one person. A Spark DataFrame gives a Spark DataFrame whose rows the
        executors randomised, checkpointed at once (see :mod:`dp_pipeline.spark`).
    columns : column name or list of names
        Numeric columns without missing values.
    epsilon : float
        ε > 0 of the whole release (every listed column of every row).
    accountant : PrivacyAccountant, DatasetHandle, Reservation or "unaccounted"
        Charged once per call, before the noise is drawn; ``"unaccounted"`` is the explicit opt-out.
    dataset : str, optional
        The dataset (budget) charged: required with a PrivacyAccountant, omitted with a handle
        (``acct.dataset("visits")``) or a reservation (see :mod:`dp_pipeline._spending`).
    mechanism : {"laplace", "gaussian", "staircase"}
        The noise; ``"gaussian"`` needs ``delta``.
    delta : float, optional
        δ for Gaussian noise.
    sensitivity : float, list or dict column → float, optional
        Δⱼ, the most one person can change column j. Default: upper − lower.
    lower, upper : float, list or dict column → float, optional
        Declared bounds; values outside are clipped before the noise. A dict may leave columns out (no bound
        on that side).
    group_size : int
        k ≥ 1: charge the release for groups of k rows (a person with up to k rows); shown in refusals and
        the history.
    random_state : None, int or numpy.random.Generator
        None (default) for fresh OS entropy at every call; a bare seed or numpy Generator raises
        PrivacyLeakWarning (for tests only); ``secure_rng(seed)`` seeds on purpose, without the warning.
    bounds : {None, "dp"}
        ``"dp"`` learns each column's bounds instead of ``lower``/``upper`` (which must then be None, as
        must ``sensitivity``): its 1st and 99th percentiles, released with 10% of ε by the exponential
        mechanism inside ``outer``; the noise is calibrated to the learned bounds (Δⱼ = upperⱼ − lowerⱼ) with
        the other 90%. One charge for both, whose cost is fixed before the data are read (see
        :mod:`dp_pipeline._learned_bounds`).
    outer : (lo, hi)
        With ``bounds="dp"``: the declared range each column's bounds are learned in; lo and hi are
        numbers, one per column, or dicts column → number.

    Returns
    -------
    DataFrame
        A copy of ``df``; the listed columns are float and noisy, the others unchanged. With
        ``bounds="dp"``, ``attrs["bounds"]`` maps each column to its learned (lower, upper), which are
        differentially private.

    Notes
    -----
    The columns share ε exactly as the scikit-learn transformers' features do: Laplace noise of scale d·Δⱼ/ε
    on column j (one d-dimensional Laplace mechanism in units of Δⱼ), Gaussian noise σΔⱼ with σ calibrated at
    L2 sensitivity √d, or staircase noise at ε/d per column. See :mod:`dp_pipeline._release`.

    References
    ----------
    Dwork, McSherry, Nissim & Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006.
    """
    engine = engine_of(df)
    names = column_list(engine, columns, "columns")
    spender = as_spender(accountant, dataset)
    if mechanism not in _NOISES:
        raise InvalidParameterError(
            f"'mechanism' must be one of {list(_NOISES)}, got {mechanism!r}", "mechanism"
        )
    labels = [str(n) for n in names]
    searched = outer_range(lower, upper, bounds, outer, labels)
    if searched is not None and sensitivity is not None:
        raise InvalidParameterError(
            "bounds='dp' calibrates the noise to the learned bounds; leave 'sensitivity' None", "sensitivity"
        )
    low, high = declared_bounds(lower, upper, labels, required=False) if searched is None else searched
    deltas = declared_sensitivity(sensitivity, low, high, labels)
    check_delta(mechanism, delta)
    total = check_epsilon(epsilon)
    search_epsilon, rest = search_share(total) if searched is not None else (0.0, total)

    def plan(widths: NDArray[np.float64]) -> NoisePlan:
        return plan_noise(mechanism, widths, epsilon=rest, delta=delta)  # type: ignore[arg-type]

    noise = plan(deltas)
    rng = release_rng(random_state, "add_noise")
    for name in names:
        engine.check_numeric(name, "columns")
    k = check_positive_int(group_size, "group_size")
    search = None if searched is None else BoundsSearch.plan(search_epsilon, low, high, "replace_one")
    event = drawn_event(noise.event if search is None else search.cost([noise.event]), rng)
    rows_rng = None if random_state is None else rng
    # made ready before the charge; with bounds="dp" the same release at the outer range, redone at the
    # learned bounds (only numbers change)
    release = engine.with_noise(names, low, high, noise.parts, rows_rng)
    if _nothing_to_release(engine, spender):
        return release.run(engine.attrs())
    attrs = engine.attrs()
    with spender.hold(event, label=f"add_noise to {labels}", group_size=k):
        if search is None:
            engine.validate()
        else:  # the columns' ranks on their grids, read by the engine (its checks run in the same job)

            def ranks(column: Any, clip: tuple[float, float], points: NDArray[np.float64]) -> Any:
                return engine.grid_ranks(whole_column(rng), column, clip, points)[0]

            low, high = learn(search, ranks, names, rng)
            noise = plan(declared_sensitivity(None, low, high, labels))
            release = engine.with_noise(names, low, high, noise.parts, rows_rng)
            learned = zip(names, low.tolist(), high.tolist(), strict=True)
            attrs["bounds"] = {name: (a, b) for name, a, b in learned}
    return release.run(attrs)


def randomized_response(
    df: Any,
    column: Any,
    *,
    epsilon: float,
    accountant: Any,
    dataset: str | None = None,
    categories: Any = None,
    group_size: int = 1,
    random_state: Any = None,
) -> pd.DataFrame | SparkDataFrame:
    """Return a copy of ``df`` whose ``column`` holds randomized-response reports; ε-DP per row, charged once.

    ``df.pipe(randomized_response, "smoker", epsilon=1.0, accountant=acct, dataset="survey")``

    Parameters
    ----------
    df : pandas or Spark DataFrame
        The private answers; one row is one person (Spark: as for :func:`add_noise`).
    column : column name
        The answer to randomise.
    epsilon : float
        ε > 0.
    accountant : PrivacyAccountant, DatasetHandle, Reservation or "unaccounted"
        Charged once per call; ``"unaccounted"`` is the explicit opt-out.
    dataset : str, optional
        The dataset (budget) charged: required with a PrivacyAccountant, omitted with a handle
        (``acct.dataset("visits")``) or a reservation (see :mod:`dp_pipeline._spending`).
    categories : list, "data" or None
        None (default): a yes/no answer, the column must hold only True/False or 0/1 (binary randomized
        response, :class:`~dp_pipeline.mechanisms.BinaryRandomizedResponse`). A list: the declared possible
        answers, k-RR (:class:`~dp_pipeline.mechanisms.KRandomizedResponse`). ``"data"``: the answers found in
        the column, with a PrivacyLeakWarning.
    group_size : int
        k ≥ 1: charge the release for groups of k rows (a person with up to k rows); shown in refusals and
        the history.
    random_state : None, int or numpy.random.Generator
        None (default) for fresh OS entropy at every call; a bare seed or numpy Generator raises
        PrivacyLeakWarning (for tests only); ``secure_rng(seed)`` seeds on purpose, without the warning.

    Returns
    -------
    DataFrame
        A copy of ``df`` with ``column`` replaced by the reports (same dtype for yes/no answers). Its
        ``attrs["randomized_response"][column]`` records ``epsilon`` (and ``categories`` for k-RR), which
        :func:`~dp_pipeline.frames.rr_share` and :func:`~dp_pipeline.frames.krr_frequencies` read.

    Raises
    ------
    InvalidParameterError
        A missing column, a missing value, or an answer that is not a declared category (naming the column
        and the values); nothing is charged.

    Notes
    -----
    Estimate the true share or distribution from the reports with :func:`dp_pipeline.frames.rr_share` or
    :func:`dp_pipeline.frames.krr_frequencies` (post-processing: no further cost).

    References
    ----------
    Warner, "Randomized response", JASA 60(309), 1965; Kairouz, Oh & Viswanath, "Extremal mechanisms for
    local differential privacy", JMLR 17, 2016.
    """
    engine = engine_of(df)
    (name,) = column_list(engine, column, "column")
    spender = as_spender(accountant, dataset)
    eps = check_epsilon(epsilon)
    mechanism: BinaryRandomizedResponse | KRandomizedResponse
    if categories is None:
        engine.check_yes_no(name)
        mechanism = BinaryRandomizedResponse(epsilon=eps)
    else:
        if isinstance(categories, str) and categories == "data":
            (categories,) = learn_categories(
                [engine.distinct_values(name)],
                "categories='data' takes the answers present in the column; which answers occur is not "
                "differentially private. Declare the categories instead",
                stacklevel=2,
            )
        try:
            mechanism = KRandomizedResponse(epsilon=eps, categories=categories)
        except InvalidParameterError as exc:
            raise InvalidParameterError(str(exc), "categories") from None
    rng = release_rng(random_state, "randomized_response")
    engine.check_answers(name, mechanism)
    k = check_positive_int(group_size, "group_size")
    release = engine.randomized(name, mechanism, None if random_state is None else rng)  # before the charge
    attrs = engine.attrs()
    if _nothing_to_release(engine, spender):
        return release.run(attrs)
    recorded: dict[str, Any] = {"epsilon": mechanism.epsilon}
    if isinstance(mechanism, KRandomizedResponse):
        recorded["categories"] = list(mechanism.categories)
    # what rr_share and krr_frequencies read
    attrs[RR_ATTRS] = {**attrs.get(RR_ATTRS, {}), name: recorded}
    event = drawn_event(mechanism.event, rng)
    with spender.hold(event, label=f"randomized_response of {name!r}", group_size=k):
        engine.validate()
    return release.run(attrs)


def _nothing_to_release(engine: Engine, spender: Spender) -> bool:
    """Whether a row-level release has no row to release: an in-memory frame without rows, under
    replace-one (the relation row-level releases run on; any other is refused when charged), where the
    number of rows is public. It is returned as it is, and nothing is charged."""
    return engine.holds_no_rows() and spender.relation() == "replace_one"
