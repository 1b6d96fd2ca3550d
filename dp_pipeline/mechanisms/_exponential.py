"""The exponential mechanism over a finite set of candidates."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field

from dp_pipeline._validation import FiniteFloat, check_array
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import Mechanism

__all__ = ["Exponential"]

Utilities = ArrayLike | Sequence[Fraction]


class Exponential(Mechanism):
    """Select a candidate r with probability ∝ w_r·exp(ε·u(r)/(2Δu)) (or ε·u(r)/Δu when ``monotone``).

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    sensitivity : float
        Δu > 0: the most one person changes any candidate's utility (under the dataset's relation).
    monotone : bool
        Whether the utilities are monotone: on neighbouring datasets every utility moves in the same
        direction (all up or all down, e.g. counts under add/remove). Then exp(ε·u/Δu) is ε-DP (McSherry &
        Talwar 2007, the remark after Thm 6). False by default: the factor 2 is kept.

    Notes
    -----
    ``select(utilities, weights)`` returns the index of the chosen candidate; ``utilities`` are finite
    floats (taken as the rationals they denote) or a list of :class:`~fractions.Fraction` (exact).
    ``weights`` are data-independent integer multiplicities (a candidate of weight w stands for w
    candidates with the same utility; the default is 1 each). For neighbouring datasets each utility
    changes by at most Δu, so each unnormalised weight changes by a factor ≤ e^{ε/2} and the normaliser
    by ≤ e^{ε/2}: the selection is
    ε-DP (McSherry & Talwar 2007, Thm 6). It is also ε-bounded range: for neighbouring datasets the log
    probability ratios of all candidates lie in an interval of width ε (each γ_r moves within ±ε/2, or
    within [0, ε] or [−ε, 0] when ``monotone``; Durfee & Rogers 2019). :attr:`event` is a pure-ε event of
    kind ``"exponential"``: spent one by one (adaptively) it costs ε; in a plan fixed in advance the
    accountant composes it as ε-bounded range, much tighter at δ > 0 (Dong, Durfee & Rogers 2020; see
    :func:`~dp_pipeline.accounting.compose_plan`).

    **Exact sampling** (rejection, not a floating-point softmax or the Gumbel-max trick): with the utilities
    taken as the rationals their floats denote, γ_r = ε(u* − u_r)/(2Δu) ≥ 0 (u* the largest utility) is
    exact; a candidate is proposed with probability w_r/Σw (an exact uniform integer) and accepted with an
    exact Bernoulli(e^{−γ_r}) from the secure sampler (:func:`~dp_pipeline.mechanisms.sampling.
    exponential_choice`). The first accepted proposal has exactly the law above, so the guarantee is the
    mathematical one, with no floating-point loss.

    **Timing channel (not covered by ε).** The sampler's running time depends on the scores. Each proposal
    is accepted with probability q = Σᵣ wᵣe^{−γᵣ} / Σᵣ wᵣ, so the number T of proposals examined is
    geometric, P(T > t) = (1 − q)^t, and the number R of vectorised rounds (16, 32, 64, … proposals, at
    most 4096 each) has P(R > r) = (1 − q)^{16(2^r − 1)} while the rounds are below 4096; T is independent
    of the candidate selected (the accepted proposal of a rejection sampler is independent of when it
    came). So what leaks is exactly the law of T, a function of the scores through q alone: q is 1 when
    the utilities are tied and about (weight of the best candidates)/Σw when one candidate is far ahead,
    so the time distinguishes "a clear winner" from "a close race", and q moves by up to a factor e^ε
    between neighbouring datasets; the time's likelihood ratio (1 − q)^t/(1 − q')^t is unbounded in t,
    so observing it is not ε-DP. Rare rounds in exact arithmetic (probability about 2⁻⁴⁰ per proposal)
    also take longer for some γᵣ. Whoever can time the call sees it: the caller, another process on the
    machine, and anyone who reads the durations of a job (an Airflow task's duration, a Spark stage's
    metrics); the quantiles and learned bounds of :mod:`dp_pipeline.frames` and the transformers (which
    use this mechanism) inherit it. Release results only, not timings, where timing is observable, or
    pad the run to a fixed duration. The law of the work is tested in
    ``tests/mechanisms/test_exponential_timing.py``.

    References
    ----------
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007.
    Durfee & Rogers, "Practical differentially private top-k selection with pay-what-you-get composition",
    NeurIPS 2019.
    Dong, Durfee & Rogers, "Optimal differential privacy composition for exponential mechanisms", ICML 2020.

    Examples
    --------
    >>> mech = Exponential(epsilon=1.0, sensitivity=1.0)
    >>> [round(p, 4) for p in mech.pmf([0.0, -2.0])]
    [0.7311, 0.2689]
    """

    event_kind = "exponential"
    epsilon: FiniteFloat = Field(gt=0.0)
    sensitivity: FiniteFloat = Field(gt=0.0)
    monotone: bool = False

    @property
    def guarantee(self) -> PureDP:
        """ε-DP."""
        return PureDP(self.epsilon)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"monotone": int(self.monotone)}

    def gammas(self, utilities: Utilities, weights: ArrayLike | None = None) -> list[Fraction]:
        """The exact exponents γ_r = ε(u* − u_r)/(2Δu) (without the 2 when ``monotone``) as rationals, u* the
        largest utility of a candidate with positive weight."""
        return self._checked(utilities, weights)[0]

    def pmf(self, utilities: Utilities, weights: ArrayLike | None = None) -> NDArray[np.float64]:
        """The probability of selecting each candidate (computed from the exact γ_r in double precision)."""
        gammas, counts = self._checked(utilities, weights)
        mass = np.array([c * math.exp(-float(g)) for g, c in zip(gammas, counts, strict=True)])
        return mass / mass.sum()

    def select(
        self, utilities: Utilities, weights: ArrayLike | None = None, rng: sampling.RNGLike = None
    ) -> int:
        """The index of one candidate, drawn exactly from :meth:`pmf` (see the class notes)."""
        gammas, counts = self._checked(utilities, weights)
        return sampling.exponential_choice(sampling.make_rng(rng), gammas, counts)

    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """:meth:`select` with ``values`` as the utilities (weights 1)."""
        return self.select(values, rng=rng)

    def _checked(self, utilities: Utilities, weights: ArrayLike | None) -> tuple[list[Fraction], list[int]]:
        exact = _exact_utilities(utilities)
        counts = [1] * len(exact)
        if weights is not None:
            raw = np.asarray(weights)
            if (
                raw.shape != (len(exact),)
                or raw.dtype.kind not in "iu"
                or np.any(raw < 0)
                or not np.any(raw > 0)
            ):
                raise InvalidParameterError(
                    "'weights' must be non-negative integers, one per utility, not all 0", "weights"
                )
            counts = [int(c) for c in raw]
            if sum(counts) >= 2**62:
                raise InvalidParameterError("the weights must sum to less than 2⁶²", "weights")
        top = max(u for u, c in zip(exact, counts, strict=True) if c > 0)
        rate = Fraction(self.epsilon) / ((1 if self.monotone else 2) * Fraction(self.sensitivity))
        return [
            rate * (top - u) if c > 0 else Fraction(0) for u, c in zip(exact, counts, strict=True)
        ], counts


def _exact_utilities(utilities: Utilities) -> list[Fraction]:
    """A list of Fractions as given, or finite floats as the rationals they denote."""
    if isinstance(utilities, (list, tuple)) and utilities and all(isinstance(u, Fraction) for u in utilities):
        return list(utilities)
    values = check_array(utilities, "utilities")
    if values.ndim != 1 or values.size == 0:
        raise InvalidParameterError("'utilities' must be a non-empty 1-D array", "utilities")
    return [Fraction(float(u)) for u in values]
