"""What the scikit-learn transformers and the pandas functions share: one release, its cost, its charge.

A *release* is one call that reads private data and returns a noisy result (a ``transform``, a ``dp_count``).
It may cover several *parts* (the columns of X, the count and the sum behind a mean). Each part has its own
sensitivity Δⱼ: the most one person can change it. The release's ε (and δ) is what the whole call costs one
person; this module splits it over the parts and builds the :class:`~dp_pipeline.events.PrivacyEvent` that
describes the whole call, so that the accountant is charged exactly once per call.

How ε is split (d parts):

* Laplace: each part gets Laplace noise of scale b·Δⱼ with b = d/ε, i.e. an ε/d-DP Laplace mechanism at
  sensitivity Δⱼ. The release is charged as one ``"composite"`` event whose parts are those d Laplace events:
  their basic composition is ε-DP, and the tight composition of a plan sees every part (ten 10-feature
  releases at ε = 1 compose to about ε = 4.7 at δ = 10⁻⁶, not 10).
* Gaussian: each part gets N(0, (σΔⱼ)²) with σ the calibration of the scalar Gaussian mechanism at L2
  sensitivity √d (the norm of the vector of d unit changes). The release is exactly that mechanism applied to
  xⱼ/Δⱼ (Gaussian noise is rotation invariant), so it is charged as its event: (ε, δ)-DP, or μ-GDP.
* Everything else (staircase, bounded, randomized response): each part gets ε/d (rounded down so that d parts
  never sum above ε) and the release is charged as the composite of the d part events, whose basic
  composition is ε-DP.

Every event states the neighbouring relation it was calibrated for: releases that add noise to each row are
private when one person's row is replaced (``"replace_one"``); the pandas aggregates calibrate to the relation
of the dataset they are charged to (:func:`dataset_relation`).

This module needs neither scikit-learn nor pandas.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._validation import check_positive_int, check_real
from dp_pipeline.accounting.composition import composite_event
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation
from dp_pipeline.exact import divide_down, split_epsilon, sqrt_up, subtract_up
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning, data_value_error
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import Gaussian, Laplace, Staircase, _sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism, Mechanism

__all__ = [
    "UNACCOUNTED",
    "NoisePlan",
    "basic_composition",
    "charge",
    "check_delta",
    "check_epsilon",
    "check_ledger",
    "clip_columns",
    "composed_event",
    "dataset_partitions",
    "dataset_relation",
    "declared_bounds",
    "declared_sensitivity",
    "kept_rng",
    "learn_categories",
    "missing_mask",
    "per_feature",
    "plan_noise",
    "release_rng",
]

UNACCOUNTED = "unaccounted"
"""The explicit opt-out: ``accountant="unaccounted"`` releases without charging any ledger."""

NoiseFamily = Literal["laplace", "gaussian", "staircase"]

M = TypeVar("M", bound=Mechanism)


class _Spender(Protocol):
    def spend(
        self, dataset: str, cost: Any, *, group_size: int = 1, label: str = "", partition: Any = None
    ) -> Any: ...


# --------------------------------------------------------------------------------------------------------
# The ledger
# --------------------------------------------------------------------------------------------------------


def check_ledger(accountant: Any, dataset: Any) -> None:
    """Check that a release knows where to be charged, or was explicitly told not to be.

    Raises
    ------
    InvalidParameterError
        Naming ``accountant`` when it is None or not an accountant, naming ``dataset`` when it is missing.
    """
    if isinstance(accountant, str) and accountant == UNACCOUNTED:
        return
    if accountant is None:
        raise InvalidParameterError(
            "no accountant: every release is charged to a privacy ledger. Pass "
            "accountant=PrivacyAccountant('sqlite:///ledger.db') and dataset='<name>', or "
            f"accountant={UNACCOUNTED!r} to release without charging any ledger (nothing then limits how "
            "often the data is released)",
            "accountant",
        )
    if not callable(getattr(accountant, "spend", None)):
        raise InvalidParameterError(
            f"'accountant' must be a PrivacyAccountant or {UNACCOUNTED!r}, got {type(accountant).__name__}",
            "accountant",
        )
    if not isinstance(dataset, str) or not dataset:
        raise InvalidParameterError(
            f"'dataset' must name the dataset whose budget the releases are charged to, got {dataset!r}",
            "dataset",
        )


def dataset_relation(accountant: Any, dataset: Any) -> Relation:
    """The neighbouring relation of the dataset a release is charged to (one read of the ledger).

    ``"unaccounted"``, or an accountant that cannot tell, gives the default relation.
    """
    read = getattr(accountant, "relation", None)
    if isinstance(accountant, str) or not callable(read):
        return DEFAULT_RELATION
    relation: Relation = read(dataset)
    return relation


def dataset_partitions(accountant: Any, dataset: Any) -> int | None:
    """L, the most partitions one person's data lie in, of the partitioned dataset a release is charged to
    (one read of the ledger); None for a dataset that is not partitioned, or ``"unaccounted"``."""
    read = getattr(accountant, "budget", None)
    if isinstance(accountant, str) or not callable(read):
        return None
    limit: int | None = getattr(read(dataset), "partitions", None)
    return limit


def charge(
    accountant: Any,
    dataset: Any,
    cost: PrivacyEvent | Guarantee,
    label: str,
    group_size: Any = 1,
    partition: Any = None,
) -> None:
    """Charge one release (for groups of ``group_size`` rows, on the partitions ``partition`` names, if
    any) to the ledger before its result exists; BudgetExceededError charges nothing."""
    k = check_positive_int(group_size, "group_size")
    if isinstance(accountant, str) and accountant == UNACCOUNTED:
        return
    spender: _Spender = accountant
    if partition is None:
        spender.spend(dataset, cost, group_size=k, label=label)
    else:
        spender.spend(dataset, cost, group_size=k, label=label, partition=partition)


def release_rng(random_state: Any, owner: str) -> np.random.Generator:
    """The generator of one release: fresh OS entropy for None, new at every call.

    An int seed or an unlabelled numpy Generator warns (PrivacyLeakWarning): anyone who knows the seed can
    regenerate the noise and subtract it, and releases seeded alike add the same noise, so their difference
    shows the data's. ``secure_rng(seed)`` and ``fast_rng(seed)`` are the labelled choices and do not warn
    (see :mod:`dp_pipeline.mechanisms._sampling`).
    """
    return _sampling.label_rng(random_state, owner, "random_state", stacklevel=3)


def kept_rng(random_state: Any, owner: str) -> np.random.Generator | None:
    """The generator a fitted object keeps for its releases: None for ``random_state=None``.

    With None nothing is kept: each release draws its own generator from :func:`release_rng`, keyed from OS
    entropy at release time, so copies of the object (pickling, ``deepcopy``, joblib workers, ``n_jobs > 1``)
    never share noise. Any other ``random_state`` is kept, with a PrivacyLeakWarning: every copy of the
    object repeats its noise. Seeds are for tests; real releases leave ``random_state=None``.
    """
    if random_state is None:
        return None
    return _sampling.label_rng(random_state, owner, "random_state", kept=True, stacklevel=3)


# --------------------------------------------------------------------------------------------------------
# Privacy parameters
# --------------------------------------------------------------------------------------------------------


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A finite ε > 0, or InvalidParameterError naming ``name``."""
    epsilon = check_real(value, name)
    if epsilon <= 0.0:
        raise InvalidParameterError(f"{name!r} must be > 0, got {epsilon}", name)
    return epsilon


