"""How a release of several parts splits its budget: the :class:`~dp_pipeline.mechanisms.Composite` it is.

A release (a ``transform``, a ``dp_mean``) may cover several *parts*: the columns of X, the count and the sum
behind a mean. Each part has its own sensitivity Δⱼ, the most one person can change it. The release's ε
(and δ) is what the whole call costs one person; the functions here split it over the d parts and return
the release as one composite mechanism, whose event is charged once.

* Laplace: each part gets Laplace noise of scale b·Δⱼ with b = d/ε, i.e. an ε/d-DP Laplace mechanism at
  sensitivity Δⱼ (ε/d rounded down, :func:`~dp_pipeline._exact.split_epsilon`). The event is the
  ``"composite"`` of those d Laplace events: their basic composition is ε-DP, and the tight composition of
  a plan sees every part (ten 10-feature releases at ε = 1 compose to about ε = 4.7 at δ = 10⁻⁶, not 10).
* Gaussian: each part gets N(0, (σΔⱼ)²) with σ = √d·σ₁ (rounded up), σ₁ the calibration of the scalar
  Gaussian mechanism at unit sensitivity: the Gaussian mechanism at L2 sensitivity √d (the norm of the
  vector of d unit changes). The release is a post-processing of the unit mechanism applied to
  xⱼ/(Δⱼ√d) (Gaussian noise is rotation invariant), so its event is the unit mechanism's ("joint"):
  (ε, δ)-DP, or μ-GDP, the same event whatever d (:func:`declared_cost`).
* Everything else (staircase, bounded, randomized response): each part gets ε/d (rounded down) and the
  event is the composite of the d part events, whose basic composition is ε-DP.

Every event states the neighbouring relation it was calibrated for: releases that add noise to each row
are private when one person's row is replaced (``"replace_one"``); the pandas aggregates calibrate to the
relation of the dataset they are charged to (:meth:`~dp_pipeline.accounting._spender.Spender.relation`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, Literal, TypeAlias, TypeVar

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._exact import divide_down, float_up, split_epsilon, sqrt_up
from dp_pipeline._validation import check_real
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import Composite, ContinuousMechanism, Gaussian, Laplace, Mechanism, Staircase

__all__ = [
    "NoiseFamily",
    "NoisePlan",
    "basic_composition",
    "check_delta",
    "check_epsilon",
    "declared_cost",
    "plan_noise",
]

NoiseFamily = Literal["laplace", "gaussian", "staircase"]

NoisePlan: TypeAlias = Composite[ContinuousMechanism]
"""The noise of a release whose parts add noise to real values (what :func:`plan_noise` returns)."""

M = TypeVar("M", bound=Mechanism)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A finite ε > 0, or InvalidParameterError naming ``name``."""
    epsilon = check_real(value, name)
    if epsilon <= 0.0:
        raise InvalidParameterError(f"{name!r} must be > 0, got {epsilon}", name)
    return epsilon


def check_delta(family: str, delta: Any) -> None:
    """``delta`` is given with Gaussian noise and only with it (InvalidParameterError naming ``delta``)."""
    if family == "gaussian" and delta is None:
        raise InvalidParameterError("mechanism='gaussian' needs 'delta' in (0, 1)", "delta")
    if family != "gaussian" and delta is not None:
        raise InvalidParameterError("'delta' is only used with mechanism='gaussian'", "delta")


def basic_composition(
    epsilon: Any, parts: int, build: Callable[[float], Iterable[M]], relation: Relation = "replace_one"
) -> Composite[M]:
    """A release of ``parts`` pure-DP parts that share ``epsilon`` equally.

    ``build(ε')`` makes the parts' mechanisms, each ε'-DP with ε' = ε/parts rounded down (see
    :func:`~dp_pipeline._exact.split_epsilon`); the release is their
    :class:`~dp_pipeline.mechanisms.Composite` under ``relation``, at most ε-DP.
    """
    total = check_epsilon(epsilon)
    return Composite(parts=tuple(build(split_epsilon(total, parts))), relation=relation)


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
        With ``relation="add_remove"``: each part's sensitivity under replace-one (same norm), stated by
        Laplace and Gaussian events (see :class:`~dp_pipeline.mechanisms.Composite`) so that a replace-one
        dataset charges them exactly instead of by group privacy; staircase noise does not state it.

    Returns
    -------
    Composite
        One mechanism per part (in the part's units, scale proportional to Δⱼ) and the release's event.
    """
    deltas = [float(s) for s in sensitivities]
    d = len(deltas)
    stated = None if replace_one is None else tuple(float(other) for other in replace_one)
    if family == "laplace":
        eps = split_epsilon(check_epsilon(epsilon), d)
        laplace = tuple(Laplace(epsilon=eps, sensitivity=s) for s in deltas)
        return Composite(parts=laplace, relation=relation, replace_one=stated)
    if family == "gaussian":
        joint = _unit_gaussian(epsilon, delta, mu, calibration)
        # σ = √d·σ₁, both rounded up; each part's σ = Δⱼ/μ (μ rounded down) is at least Δⱼ·σ
        unit_mu = divide_down(1.0, float_up(Fraction(sqrt_up(d)) * Fraction(joint.sigma)))
        gaussian = tuple(Gaussian.from_mu(mu=unit_mu, sensitivity=s) for s in deltas)
        return Composite(parts=gaussian, relation=relation, joint=joint, replace_one=stated)
    if family == "staircase":
        return basic_composition(
            epsilon,
            d,
            lambda share: (Staircase(epsilon=share, sensitivity=s, gamma=gamma) for s in deltas),
            relation,
        )
    raise InvalidParameterError(
        f"unknown noise {family!r}; use 'laplace', 'gaussian' or 'staircase'", "mechanism"
    )


def _unit_gaussian(epsilon: Any, delta: Any, mu: Any, calibration: str) -> Gaussian:
    """The Gaussian mechanism of unit sensitivity with the release's ε and δ (or μ)."""
    if calibration == "gdp":
        return Gaussian(calibration="gdp", mu=mu, sensitivity=1.0)
    return Gaussian(epsilon=epsilon, delta=delta, sensitivity=1.0, calibration=calibration)  # type: ignore[arg-type]


def declared_cost(
    family: str, epsilon: Any, *, delta: Any = None, mu: Any = None, calibration: str = "analytic"
) -> PrivacyEvent:
    """What one release of any number of parts costs at most, from its parameters alone (before the parts
    are known), stating ``"replace_one"``.

    Gaussian noise: the unit mechanism's event, which is the event of every release of :func:`plan_noise`
    with these parameters. Every other family: pure ε-DP (d parts of ε/d rounded down compose to at most
    ε, and pure ε-DP implies the μ of ``PureDP(ε).to_gdp()``, at least the parts' √Σμⱼ²).
    """
    if family == "gaussian":
        return _unit_gaussian(epsilon, delta, mu, calibration).event.under("replace_one")
    return PrivacyEvent(kind="guarantee", guarantee=PureDP(check_epsilon(epsilon)), relation="replace_one")
