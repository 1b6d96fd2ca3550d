"""Calibrate free releases to a budget share: the least noise whose plan, beside the fixed releases, costs
the share or less under a dataset's rule and neighbouring relation.

A job (an Airflow DAG run with ``run_budget(dag, share=...)``) may leave the noise of some releases free
(:class:`~dp_pipeline.PlannedRelease`) and give its runs a **share** of a dataset's budget.
:func:`calibrate_share` prices the fixed releases and calibrates the free ones together with
:func:`~dp_pipeline.allocate`, against the share alone, under the dataset's rule and relation
(:func:`share_terms`), so that the plan the job reserves costs at most the share.

Guarantee
---------
The calibrated plan's tight total, computed by the same plan check ``spend_plan`` uses, is at most the share
(``allocate`` only returns a scale whose plan fits, rounding toward more noise), and
:attr:`ShareCalibration.fits` says whether the fixed releases alone fit it. The share is read at the δ it
was priced at (:attr:`ShareCalibration.delta`), so a reservation of :attr:`ShareCalibration.events` read at
that δ charges the dataset at most the share. Partitions do not change the price of one plan against an
untouched budget, so one share prices a part on the whole dataset and a part on one partition alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dp_pipeline._allocation import AllocatedRelease, Allocation, PlannedRelease, allocate
from dp_pipeline.accounting import BudgetPolicy, PrivacyAccountant, Request
from dp_pipeline.accounting.rules import stored_rule
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, PureDP, format_guarantee

if TYPE_CHECKING:
    from dp_pipeline.guarantees import Guarantee

__all__ = ["ShareCalibration", "calibrate_share", "describe_noise", "noise_parameters", "share_terms"]

ShareGuarantee = PureDP | ApproxDP | GaussianDP


@dataclass(frozen=True)
class ShareCalibration:
    """Fixed and free releases calibrated to a share.

    Attributes
    ----------
    events : tuple of PrivacyEvent
        The plan to reserve: the fixed releases, then each free release's calibrated event.
    cost : Guarantee
        The plan's tight total against the share (the fixed releases' alone when nothing is free).
    delta : float or None
        The δ the plan is read at: the δ of ``cost`` for an (ε, δ) share, else None.
    allocation : Allocation or None
        The calibration of the free releases (None when there are none).
    fits : bool
        Whether the plan fits the share (always, once free releases were calibrated).
    """

    events: tuple[PrivacyEvent, ...]
    cost: Guarantee
    delta: float | None
    allocation: Allocation | None
    fits: bool


def share_terms(accountant: PrivacyAccountant, dataset: str, share: Guarantee) -> tuple[str, Relation]:
    """The rule (a name ``set_budget`` takes) and the neighbouring relation under which ``dataset`` prices
    a share of its budget.

    Raises
    ------
    InvalidParameterError
        The share is not in the currency of the dataset's budget (μ-GDP against (ε, δ), or the reverse).
    """
    report = accountant.budget(dataset)
    rule = stored_rule(report.method, report.guarantee, f"dataset {dataset!r}")
    if isinstance(share, GaussianDP) != isinstance(report.guarantee, GaussianDP):
        wanted = "GaussianDP" if isinstance(report.guarantee, GaussianDP) else "PureDP or ApproxDP"
        raise InvalidParameterError(
            f"the run's share {format_guarantee(share, compact=True)} of {dataset!r} is not in the currency "
            f"of its budget {format_guarantee(report.guarantee, compact=True)}: give a {wanted} share",
            "share",
        )
    return rule.names[0], report.relation


def calibrate_share(
    fixed: Sequence[PrivacyEvent],
    free: Sequence[PlannedRelease],
    share: ShareGuarantee,
    rule: str,
    relation: Relation,
) -> ShareCalibration:
    """Calibrate the ``free`` releases beside the ``fixed`` ones so that their plan costs at most ``share``.

    Parameters
    ----------
    fixed : sequence of PrivacyEvent
        Releases whose noise is decided (each as the plan charges it, grouped on its own).
    free : sequence of PlannedRelease
        Releases whose noise is left free, one per release (repeat a release to count it several times).
    share : PureDP, ApproxDP or GaussianDP
        The budget the plan must fit.
    rule, relation : str
        The dataset's composition rule and neighbouring relation (:func:`share_terms`).

    Returns
    -------
    ShareCalibration

    Raises
    ------
    BudgetExceededError
        Free releases were given and no noise makes the plan fit the share (the fixed ones leave nothing).
    InvalidParameterError
        A release :func:`~dp_pipeline.allocate` refuses.
    """
    if free:
        allocation = _allocation(list(free), list(fixed), share, rule, relation)
        cost, fits = allocation.cost, True
    else:
        policy = BudgetPolicy.declare(share, rule, relation)
        allocation = None
        prices, fits = policy.quote([Request.plan(list(fixed))], policy.empty())
        cost = prices[0].cost
    events = (*fixed, *(a.event for a in allocation or ()))
    delta = cost.delta if isinstance(cost, ApproxDP) else None
    return ShareCalibration(events, cost, delta, allocation, fits)


def noise_parameters(allocated: AllocatedRelease) -> dict[str, Any]:
    """A calibrated release as JSON-ready data: its mechanism's class, its noise standard deviation, its
    noise parameter (``sigma`` of Gaussian noise, ``scale`` b of Laplace noise) and its event."""
    mechanism = allocated.mechanism
    data: dict[str, Any] = {"mechanism": type(mechanism).__name__, "std": allocated.std}
    for name in ("sigma", "scale"):
        value = getattr(mechanism, name, None)
        if isinstance(value, float):
            data[name] = value
    data["event"] = allocated.event.to_dict()
    return data


def describe_noise(allocated: AllocatedRelease) -> str:
    """``Gaussian σ=1.93``, ``Laplace b=2.5`` or ``BinaryRandomizedResponse ε=0.8``."""
    mechanism = allocated.mechanism
    name = type(mechanism).__name__
    if isinstance(getattr(mechanism, "sigma", None), float):
        return f"{name} σ={mechanism.sigma:.6g}"
    if isinstance(getattr(mechanism, "scale", None), float):
        return f"{name} b={mechanism.scale:.6g}"
    return f"{name} {format_guarantee(allocated.event.guarantee, compact=True, delta_digits=3)}"


def _fresh_allocation(
    releases: tuple[PlannedRelease, ...],
    fixed: tuple[str, ...],
    share: ShareGuarantee,
    rule: str,
    relation: Relation,
) -> Allocation:
    """:func:`allocate` of the free releases, beside the fixed ones (canonical JSON events), against the
    share under the dataset's rule and relation."""
    decided = [PrivacyEvent.from_dict(json.loads(event)) for event in fixed]
    return allocate(list(releases), target=BudgetPolicy.declare(share, rule, relation), fixed=decided)


_cached_allocation = functools.lru_cache(maxsize=32)(_fresh_allocation)
"""Calibrations remembered (a pure function of its arguments): a DAG check, the DAG policy at every parse and
a run's setup calibrate the same plan (a mixed plan takes seconds); refusals are not remembered."""


def _allocation(
    releases: list[PlannedRelease],
    fixed: list[PrivacyEvent],
    share: ShareGuarantee,
    rule: str,
    relation: Relation,
) -> Allocation:
    events = tuple(json.dumps(e.to_dict(), sort_keys=True) for e in fixed)
    key = (tuple(releases), events, share, rule, relation)
    try:
        hash(key)
    except TypeError:  # a release that cannot be a key (a list of categories): calibrated anew
        return _fresh_allocation(*key)
    return _cached_allocation(*key)