def composed_event(parts: Sequence[Mechanism], relation: Relation = "replace_one") -> PrivacyEvent:
    """The cost of releasing ``parts`` together under ``relation``: the part's own event for one part, else
    the ``"composite"`` event of the parts' events (its guarantee: their basic composition, rounded up)."""
    return _whole([part.event for part in parts], relation)


def _whole(events: Sequence[PrivacyEvent], relation: Relation) -> PrivacyEvent:
    return events[0].under(relation) if len(events) == 1 else composite_event(events, relation)


def _stating(event: PrivacyEvent, replace_one: float) -> PrivacyEvent:
    """An add/remove event that also gives its sensitivity under replace-one (so that it converts exactly)."""
    parameters = {**event.parameters, "replace_one_sensitivity": replace_one}
    return event.model_copy(update={"parameters": parameters})


def basic_composition(
    epsilon: Any, parts: int, build: Callable[[float], Iterable[M]], relation: Relation = "replace_one"
) -> tuple[tuple[M, ...], PrivacyEvent]:
    """A release of ``parts`` pure-DP parts that share ``epsilon`` equally, and its cost.

    ``build(ε')`` makes the parts' mechanisms, each ε'-DP with ε' = ε/parts rounded down (see
    :func:`split_epsilon`); the cost is :func:`composed_event` of them under ``relation``, at most ε-DP.
    """
    total = check_epsilon(epsilon)
    mechanisms = tuple(build(split_epsilon(total, parts)))
    return mechanisms, composed_event(mechanisms, relation)


