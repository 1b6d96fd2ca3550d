"""Composition of privacy guarantees and events: basic, μ-GDP and group privacy.

Pure functions: no I/O, no state. Group size is applied by the caller with :func:`group_event` before
composing. Which rule is valid depends on how the spends arrive:

- **basic composition** (:func:`compose_basic`) is valid when each release is chosen adaptively after the
  earlier results are known;
- **μ-GDP composition** (:func:`compose_gdp`, :func:`compose_plan_gdp`) is exact for Gaussian noise and
  valid adaptively as a privacy filter (stop once Σμᵢ² would exceed μ²);
- **PLD and bounded-range composition** (:func:`~dp_pipeline.accounting.compose_plan`) are
  tight, and valid for a plan whose releases are all fixed before any of them runs (e.g. the declared tasks
  of a DAG); they live in :mod:`dp_pipeline.accounting._analysis.pld`.

All results round toward more privacy loss. :func:`compose_basic` and :func:`compose_gdp` live with the
guarantees (:mod:`dp_pipeline.guarantees`) and :func:`composite_event` with the events
(:mod:`dp_pipeline.events`), so that a composite mechanism builds its event without importing the
accounting; they are exported here too.

References
----------
Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Thm 3.16 (basic composition).
Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022, Cor. 3.3 (μ-GDP composition).
Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special

from dp_pipeline._exact import divide_up, times_up
from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting._losses import (
    _check_delta,
    _event_loss,
    _GaussianLoss,
    _LaplaceLoss,
    _pure_epsilon,
)
from dp_pipeline.events import PrivacyEvent, check_events, composite_event, flatten_events
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import (
    ApproxDP,
    GaussianDP,
    Guarantee,
    PureDP,
    check_guarantee,
    compose_basic,
    compose_gdp,
)

__all__ = [
    "PRICING",
    "Composition",
    "as_approx_dp",
    "as_gdp",
    "compose_basic",
    "compose_gdp",
    "compose_plan_gdp",
    "composite_event",
    "event_gdp",
    "flatten_events",
    "group_event",
    "group_plan",
    "laplace_mu",
]

PRICING = "dp-pipeline pld 1"
"""The version of the prices :mod:`dp_pipeline.accounting._analysis` computes, which every new reserve, pay
and shrink record states (its ``"pricing"`` field) so that verify knows which records it can re-price
exactly. Change it whenever any price may change, by even one ulp (the grid, a tolerance, the PLD code)."""


@dataclass(frozen=True)
class Composition:
    """The result of composing: the total guarantee and the method that produced it.

    Attributes
    ----------
    guarantee : ApproxDP or GaussianDP
        The composed guarantee.
    method : str
        ``"basic"`` (Σε, Σδ), ``"gdp"`` (√Σμᵢ²), ``"pld"`` (tight privacy-loss distribution) or
        ``"bounded_range"`` (the optimal composition of exponential mechanisms of one ε).
    """

    guarantee: Guarantee
    method: str


# --------------------------------------------------------------------------------------------------
# public functions


def group_event(event: PrivacyEvent, group_size: int) -> PrivacyEvent:
    """The event as it applies to a group of ``group_size`` individuals.

    Parameters
    ----------
    event : PrivacyEvent
        The release as it applies to one individual.
    group_size : int
        k ≥ 1; ``k = 1`` returns ``event`` itself.

    Returns
    -------
    PrivacyEvent
        - ``"laplace"``: sensitivity kΔ and guarantee kε (exact: the noise sees a k-fold change);
        - ``"gaussian"``: sensitivity kS and the exact guarantee of the k-fold change: kμ-GDP for a μ-GDP
          event; for an (ε, δ) event the same δ with the least ε of kS/σ-GDP at that δ (rounded up);
        - ``"randomized_response"``: kind ``"guarantee"`` with ``guarantee.group(k)`` (the noise
          parameters describe one person's answer, so they are dropped);
        - every other kind: ``guarantee.group(k)`` (kε; kμ; (kε, δ·Σᵢ₌₀ᵏ⁻¹ e^{iε})), sensitivity kΔ.

    Raises
    ------
    InvalidParameterError
        For a bad group size, or an event whose guarantee is not implied by its noise parameters (or
        whose group (ε, δ) guarantee would have δ ≥ 1).

    Notes
    -----
    Valid for every composition method, adaptive or planned. Group privacy for ε-DP and (ε, δ)-DP:
    Dwork & Roth 2014, Thm 2.2 and its (ε, δ) generalisation; for μ-GDP: Dong, Roth & Su 2022,
    Thm 2.14. A ``"composite"`` event becomes the composite of its grouped parts.
    """
    if isinstance(event, PrivacyEvent) and event.kind == "composite":
        return composite_event([group_event(part, group_size) for part in event.parts], event.relation)
    loss = _event_loss(event)
    k = check_positive_int(group_size, "group_size")
    if k == 1:
        return event
    if event.kind == "randomized_response":
        return PrivacyEvent(kind="guarantee", guarantee=event.guarantee.group(k), relation=event.relation)
    sensitivity = None if event.sensitivity is None else times_up(k, event.sensitivity)
    guarantee: Guarantee
    if isinstance(loss, _LaplaceLoss):
        eps = _pure_epsilon(event.guarantee)
        assert eps is not None
        guarantee = PureDP(times_up(k, eps))
    elif event.kind == "gaussian" and isinstance(event.guarantee, ApproxDP):
        assert isinstance(loss, _GaussianLoss) and sensitivity is not None
        guarantee = GaussianDP(divide_up(sensitivity, loss.sigma)).to_approx_dp(event.guarantee.delta)
    else:
        guarantee = event.guarantee.group(k)
    parameters = dict(event.parameters)
    other = parameters.get("replace_one_sensitivity")
    if isinstance(other, (int, float)):  # a group changes it k times as much, like the sensitivity
        parameters["replace_one_sensitivity"] = times_up(k, float(other))
    return PrivacyEvent(
        kind=event.kind,
        guarantee=guarantee,
        sensitivity=sensitivity,
        parameters=parameters,
        relation=event.relation,
    )


def group_plan(releases: Sequence[tuple[PrivacyEvent, int]]) -> tuple[list[PrivacyEvent], int]:
    """A plan whose releases each protect groups of their own size, as the accountant's plan methods take it.

    Parameters
    ----------
    releases : sequence of (PrivacyEvent, int)
        Every release of the plan, for one individual, with its group size k ≥ 1.

    Returns
    -------
    events : list of PrivacyEvent
    group_size : int
        With one group size for every release: the events as given and that size, which the accountant
        applies to the whole plan exactly as it applies a group size to each spend. With several: each
        event grouped on its own (:func:`group_event`) and 1. The ``dp-pipeline plan check`` command and
        the Airflow DAG check price their plans this way, so that both ask the accountant the same question.
    """
    sizes = {size for _, size in releases}
    if len(sizes) == 1:
        return [event for event, _ in releases], sizes.pop()
    return [group_event(event, size) for event, size in releases], 1


def as_approx_dp(guarantee: Guarantee, delta: float | None = None) -> ApproxDP:
    """A guarantee as (ε, δ)-DP.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP or GaussianDP
    delta : float, optional
        The δ at which a μ-GDP guarantee is read; required for GaussianDP, ignored otherwise (but checked
        to be a number in [0, 1) when given).

    Returns
    -------
    ApproxDP
        PureDP(ε) → (ε, 0); ApproxDP → itself; GaussianDP(μ) → (ε, δ) with the least ε such that
        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ≤ δ (Dong, Roth & Su 2022, Cor. 2.13), rounded up.

    Notes
    -----
    A conversion of one guarantee: valid wherever the guarantee is. Converting each spend of an adaptive
    sequence and composing the results with :func:`compose_basic` is valid; it is looser than composing
    in μ-GDP first and converting once.
    """
    check_guarantee(guarantee)
    if delta is not None:
        delta = _check_delta(delta)
    if isinstance(guarantee, PureDP):
        return guarantee.to_approx_dp()
    if isinstance(guarantee, ApproxDP):
        return guarantee
    assert isinstance(guarantee, GaussianDP)
    if delta is None:
        raise InvalidParameterError(
            f"{guarantee!r} holds as (ε, δ)-DP for a whole curve of (ε, δ): pass the 'delta' to read it at",
            "delta",
        )
    return guarantee.to_approx_dp(delta)


def as_gdp(guarantee: Guarantee) -> GaussianDP:
    """A guarantee as μ-GDP.

    Returns
    -------
    GaussianDP
        GaussianDP → itself; PureDP(ε) or ApproxDP(ε, 0) → μ = 2Φ⁻¹(e^ε/(1 + e^ε)), rounded up (Dong,
        Roth & Su 2022: ε-DP is the trade-off of binary randomized response, which lies above G_μ).

    Raises
    ------
    UnsupportedCompositionError
        For ApproxDP with δ > 0: f_{ε,δ}(0) = 1 − δ < 1 = G_μ(0), so no μ-GDP guarantee exists.

    Notes
    -----
    A conversion of one guarantee, valid wherever the guarantee is (adaptively too).
    """
    check_guarantee(guarantee)
    if isinstance(guarantee, GaussianDP):
        return guarantee
    assert isinstance(guarantee, (PureDP, ApproxDP))
    return guarantee.to_gdp()


def laplace_mu(loss: float) -> GaussianDP:
    """The least μ such that Laplace noise whose exact loss is Δ/b = ``loss`` is μ-GDP, rounded up.

    Parameters
    ----------
    loss : float
        ε = Δ/b ≥ 0: the sensitivity over the scale (for a group of k, kΔ/b).

    Returns
    -------
    GaussianDP
        μ = −2Φ⁻¹(e^{−ε/2}/2), evaluated as 2√2·erf⁻¹(1 − e^{−ε/2}) for ε < 1 and as
        −2Φ⁻¹(exp(−ε/2 − ln 2)) in log space above, then raised by 1e-14 relative (well above the rounding
        error of either form, which the tests measure against mpmath) and one unit in the last place.
        Below 2Φ⁻¹(e^ε/(1 + e^ε)), the μ of a generic ε-DP release (1.030 against 1.232 at ε = 1).
        A μ-GDP guarantee of one release, so valid adaptively in the μ-GDP filter (Smith & Thakurta 2022).

    Notes
    -----
    **Proof.** With ε = Δ/b, the likelihood ratio of Lap(0, b) to Lap(Δ, b) is e^ε left of 0, e^{−ε} right
    of Δ and monotone between, so the Neyman–Pearson tests give the trade-off function

        f(α) = 1 − e^ε α on [0, e^{−ε}/2],  c/α on [e^{−ε}/2, 1/2],  e^{−ε}(1 − α) on [1/2, 1],  c = e^{−ε}/4.

    G_μ(α) ≤ f(α) iff μ ≥ h(α) = z(α) + z(f(α)) with z(p) = Φ⁻¹(1 − p), so the least μ is sup h. h is
    symmetric under α ↔ f(α) (f is an involution), so take α ≤ α* = e^{−ε/2}/2, where f(α*) = α*. Let
    g(t) = z(e^t): g' = −R(g) and g'' = R'·R < 0, with R Mills' ratio (R'(z) = zR(z) − 1 < 0). On the middle
    piece αf(α) = c, so h = g(s) + g(ln c − s) (s = ln α) is concave and symmetric about s = ln c/2, largest
    at α*. On the first piece h = z(e^{−ε}p) − z(p) for p = e^ε α ≤ 1/2, whose derivative in ln p,
    R(z(p)) − R(z(e^{−ε}p)), is positive (z(e^{−ε}p) > z(p) and R decreases): h rises up to the middle
    piece. Hence sup h = h(α*) = 2z(α*) = −2Φ⁻¹(e^{−ε/2}/2), and no smaller μ works (G_μ(α*) > α* = f(α*)).
    The tests check this against the trade-off computed from the two densities in mpmath. A shift s ≤ Δ
    costs no more: μ grows with ε.

    **Vector queries** with L1 sensitivity Δ (independent Laplace noise per coordinate, shifts sᵢ with
    Σsᵢ ≤ Δ) compose to √(Σμ(sᵢ/b)²)-GDP (Dong, Roth & Su 2022, Cor. 3.3), at most μ(Δ/b) because μ(x)² is
    convex with μ(0) = 0, hence superadditive. Convexity: write μ = 2z with 1 − Φ(z) = e^{−x/2}/2, so
    x/2 = −ln(2(1 − Φ(z))) increases in z with derivative φ(z)/(1 − Φ(z)) = 1/R(z) (R: Mills' ratio), and
    d(z²)/d(x/2) = 2zR(z), which grows in z: (zR)' = R(1 + z²) − z > 0 by Gordon's inequality
    R(z) > z/(1 + z²).
    """
    if loss < 1.0:
        mu = 2.0 * math.sqrt(2.0) * float(special.erfinv(-math.expm1(-loss / 2.0)))
    else:
        mu = -2.0 * float(special.ndtri_exp(-loss / 2.0 - math.log(2.0)))
    if mu == 0.0:
        return GaussianDP(0.0)
    return GaussianDP(math.nextafter(mu * (1.0 + 1e-14), math.inf))


def event_gdp(event: PrivacyEvent) -> GaussianDP:
    """The tightest μ-GDP guarantee of one event.

    Returns
    -------
    GaussianDP
        ``"gaussian"`` events: μ = S/σ (rounded up), exact whatever calibration chose σ (Dong, Roth & Su
        2022, Thm 2.7); ``"laplace"`` events: the μ of the Laplace trade-off at the noise's exact loss
        Δ/b (rounded up), :func:`laplace_mu`; every other event: :func:`as_gdp` of its guarantee.

    Raises
    ------
    UnsupportedCompositionError
        For a non-Gaussian event with an (ε, δ > 0) guarantee.
    InvalidParameterError
        For an event whose guarantee is not implied by its noise parameters.

    Notes
    -----
    A property of one release, valid adaptively: compose the results with :func:`compose_gdp`. A
    ``"composite"`` event has the μ-GDP composition of its parts.
    """
    if isinstance(event, PrivacyEvent) and event.kind == "composite":
        return compose_gdp([event_gdp(part) for part in event.parts])
    loss = _event_loss(event)
    if event.kind == "gaussian":
        assert isinstance(loss, _GaussianLoss)
        return GaussianDP(divide_up(loss.sensitivity, loss.sigma))
    if event.kind == "laplace":
        assert isinstance(loss, _LaplaceLoss)
        return laplace_mu(divide_up(loss.sensitivity, loss.scale))
    return as_gdp(event.guarantee)


def compose_plan_gdp(events: Sequence[PrivacyEvent]) -> Composition:
    """A fixed or adaptive plan composed in the μ-GDP currency.

    Returns ``Composition(compose_gdp([event_gdp(e) for e in events]), "gdp")``: exact for Gaussian noise
    (μ = S/σ), the Laplace trade-off's μ = −2Φ⁻¹(e^{−ε/2}/2) for Laplace noise (:func:`laplace_mu`), and
    μ = 2Φ⁻¹(e^ε/(1 + e^ε)) for other pure ε-DP events. Valid adaptively (Smith &
    Thakurta 2022). An empty plan costs μ = 0.

    Raises
    ------
    UnsupportedCompositionError
        If an event only has an (ε, δ > 0) guarantee.
    """
    items = flatten_events(check_events(events))
    return Composition(compose_gdp([event_gdp(e) for e in items]), "gdp")


# --------------------------------------------------------------------------------------------------
