"""Whether plans of releases fit a dataset's budget: each part alone, and the parts of one dataset together.

A :class:`PlanPart` is what one job (a DAG run, a plan file) charges one dataset, or one partition of it:
releases composed as one plan, as :meth:`~dp_pipeline.PrivacyAccountant.spend_plan` charges them.
:func:`check_plan` asks the accountant's one plan check for it, against the whole budget and against what
remains; :func:`check_plans` also checks the parts of one dataset together
(:meth:`~dp_pipeline.PrivacyAccountant.quote`), as a job that charges them one after another is charged.
Nothing is written to the ledger.

Guarantee
---------
The verdicts are the accountant's own: a part "fits" exactly when ``spend_plan`` would accept it now
(``fits_remaining``) or on an untouched budget (``fits_budget``), and the parts of one dataset fit together
exactly when ``quote`` accepts them together. A job that charges more than its parts (another part, a
retry the parts do not count) is not covered by the check.

Example
-------
>>> from dp_pipeline import PrivacyAccountant, PureDP
>>> from dp_pipeline.mechanisms import Laplace
>>> from dp_pipeline.planning import PlanPart, check_plans
>>> acct = PrivacyAccountant("memory://")
>>> acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
>>> half = Laplace(epsilon=0.5, sensitivity=1.0).event
>>> monday = PlanPart("visits", (half,), partition="2026-11-23")
>>> whole = PlanPart("visits", (half,))
>>> [check.fits_budget for check in check_plans(acct, [monday])]
[True]
>>> [check.fits_budget for check in check_plans(acct, [monday, whole, whole])]
[False, False, False]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dp_pipeline.accounting import Request
from dp_pipeline.events import PrivacyEvent

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant
    from dp_pipeline.guarantees import Guarantee

__all__ = ["PlanCheck", "PlanPart", "check_plan", "check_plans", "check_together"]


@dataclass(frozen=True)
class PlanPart:
    """Releases one job charges a dataset (or one partition of it), composed as one plan.

    Attributes
    ----------
    dataset : str
        The dataset charged.
    events : tuple of PrivacyEvent
        The releases, each as the plan charges it.
    group_size : int, default 1
        One group size for every release (group privacy), as ``spend_plan`` takes it.
    partition : str, tuple of str or None
        The partition charged, or the partitions (each is charged the plan); None: the whole dataset.
    delta : float or None
        The δ the plan's ε is read at (None: the rule's default).
    """

    dataset: str
    events: tuple[PrivacyEvent, ...]
    group_size: int = 1
    partition: str | tuple[str, ...] | None = None
    delta: float | None = None

    @property
    def request(self) -> Request:
        """The part as one plan of :meth:`~dp_pipeline.PrivacyAccountant.quote`."""
        return Request.plan(list(self.events), self.group_size, delta=self.delta, partition=self.partition)

    @property
    def where(self) -> str:
        """``the whole dataset``, ``partition '2026-11-24'`` or ``partitions '2026-11-23', '2026-11-24'``."""
        if self.partition is None:
            return "the whole dataset"
        if isinstance(self.partition, str):
            return f"partition {self.partition!r}"
        return "partitions " + ", ".join(repr(name) for name in self.partition)


@dataclass(frozen=True)
class PlanCheck:
    """The verdict on one :class:`PlanPart`.

    Attributes
    ----------
    part : PlanPart
    total : Guarantee
        The plan's tight total (``plan_cost`` against the whole budget), in the budget's currency.
    method : str
        The composition method that produced ``total``.
    fits_budget, fits_remaining : bool
        Whether ``spend_plan`` would accept the part on an untouched budget, and now; with the other parts
        of its dataset, once :func:`check_plans` checked them together.
    problems : list of str
        Why the part cannot be charged whole (together with the other parts of its dataset).
    warnings : list of str
        Why it cannot be charged now (what remains cannot hold it, or it cannot be read at the δ left).
    """

    part: PlanPart
    total: Guarantee
    method: str
    fits_budget: bool
    fits_remaining: bool
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_plan(accountant: PrivacyAccountant, part: PlanPart) -> PlanCheck:
    """Price one part against the dataset's whole budget and against what remains of it.

    Raises
    ------
    InvalidParameterError, UnsupportedCompositionError, ValueError
        The plan cannot be priced on the dataset at all (no budget, another currency, a release the rule
        cannot compose); a part that cannot be read at the δ left is a warning instead.
    """
    request = part.request
    report = accountant.plan_cost(
        part.dataset,
        list(part.events),
        part.group_size,
        against="budget",
        delta=part.delta,
        partition=part.partition,
    )
    fits_budget = accountant.quote(part.dataset, request, against="budget").fits
    warnings: list[str] = []
    try:
        fits_remaining = accountant.quote(part.dataset, request).fits
    except Exception as exc:  # e.g. no finite ε at the δ left: it cannot be charged now
        fits_remaining = False
        warnings.append(f"cannot be charged on what remains: {type(exc).__name__}: {exc}")
    return PlanCheck(part, report.guarantee, report.method, fits_budget, fits_remaining, warnings=warnings)


def check_plans(accountant: PrivacyAccountant, parts: Sequence[PlanPart]) -> list[PlanCheck]:
    """Check each part (:func:`check_plan`), then the parts of one dataset together.

    Parts on one dataset (its partitions, the whole dataset) are charged one after another by the job, so
    they are also checked together with ``quote``: a part that fits alone fails when they do not fit together.
    The checks come back in the order of ``parts``.
    """
    return check_together(accountant, [check_plan(accountant, part) for part in parts])


def check_together(accountant: PrivacyAccountant, checks: Sequence[PlanCheck]) -> list[PlanCheck]:
    """The checks, with the parts of each dataset that has several also checked together (see
    :func:`check_plans`); in the order given."""
    by_dataset: dict[str, list[PlanCheck]] = {}
    for check in checks:
        by_dataset.setdefault(check.part.dataset, []).append(check)
    verdicts: dict[int, PlanCheck] = {}
    for dataset, group in by_dataset.items():
        if len(group) > 1:
            verdicts.update(
                (id(c), v) for c, v in zip(group, _joint(accountant, dataset, group), strict=True)
            )
    return [verdicts.get(id(check), check) for check in checks]


def _joint(accountant: PrivacyAccountant, dataset: str, group: list[PlanCheck]) -> list[PlanCheck]:
    plans = [check.part.request for check in group]
    try:
        whole = accountant.quote(dataset, plans, against="budget").fits
        now = accountant.quote(dataset, plans).fits
    except Exception as exc:  # e.g. no finite ε at the δ left once the others are charged
        whole, now = True, False
        note = f"its parts cannot be charged together: {type(exc).__name__}: {exc}"
    else:
        note = ""
    joined = []
    for check in group:
        others = ", ".join(c.part.where for c in group if c is not check)
        said = f"one run also charges {others} of {dataset!r}"
        problems, warnings = list(check.problems), list(check.warnings)
        if not whole and check.fits_budget:
            problems.append(f"{said}: together they exceed the whole budget")
        if not now and check.fits_remaining:
            warnings.append(note or f"{said}: together they exceed what remains")
        joined.append(
            dataclasses.replace(
                check,
                fits_budget=check.fits_budget and whole,
                fits_remaining=check.fits_remaining and now,
                problems=problems,
                warnings=warnings,
            )
        )
    return joined