def check_delta(family: str, delta: Any) -> None:
    """``delta`` is given with Gaussian noise and only with it (InvalidParameterError naming ``delta``)."""
    if family == "gaussian" and delta is None:
        raise InvalidParameterError("mechanism='gaussian' needs 'delta' in (0, 1)", "delta")
    if family != "gaussian" and delta is not None:
        raise InvalidParameterError("'delta' is only used with mechanism='gaussian'", "delta")


@dataclass(frozen=True)
class NoisePlan:
    """Noise for a release of d parts: one mechanism per part (in the part's units) and the release's cost.

    Attributes
    ----------
    mechanisms : tuple of ContinuousMechanism
        Mechanism j adds the noise of part j; its scale is proportional to Δⱼ.
    event : PrivacyEvent
        What the whole release costs one person (charged once).
    """

    mechanisms: tuple[ContinuousMechanism, ...]
    event: PrivacyEvent

    @property
    def noise_std(self) -> NDArray[np.float64]:
        """The standard deviation of each part's noise (for a bounded mechanism, see :func:`_variance`)."""
        return np.sqrt(np.array([_variance(m) for m in self.mechanisms], dtype=np.float64))


def _variance(mechanism: ContinuousMechanism) -> float:
    """The noise variance; for a bounded mechanism, whose error depends on the input t, the largest
    mean-squared error E[(Y − t)² | t] over 101 points of its range."""
    variance = getattr(mechanism, "variance", None)
    if callable(variance):
        grid = np.linspace(mechanism.lower, mechanism.upper, 101)  # type: ignore[attr-defined]
        return float(np.max(mechanism.mse(grid)))  # type: ignore[attr-defined]
    return float(variance)  # type: ignore[arg-type]


