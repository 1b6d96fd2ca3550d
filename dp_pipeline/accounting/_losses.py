"""The exact privacy-loss distribution of one event, after checking the event against its noise.

Private to :mod:`dp_pipeline.accounting`: :mod:`~dp_pipeline.accounting._analysis.composition` (group
privacy, μ-GDP), :mod:`~dp_pipeline.accounting._analysis.pld` (tight plan composition) and
:mod:`~dp_pipeline.accounting._relations` read an event through :func:`_event_loss`. A Laplace, Gaussian or
randomized-response event is described by its noise parameters, and its claimed guarantee must be implied by
them (up to rounding); an exponential-mechanism event is ε-bounded range (Durfee & Rogers 2019); every other
kind is known by its guarantee only, through the dominating pair of its guarantee (Meiser & Mohammadi 2018;
Zhu, Dong & Wang 2022).

References
----------
Meiser & Mohammadi, "Tight on budget? Tight bounds for r-fold approximate differential privacy", CCS 2018.
Durfee & Rogers, "Practical differentially private top-k selection with pay-what-you-get composition",
NeurIPS 2019 (bounded range).
Zhu, Dong & Wang, "Optimal accounting of differential privacy via characteristic function", AISTATS 2022
(dominating pairs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import special

from dp_pipeline._exact import divide_up
from dp_pipeline._validation import check_real
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

# Tolerances of the check that an event's guarantee is implied by its noise parameters: they absorb the
# rounding of the mechanisms' own arithmetic (a few ulps; for δ, the 1e-10 margin of gaussian_log_delta),
# not any real discrepancy. A Laplace event is charged the exact loss of its noise (rules/_sums.py), so a
# claim inside the tolerance is never what it pays.
_REL_TOL = 1e-9
_ABS_TOL = 1e-12
_DELTA_REL_TOL = 1e-9


# --------------------------------------------------------------------------------------------------
# input checks


def _check_delta(delta: Any) -> float:
    value = check_real(delta, "delta")
    if not 0.0 <= value < 1.0:
        raise InvalidParameterError(f"'delta' must lie in [0, 1), got {value}", "delta")
    return value


def _parameter(event: PrivacyEvent, key: str) -> float:
    if key not in event.parameters:
        raise InvalidParameterError(
            f"a {event.kind!r} event needs the parameter {key!r}; got {sorted(event.parameters)}", "events"
        )
    value = check_real(event.parameters[key], key)
    return value


def _positive_parameter(event: PrivacyEvent, key: str) -> float:
    value = _parameter(event, key)
    if value <= 0.0:
        raise InvalidParameterError(f"the {event.kind!r} event's {key!r} must be > 0, got {value}", key)
    return value


def _sensitivity(event: PrivacyEvent) -> float:
    if event.sensitivity is None:
        raise InvalidParameterError(f"a {event.kind!r} event needs its sensitivity", "sensitivity")
    return event.sensitivity


def _pure_epsilon(guarantee: Guarantee) -> float | None:
    """ε of a pure guarantee (PureDP or ApproxDP with δ = 0), else None."""
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon
    if isinstance(guarantee, ApproxDP) and guarantee.delta == 0.0:
        return guarantee.epsilon
    return None


def _claim_covers(claimed: float, exact: float) -> bool:
    return claimed >= exact - (_REL_TOL * exact + _ABS_TOL)


def _inconsistent(event: PrivacyEvent, detail: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"the {event.kind!r} event's guarantee {event.guarantee!r} is not implied by its noise parameters "
        f"({detail}); the event is corrupt or was built by hand",
        "events",
    )


# --------------------------------------------------------------------------------------------------
# the privacy loss of one event


@dataclass(frozen=True)
class _LaplaceLoss:
    scale: float
    sensitivity: float


@dataclass(frozen=True)
class _GaussianLoss:
    sigma: float
    sensitivity: float


@dataclass(frozen=True)
class _DiscreteLoss:
    """A privacy-loss distribution with finitely many values: loss ``losses[i]`` with probability
    ``probs[i]`` under the first distribution, and +∞ with probability ``infinity_mass``."""

    losses: tuple[float, ...]
    probs: tuple[float, ...]
    infinity_mass: float


@dataclass(frozen=True)
class _BoundedRangeLoss:
    """An ε-bounded-range mechanism (the exponential mechanism at ε): for every pair of neighbours the
    privacy loss ln(P(y)/Q(y)) lies in [t − ε, t] for some t ∈ [0, ε] (Durfee & Rogers 2019)."""

    epsilon: float


_Loss = _LaplaceLoss | _GaussianLoss | _DiscreteLoss | _BoundedRangeLoss
_IDENTITY = _DiscreteLoss((0.0,), (1.0,), 0.0)


def _rr_log_ratio(p_true: float, p_other: float) -> float:
    return abs(math.log(p_true) - math.log(p_other))


def _guarantee_loss(guarantee: Guarantee) -> _Loss:
    """The worst-case privacy-loss distribution of a guarantee (Meiser & Mohammadi 2018; the dominating
    pair of (ε, δ)-DP: loss +∞ w.p. δ, ±ε w.p. (1 − δ)/(1 + e^{∓ε}); of μ-GDP: N(0, 1) vs N(μ, 1))."""
    if isinstance(guarantee, GaussianDP):
        return _IDENTITY if guarantee.mu == 0.0 else _GaussianLoss(1.0 / guarantee.mu, 1.0)
    approx = guarantee.to_approx_dp() if isinstance(guarantee, PureDP) else guarantee
    assert isinstance(approx, ApproxDP)
    eps, delta = approx.epsilon, approx.delta
    if eps == 0.0:
        return _DiscreteLoss((0.0,), (1.0 - delta,), delta)
    return _DiscreteLoss(
        (-eps, eps),
        ((1.0 - delta) * float(special.expit(-eps)), (1.0 - delta) * float(special.expit(eps))),
        delta,
    )


def _event_loss(event: PrivacyEvent) -> _Loss:
    """Validate an event and return the exact privacy-loss distribution of its noise.

    Laplace, Gaussian and randomized-response events are described by their noise parameters; their
    guarantee must be implied by those parameters (up to rounding), otherwise the event is rejected.
    Every other kind is known by its guarantee only.
    """
    if not isinstance(event, PrivacyEvent):
        raise InvalidParameterError(f"'event' must be a PrivacyEvent, got {type(event).__name__}", "event")
    guarantee = event.guarantee
    if event.kind == "laplace":
        scale, sensitivity = _positive_parameter(event, "scale"), _sensitivity(event)
        loss = sensitivity / scale
        eps = _pure_epsilon(guarantee)
        if eps is None or not _claim_covers(eps, loss):
            raise _inconsistent(
                event, f"Laplace noise of scale {scale} at sensitivity {sensitivity} is exactly {loss}-DP"
            )
        return _LaplaceLoss(scale, sensitivity)
    if event.kind == "gaussian":
        sigma, sensitivity = _positive_parameter(event, "sigma"), _sensitivity(event)
        mu = divide_up(sensitivity, sigma)
        exact = GaussianDP(mu)
        detail = f"Gaussian noise of σ = {sigma} at sensitivity {sensitivity} is exactly {mu}-GDP"
        if isinstance(guarantee, GaussianDP):
            if not _claim_covers(guarantee.mu, mu):
                raise _inconsistent(event, detail)
        elif isinstance(guarantee, ApproxDP) and guarantee.delta > 0.0:
            if guarantee.delta < exact.delta(guarantee.epsilon) * (1.0 - _DELTA_REL_TOL):
                raise _inconsistent(event, detail)
        else:
            raise _inconsistent(event, detail + ", never pure ε-DP")
        return _GaussianLoss(sigma, sensitivity)
    if event.kind == "randomized_response":
        raw_k = _parameter(event, "categories")
        if raw_k != int(raw_k) or raw_k < 2:
            raise InvalidParameterError(f"'categories' must be an integer ≥ 2, got {raw_k}", "categories")
        k = int(raw_k)
        p_true, p_other = _parameter(event, "p_true"), _parameter(event, "p_other")
        if not (0.0 < p_true <= 1.0 and 0.0 < p_other <= 1.0):
            raise InvalidParameterError(
                f"'p_true' and 'p_other' must lie in (0, 1], got {p_true} and {p_other}", "p_true"
            )
        if abs(p_true + (k - 1) * p_other - 1.0) > 1e-9:
            raise InvalidParameterError(
                f"p_true + (k − 1)·p_other must be 1, got {p_true} + {k - 1}·{p_other}", "p_true"
            )
        log_ratio = _rr_log_ratio(p_true, p_other)
        eps = _pure_epsilon(guarantee)
        if eps is None or not _claim_covers(eps, log_ratio):
            raise _inconsistent(
                event, f"randomized response with these probabilities is exactly {log_ratio}-DP"
            )
        if p_true == p_other:
            return _IDENTITY
        # the pair of inputs x ≠ x' (all pairs are alike): report x, x', or one of the k − 2 others
        signed = math.log(p_true) - math.log(p_other)
        if k == 2:
            return _DiscreteLoss((-signed, signed), (p_other, p_true), 0.0)
        return _DiscreteLoss((-signed, 0.0, signed), (p_other, (k - 2) * p_other, p_true), 0.0)
    if event.kind == "exponential":  # ε-DP and ε-bounded range (see _bounded_range_profile)
        eps = _pure_epsilon(guarantee)
        if eps is None:
            raise _inconsistent(event, "the exponential mechanism is pure ε-DP")
        return _IDENTITY if eps == 0.0 else _BoundedRangeLoss(eps)
    return _guarantee_loss(guarantee)