def plan_noise(
    family: NoiseFamily,
    sensitivities: Sequence[float] | NDArray[np.float64],
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    calibration: str = "analytic",
    gamma: float | None = None,
    relation: Relation = "replace_one",
    replace_one: Sequence[float] | None = None,
) -> NoisePlan:
    """Calibrate the noise of a release of d parts with sensitivities Δ₁…Δ_d (see the module notes).

    Parameters
    ----------
    family : {"laplace", "gaussian", "staircase"}
        The noise distribution.
    sensitivities : sequence of float
        Δⱼ > 0 for each part: L1 for Laplace and staircase, L2 for Gaussian.
    epsilon, delta : float
        What the whole release may cost; ``delta`` only for Gaussian noise.
    mu : float
        μ of a μ-GDP Gaussian release (with ``calibration="gdp"``, instead of ε and δ).
    calibration : str
        The Gaussian calibration (see :class:`~dp_pipeline.mechanisms.Gaussian`).
    gamma : float or None
        The staircase shape (None: the optimal γ for each part's ε).
    relation : {"replace_one", "add_remove"}
        The neighbouring relation the sensitivities are for, stated by the event (row-level releases:
        ``"replace_one"``).
    replace_one : sequence of float, optional
        With ``relation="add_remove"``: each part's sensitivity under replace-one (same norm). Laplace and
        Gaussian events then state it (``parameters["replace_one_sensitivity"]``: each Laplace part's own;
        the joint Gaussian event's √Σ(Δ'ⱼ/Δⱼ)² in units of Δⱼ, rounded up), so that a replace-one dataset
        charges them exactly instead of by group privacy.

    Returns
    -------
    NoisePlan
    """
    deltas = [float(s) for s in sensitivities]
    d = len(deltas)
    if family == "laplace":
        total = check_epsilon(epsilon)
        eps = split_epsilon(total, d)
        laplace = tuple(Laplace(epsilon=eps, sensitivity=s) for s in deltas)
        events = [m.event for m in laplace]
        if replace_one is not None:
            events = [_stating(e, float(other)) for e, other in zip(events, replace_one, strict=True)]
        return NoisePlan(laplace, _whole(events, relation))
    if family == "gaussian":
        norm = sqrt_up(d)  # the L2 sensitivity √d in units of Δⱼ, rounded up
        if calibration == "gdp":
            joint = Gaussian(calibration="gdp", mu=mu, sensitivity=norm)
        else:
            joint = Gaussian(epsilon=epsilon, delta=delta, sensitivity=norm, calibration=calibration)  # type: ignore[arg-type]
        unit_mu = divide_down(1.0, joint.sigma)  # rounded down: each part's σ = Δⱼ/μ (up) is at least Δⱼ·σ
        gaussian = tuple(Gaussian.from_mu(mu=unit_mu, sensitivity=s) for s in deltas)
        event = joint.event
        if replace_one is not None:
            units = (Fraction(other) / Fraction(s) for other, s in zip(replace_one, deltas, strict=True))
            event = _stating(event, sqrt_up(sum((u * u for u in units), Fraction(0))))
        return NoisePlan(gaussian, event.under(relation))
    if family == "staircase":
        return NoisePlan(
            *basic_composition(
                epsilon,
                d,
                lambda share: (Staircase(epsilon=share, sensitivity=s, gamma=gamma) for s in deltas),
                relation,
            )
        )
    raise InvalidParameterError(
        f"unknown noise {family!r}; use 'laplace', 'gaussian' or 'staircase'", "mechanism"
    )


# --------------------------------------------------------------------------------------------------------
# Missing values and categories
# --------------------------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    """None, NaN (float or numpy float), pandas.NA and NaT count as missing."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(math.isnan(value))
    return type(value).__name__ in {"NAType", "NaTType"}


def missing_mask(column: NDArray[Any]) -> NDArray[np.bool_]:
    """Which entries of a 1-d array are missing (see :func:`_is_missing`)."""
    if column.dtype.kind == "f":
        return np.isnan(column)
    if column.dtype.kind == "O":
        return np.fromiter(map(_is_missing, column), dtype=bool, count=column.size)
    return np.zeros(column.shape, dtype=bool)


def learn_categories(columns: Iterable[NDArray[Any]], warning: str, *, stacklevel: int) -> list[list[Any]]:
    """``categories="data"``: each column's distinct non-missing values, in the order they first occur.

    Which values occur is not differentially private, so this raises PrivacyLeakWarning with the text
    ``warning``; ``stacklevel`` counts from the caller, as for :func:`warnings.warn`.
    """
    warnings.warn(warning, PrivacyLeakWarning, stacklevel=stacklevel + 1)
    learned = []
    for column in columns:
        values = column[~missing_mask(column)].tolist()
        unhashable = sum(not _hashable(v) for v in values)
        if unhashable:
            raise data_value_error(
                "categories='data'", unhashable, "unhashable (e.g. lists), so not categories", "categories"
            )
        learned.append(list(dict.fromkeys(values)))
    return learned


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------------------------------------------
# Declared bounds
# --------------------------------------------------------------------------------------------------------


def per_feature(
    value: Any, names: Sequence[str], name: str, *, default: float | None = None
) -> NDArray[np.float64]:
    """One finite real per feature: a scalar, a sequence aligned with ``names``, or a mapping name → value.

    A mapping may leave features out; they get ``default`` (an error when ``default`` is None).
    """
    n = len(names)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return np.full(n, check_real(value, name))
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in names]
        if unknown:
            raise InvalidParameterError(
                f"{name!r} names unknown feature(s) {unknown}; features are {list(names)}", name
            )
        missing = [key for key in names if key not in value]
        if missing and default is None:
            raise InvalidParameterError(f"{name!r} gives no value for feature(s) {missing}", name)
        return np.array(
            [check_real(value[key], name) if key in value else default for key in names], dtype=np.float64
        )
    if isinstance(value, (str, bytes)) or not np.iterable(value):
        raise InvalidParameterError(
            f"{name!r} must be a real number or one per feature ({n}), got {value!r}", name
        )
    items = list(value)
    if len(items) != n:
        raise InvalidParameterError(f"{name!r} has {len(items)} entries for {n} feature(s)", name)
    return np.array([check_real(item, name) for item in items], dtype=np.float64)


def declared_bounds(
    lower: Any, upper: Any, names: Sequence[str], *, required: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The declared bounds of each feature (±inf where a side is None), checked: lower < upper everywhere.

    With ``required`` both bounds must be finite for every feature (InvalidParameterError naming the missing
    side otherwise).
    """
    low = (
        per_feature(lower, names, "lower", default=-np.inf)
        if lower is not None
        else np.full(len(names), -np.inf)
    )
    high = (
        per_feature(upper, names, "upper", default=np.inf)
        if upper is not None
        else np.full(len(names), np.inf)
    )
    if required:
        for side, array in (("lower", low), ("upper", high)):
            if not np.isfinite(array).all():
                feature = names[int(np.flatnonzero(~np.isfinite(array))[0])]
                raise InvalidParameterError(
                    f"declare a finite {side!r} bound for feature {feature!r}: this release needs both "
                    "bounds of every feature, known without looking at the data",
                    side,
                )
    bad = np.flatnonzero(~(high > low))
    if bad.size:
        j = int(bad[0])
        raise InvalidParameterError(
            f"'upper' must exceed 'lower' for every feature; {names[j]!r} has [{low[j]}, {high[j]}]", "upper"
        )
    return low, high


def declared_sensitivity(
    sensitivity: Any, lower: NDArray[np.float64], upper: NDArray[np.float64], names: Sequence[str]
) -> NDArray[np.float64]:
    """Δⱼ of each feature: the declared ``sensitivity``, or upperⱼ − lowerⱼ (rounded up) when it is None."""
    if sensitivity is None:
        width = upper - lower
        if not np.isfinite(width).all():
            feature = names[int(np.flatnonzero(~np.isfinite(width))[0])]
            raise InvalidParameterError(
                "declare 'sensitivity' (the most one person can change a value), or both 'lower' and "
                f"'upper' (the sensitivity is then upper − lower); feature {feature!r} has neither",
                "sensitivity",
            )
        return np.array([subtract_up(float(u), float(lo)) for lo, u in zip(lower, upper, strict=True)])
    values = per_feature(sensitivity, names, "sensitivity")
    if not (values > 0).all():
        raise InvalidParameterError(f"'sensitivity' must be > 0, got {sensitivity!r}", "sensitivity")
    return values


def _scalar_if_constant(bounds: NDArray[np.float64] | None) -> NDArray[np.float64] | float | None:
    """One number when every feature has the same bound (a scalar clips faster than a broadcast array)."""
    if bounds is not None and bounds.size and np.all(bounds == bounds[0]):
        return float(bounds[0])
    return bounds


def clip_columns(
    X: NDArray[np.float64], lower: NDArray[np.float64] | None, upper: NDArray[np.float64] | None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Clip each column of ``X`` to [lowerⱼ, upperⱼ] (a bound may be None) and count the clipped values.

    Returns the clipped array (``X`` itself when there are no bounds; ``X`` is never modified) and the number
    of values clipped in each column.
    """
    if lower is None and upper is None:
        return X, np.zeros(X.shape[1], dtype=np.int64)
    clipped = np.clip(X, _scalar_if_constant(lower), _scalar_if_constant(upper))
    changed = clipped != X
    if not np.count_nonzero(changed):  # the usual case: nothing to count per column
        return clipped, np.zeros(X.shape[1], dtype=np.int64)
    # column by column: faster than count_nonzero(axis=0), which reduces across a C-ordered array slowly
    counts = [np.count_nonzero(changed[:, j]) for j in range(X.shape[1])]
    return clipped, np.array(counts, dtype=np.int64)
