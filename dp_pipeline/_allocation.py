"""Allocation of a privacy budget to planned releases: the least noise whose tight composition fits.

A user lists the releases a job will make (a DP count with Gaussian noise, a sum with Laplace noise, a survey
question by randomized response, ...) and :func:`allocate` calibrates all of them together, so that their
composition as one plan meets the budget (or what remains of it) and is never above it. The result is
charged as one plan with :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend_plan`.

This module sits above the accounting package (which never imports mechanisms): it builds mechanisms, and asks
the budget's :class:`~dp_pipeline.accounting.BudgetPolicy` (the calculator the accountant charges
with) whether they fit; no ledger is written, not even in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from dp_pipeline._exact import divide_down
from dp_pipeline._validation import check_positive_int, check_real
from dp_pipeline.accounting import PrivacyAccountant, Request, group_event
from dp_pipeline.accounting._policy import BudgetPolicy, Refusal, head_policy
from dp_pipeline.accounting._pricing import Price
from dp_pipeline.accounting.rules import Totals
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError, printable
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

__all__ = ["AllocatedRelease", "Allocation", "PlannedRelease", "allocate"]

MechanismName = Literal["laplace", "gaussian", "randomized_response"]
_NAMES: tuple[str, ...] = ("laplace", "gaussian", "randomized_response")
_FREE = ("epsilon", "sigma")
_AGAINST = ("remaining", "budget")
_DICT_KEYS = frozenset({"mechanism", "sensitivity", "weight", "group_size", "categories", "label"})

_RTOL = 1e-6  # the search stops when the fitting and the refused noise scale differ by this (relative)
_MAX_STEPS = 64  # doublings (or halvings) of the noise scale while bracketing the least fitting one
_TARGET = "target"  # what a refusal calls a bare target


@dataclass(frozen=True)
class PlannedRelease:
    """One release of a plan, with its noise left free for :func:`allocate` to calibrate.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian", "randomized_response"} or callable
        The noise. A callable builds any other mechanism from its free parameter (``free``): it takes ε
        (``free="epsilon"``) or σ (``free="sigma"``) and returns a mechanism (an object with an ``.event``).
    sensitivity : float, optional
        Δ > 0: L1 sensitivity for Laplace, L2 for Gaussian; for a mechanism with ε free, the sensitivity its
        noise scales with (see Notes). Required for these; not taken by randomized response (each person
        randomises their own answer) nor by a mechanism with σ free (the callable knows it).
    weight : float, default 1
        w > 0: this release gets w times the noise precision (1/variance) of a release of weight 1.
    group_size : int, default 1
        k ≥ 1: the release is charged for groups of k individuals (one person contributes k rows).
    categories : int or sequence, optional
        Randomized response only: None or 2 for binary randomized response
        (:class:`~dp_pipeline.mechanisms.BinaryRandomizedResponse`); a count k ≥ 3 (categories 0 … k − 1) or
        the list of categories for k-ary randomized response
        (:class:`~dp_pipeline.mechanisms.KRandomizedResponse`).
    free : {"epsilon", "sigma"}, optional
        Only with a callable ``mechanism``: which parameter it takes.
    label : str, optional
        A name for the release, carried into the allocation.

    Notes
    -----
    The noise standard deviation of each release (what the weights compare):

    * Laplace: √2·b, with scale b = Δ/ε;
    * Gaussian: σ;
    * randomized response with k categories at ε: √((k − 1)e^ε)/(e^ε − 1), the standard deviation of one
      report's unbiased estimate of a category indicator, (1[report = v] − q)/(p − q), for the worst-case
      true answer (p = e^ε/(e^ε + k − 1), q = 1/(e^ε + k − 1); Wang et al. 2017): √(p(1 − p))/(p − q);
    * a mechanism with ε free: √2·Δ/ε, that of Laplace noise at the same ε and Δ (exact for Laplace, a
      stand-in for others, as PipelineDP's "generic" mechanism);
    * a mechanism with σ free: σ.

    Weights compare precisions: release i gets standard deviation t/√wᵢ for one common scale t. PipelineDP's
    weights divide the standard deviation instead (precision ∝ w²).

    References
    ----------
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency estimation", USENIX
    Security 2017.
    """

    mechanism: MechanismName | Callable[[float], Any]
    sensitivity: float | None = None
    weight: float = 1.0
    group_size: int = 1
    categories: int | Sequence[Hashable] | None = None
    free: Literal["epsilon", "sigma"] | None = None
    label: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedRelease:
        """A release from plain JSON data: ``{"mechanism": "gaussian", "sensitivity": 1, "weight": 2}``.

        Keys: ``mechanism`` (``"laplace"``, ``"gaussian"`` or ``"randomized_response"``), and optionally
        ``sensitivity``, ``weight``, ``group_size``, ``categories`` and ``label``. Raises
        InvalidParameterError for a key or a value :func:`allocate` would refuse.
        """
        if not isinstance(data, Mapping):
            raise InvalidParameterError(
                f"a planned release must be a mapping, got {type(data).__name__}", "releases"
            )
        unknown = sorted(str(key) for key in data if key not in _DICT_KEYS)
        if unknown:
            raise InvalidParameterError(
                f"unknown key(s) {unknown} in a planned release; allowed: {sorted(_DICT_KEYS)}", unknown[0]
            )
        name = data.get("mechanism")
        if name not in _NAMES:
            raise InvalidParameterError(
                f"'mechanism' must be one of {', '.join(_NAMES)}, got {printable(repr(name))}", "mechanism"
            )
        release = cls(
            mechanism=name,
            sensitivity=data.get("sensitivity"),
            weight=data.get("weight", 1.0),
            group_size=data.get("group_size", 1),
            categories=data.get("categories"),
            label=data.get("label"),
        )
        _check_release(release, "")
        return release

    def check(self) -> PlannedRelease:
        """Raise InvalidParameterError for a release :func:`allocate` would refuse; return it otherwise.

        Builds no mechanism (a callable ``mechanism`` is not called).
        """
        _check_release(self, "")
        return self

    def at_scale(self, scale: float) -> AllocatedRelease:
        """This release calibrated at the common noise scale t of an allocation: standard deviation t/√w.

        :func:`allocate` calibrates each release of its plan this way at :attr:`Allocation.scale`, so
        ``release.at_scale(allocation.scale)`` rebuilds the very mechanism it allocated (in another
        process, say, from the scale alone).
        """
        return _check_release(self, "").calibrate(_std_at(self, _positive(scale, "scale", "")), "")


def _std_at(release: PlannedRelease, scale: float) -> float:
    """The noise standard deviation of ``release`` at the common scale t: t/√w."""
    return scale / math.sqrt(release.weight)


@dataclass(frozen=True)
class AllocatedRelease:
    """A planned release with its calibrated mechanism.

    Attributes
    ----------
    release : PlannedRelease
        What was asked for.
    mechanism : Mechanism
        The calibrated mechanism to run; its ``.event`` describes one individual.
    std : float
        Its noise standard deviation (see :class:`PlannedRelease`, Notes).
    event : PrivacyEvent
        What the plan charges for this release: the mechanism's event for a group of ``release.group_size``
        (:func:`~dp_pipeline.accounting.group_event`), so that charging the allocation never
        needs a group size.
    """

    release: PlannedRelease
    mechanism: Any
    std: float
    event: PrivacyEvent


@dataclass(frozen=True)
class Allocation(Sequence[AllocatedRelease]):
    """Calibrated releases whose composition as one plan fits a budget (a sequence of AllocatedRelease).

    Pass it to :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend_plan` (or
    :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.plan_cost`) as it is, with
    ``delta=allocation.delta`` (the δ it was priced at): each item's ``.event`` is the release as charged.
    Group sizes are already applied, so spend it with the default ``group_size=1``.

    Attributes
    ----------
    releases : tuple of AllocatedRelease
        In the order planned.
    scale : float
        The common noise scale t: release i has standard deviation t/√wᵢ.
    target : Guarantee
        What the plan was fitted to: what remained of the dataset's budget, the whole budget, or the bare
        target.
    cost : Guarantee
        The plan's total (with the fixed releases given to :func:`allocate`), priced by the accountant's
        plan check (in the budget's currency).
    method : str
        How the total was composed: ``"gdp"`` (exact μ-GDP), ``"pld"`` (tight privacy-loss distribution) or
        ``"basic"``.
    """

    releases: tuple[AllocatedRelease, ...]
    scale: float
    target: Guarantee
    cost: Guarantee
    method: str

    @overload
    def __getitem__(self, index: int) -> AllocatedRelease: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[AllocatedRelease]: ...

    def __getitem__(self, index: int | slice) -> AllocatedRelease | Sequence[AllocatedRelease]:
        return self.releases[index]

    def __len__(self) -> int:
        return len(self.releases)

    def __iter__(self) -> Iterator[AllocatedRelease]:
        return iter(self.releases)

    @property
    def delta(self) -> float | None:
        """The δ the plan was priced at (the target's δ), to pass to ``spend_plan(..., delta=...)``; None
        for a μ-GDP cost."""
        return self.cost.delta if isinstance(self.cost, ApproxDP) else None

    @property
    def mechanisms(self) -> list[Any]:
        """The calibrated mechanisms, in the order planned."""
        return [r.mechanism for r in self.releases]


# ------------------------------------------------------------------------------------------------------
# one release: noise standard deviation → mechanism


def _rr_epsilon(std: float, k: int) -> float:
    """The ε at which k-ary randomized response has noise standard deviation ``std``.

    Solves (k − 1)e^ε = s²(e^ε − 1)² for e^ε > 1: e^ε − 1 = ((k − 1) + √((k − 1)(k − 1 + 4s²)))/(2s²).
    """
    s2 = std * std
    return math.log1p(((k - 1) + math.sqrt((k - 1) * (k - 1 + 4.0 * s2))) / (2.0 * s2))


def _rr_std(epsilon: float, k: int) -> float:
    """√((k − 1)e^ε)/(e^ε − 1), the noise standard deviation of k-ary randomized response at ε."""
    return math.sqrt((k - 1) * math.exp(epsilon)) / math.expm1(epsilon)


@dataclass(frozen=True)
class _Plan:
    """A validated release: how to build its mechanism for a noise standard deviation."""

    release: PlannedRelease
    build: Callable[[float], tuple[Any, float]]  # std → (mechanism, its actual std)
    unit: float  # the std at which one release costs about ε = 1 (for the first guess only)

    def calibrate(self, std: float, where: str) -> AllocatedRelease:
        mechanism, actual = self.build(std)
        event = getattr(mechanism, "event", None)
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(
                f"{where}the callable must return a mechanism (an object with an .event), got "
                f"{type(mechanism).__name__}",
                "mechanism",
            )
        return AllocatedRelease(self.release, mechanism, actual, group_event(event, self.release.group_size))


def _no_sensitivity(release: PlannedRelease, where: str) -> None:
    if release.sensitivity is not None:
        raise InvalidParameterError(
            f"{where}this mechanism takes no 'sensitivity' (randomized response: each person randomises "
            "their own answer; σ free: the callable knows it)",
            "sensitivity",
        )


def _sensitivity(release: PlannedRelease, where: str) -> float:
    if release.sensitivity is None:
        raise InvalidParameterError(f"{where}'sensitivity' is required", "sensitivity")
    return _positive(release.sensitivity, "sensitivity", where)


def _rr_categories(release: PlannedRelease, where: str) -> tuple[Hashable, ...] | None:
    """None for binary randomized response; the categories of k-ary randomized response otherwise."""
    from dp_pipeline.mechanisms import KRandomizedResponse

    categories = release.categories
    if categories is None:
        return None
    if isinstance(categories, int) and not isinstance(categories, bool):
        if categories < 2:
            raise InvalidParameterError(f"{where}'categories' must be ≥ 2, got {categories}", "categories")
        return None if categories == 2 else tuple(range(categories))
    if not isinstance(categories, Sequence) or isinstance(categories, (str, bytes)):
        raise InvalidParameterError(
            f"{where}'categories' must be a count or a list of categories, got {type(categories).__name__}",
            "categories",
        )
    try:
        return KRandomizedResponse(epsilon=1.0, categories=tuple(categories)).categories  # checked now
    except InvalidParameterError as err:
        raise InvalidParameterError(f"{where}{err}", "categories") from None


def _rr_plan(release: PlannedRelease, where: str) -> _Plan:
    from dp_pipeline.mechanisms import BinaryRandomizedResponse, KRandomizedResponse

    categories = _rr_categories(release, where)
    k = 2 if categories is None else len(categories)

    def build(std: float) -> tuple[Any, float]:
        epsilon = _rr_epsilon(std, k)
        if categories is None:
            return BinaryRandomizedResponse(epsilon=epsilon), _rr_std(epsilon, k)
        return KRandomizedResponse(epsilon=epsilon, categories=categories), _rr_std(epsilon, k)

    return _Plan(release, build, _rr_std(1.0, k))


def _named_plan(release: PlannedRelease, where: str) -> _Plan:
    from dp_pipeline.mechanisms import Gaussian, Laplace

    name = release.mechanism
    if release.free is not None:
        raise InvalidParameterError(f"{where}'free' is only for a callable mechanism", "free")
    if name != "randomized_response" and release.categories is not None:
        raise InvalidParameterError(f"{where}'categories' is only for randomized response", "categories")
    if name == "randomized_response":
        _no_sensitivity(release, where)
        return _rr_plan(release, where)
    sensitivity = _sensitivity(release, where)
    if name == "laplace":

        def laplace(std: float) -> tuple[Any, float]:
            # b = std/√2 and ε = Δ/b, rounded down (more noise)
            m = Laplace(epsilon=divide_down(sensitivity * math.sqrt(2.0), std), sensitivity=sensitivity)
            return m, math.sqrt(2.0) * m.scale

        return _Plan(release, laplace, math.sqrt(2.0) * sensitivity)

    def gaussian(std: float) -> tuple[Any, float]:
        m = Gaussian.from_mu(mu=divide_down(sensitivity, std), sensitivity=sensitivity)  # σ = Δ/μ, rounded up
        return m, m.sigma

    return _Plan(release, gaussian, sensitivity)


def _callable_plan(release: PlannedRelease, where: str) -> _Plan:
    builder = release.mechanism
    assert callable(builder)
    if release.free not in _FREE:
        raise InvalidParameterError(
            f"{where}a callable mechanism needs free='epsilon' or free='sigma' (the parameter it takes)",
            "free",
        )
    if release.categories is not None:
        raise InvalidParameterError(f"{where}'categories' is only for randomized response", "categories")
    if release.free == "sigma":
        _no_sensitivity(release, where)
        return _Plan(release, lambda std: (builder(std), std), 1.0)
    sensitivity = _sensitivity(release, where)

    def with_epsilon(std: float) -> tuple[Any, float]:
        epsilon = divide_down(sensitivity * math.sqrt(2.0), std)
        return builder(epsilon), math.sqrt(2.0) * sensitivity / epsilon

    return _Plan(release, with_epsilon, math.sqrt(2.0) * sensitivity)


def _positive(value: Any, name: str, where: str) -> float:
    try:
        number = check_real(value, name)
    except InvalidParameterError as err:
        raise InvalidParameterError(f"{where}{err}", name) from None
    if number <= 0.0:
        raise InvalidParameterError(f"{where}{name!r} must be > 0, got {number}", name)
    return number


def _check_release(release: PlannedRelease, where: str) -> _Plan:
    """Check a release (``where`` prefixes the messages) and return how to calibrate it."""
    _positive(release.weight, "weight", where)
    try:
        check_positive_int(release.group_size, "group_size")
    except InvalidParameterError as err:
        raise InvalidParameterError(f"{where}{err}", "group_size") from None
    if release.label is not None and not isinstance(release.label, str):
        raise InvalidParameterError(f"{where}'label' must be a string", "label")
    if isinstance(release.mechanism, str):
        if release.mechanism not in _NAMES:
            raise InvalidParameterError(
                f"{where}'mechanism' must be one of {', '.join(_NAMES)} or a callable", "mechanism"
            )
        return _named_plan(release, where)
    if callable(release.mechanism):
        return _callable_plan(release, where)
    raise InvalidParameterError(
        f"{where}'mechanism' must be one of {', '.join(_NAMES)} or a callable, got "
        f"{type(release.mechanism).__name__}",
        "mechanism",
    )


# ------------------------------------------------------------------------------------------------------
# the search


def _calibrate(plans: Sequence[_Plan], scale: float) -> tuple[AllocatedRelease, ...]:
    """Every release at standard deviation t/√wᵢ."""
    return tuple(p.calibrate(_std_at(p.release, scale), f"releases[{i}]: ") for i, p in enumerate(plans))


def _first_guess(plans: Sequence[_Plan], goal: Guarantee) -> float:
    """A noise scale near the answer: √(Σ wᵢ(kᵢuᵢ)²)/a, where uᵢ is the std at which release i costs about
    ε = 1 and a is the ε or μ of the goal (the composition of Gaussian-like losses kᵢuᵢ√wᵢ/t)."""
    spread = math.sqrt(math.fsum(p.release.weight * (p.release.group_size * p.unit) ** 2 for p in plans))
    if isinstance(goal, GaussianDP):
        amount = goal.mu
    else:
        assert isinstance(goal, (PureDP, ApproxDP))
        amount = goal.epsilon
    return spread / amount if amount > 0.0 else spread


def _least_fitting(fits: Callable[[float], bool], guess: float) -> float | None:
    """The least noise scale t (within a relative _RTOL) at which ``fits`` holds; None if it holds nowhere
    up to 2⁶⁴ times the guess.

    Brackets by doubling or halving from the guess, then bisects in log scale. The answer is always a scale
    at which ``fits`` was evaluated and held.
    """
    if fits(guess):
        high, low = guess, guess / 2.0
        for _ in range(_MAX_STEPS):
            if not fits(low):
                break
            high, low = low, low / 2.0
        else:
            return high  # fits with (practically) no noise: nothing to gain below
    else:
        low, high = guess, guess * 2.0
        for _ in range(_MAX_STEPS):
            if fits(high):
                break
            low, high = high, high * 2.0
        else:
            return None
    while high > low * (1.0 + _RTOL):
        middle = math.sqrt(low * high)
        if fits(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class _Fitted:
    """What a plan is fitted to: a policy, the totals it is checked against, the dataset's own, unbounded."""

    name: str
    policy: BudgetPolicy
    against: Totals
    totals: Totals
    unbounded: bool = False

    def goal(self, side: str) -> Guarantee:  # what the plan must fit: what remains, or the whole budget
        return self.policy.remaining(self.totals)[0] if side == "remaining" else self.policy.guarantee

    def price(self, costs: Sequence[Any], delta: float | None) -> Price:  # as spend_plan(delta=) charges
        return self.policy.price(Request.plan(costs, delta=delta), self.against)

    def fits(self, costs: Sequence[Any], delta: float | None) -> bool:  # as quote and spend_plan decide
        if self.unbounded:
            return False
        return not isinstance(self.policy.admit(self.against, self.price(costs, delta).charge), Refusal)


def _budget_holder(accountant: Any, dataset: Any, target: Any, against: Any) -> tuple[_Fitted, str]:
    """The budget the allocation must fit and ``against``: a bare target is a budget on which nothing was
    spent (its policy as ``set_budget`` would declare it), a dataset's is read from its ledger."""
    if against not in _AGAINST:
        raise InvalidParameterError(f"'against' must be 'remaining' or 'budget', got {against!r}", "against")
    if target is not None:
        if accountant is not None or dataset is not None:
            raise InvalidParameterError(
                "give either 'target' or 'accountant' and 'dataset', not both", "target"
            )
        if not isinstance(target, (PureDP, ApproxDP, GaussianDP, BudgetPolicy)):
            raise InvalidParameterError(
                "'target' must be PureDP, ApproxDP, GaussianDP or a BudgetPolicy, got "
                f"{type(target).__name__}",
                "target",
            )
        policy = target if isinstance(target, BudgetPolicy) else BudgetPolicy.declare(target)
        return _Fitted(_TARGET, policy, policy.empty(), policy.empty()), "budget"
    if not isinstance(accountant, PrivacyAccountant) or dataset is None:
        wanted = "give 'accountant' (a PrivacyAccountant) and 'dataset', or a bare 'target' guarantee"
        raise InvalidParameterError(wanted, "accountant")
    unbounded = accountant.remaining(dataset).unbounded is not None  # checks the name and that it exists
    head = accountant.store.head(dataset)
    assert head is not None  # remaining() found it, and a dataset's head is never removed
    policy, totals = head_policy(head, dataset)
    start = totals if against == "remaining" else policy.empty()
    return _Fitted(dataset, policy, start, totals, unbounded), against


def _check_releases(releases: Any) -> list[_Plan]:
    if isinstance(releases, (str, bytes, Mapping)) or not isinstance(releases, Sequence):
        raise InvalidParameterError(
            f"'releases' must be a list of PlannedRelease, got {type(releases).__name__}", "releases"
        )
    if not releases:
        raise InvalidParameterError("'releases' is empty: a plan needs at least one release", "releases")
    plans = []
    for index, release in enumerate(releases):
        if not isinstance(release, PlannedRelease):
            raise InvalidParameterError(
                f"'releases[{index}]' must be a PlannedRelease, got {type(release).__name__}", "releases"
            )
        plans.append(_check_release(release, f"releases[{index}]: "))
    return plans


def _check_fixed(fixed: Any) -> list[Any]:
    """The fixed releases as a list: mechanisms (objects with an ``.event``), events or guarantees."""
    if isinstance(fixed, (str, bytes, Mapping)) or not isinstance(fixed, Sequence):
        raise InvalidParameterError(
            f"'fixed' must be a list of mechanisms, events or guarantees, got {type(fixed).__name__}", "fixed"
        )
    for index, item in enumerate(fixed):
        if not isinstance(item, (PrivacyEvent, PureDP, ApproxDP, GaussianDP)) and not isinstance(
            getattr(item, "event", None), PrivacyEvent
        ):
            raise InvalidParameterError(
                f"'fixed[{index}]' must be a mechanism, a PrivacyEvent or a guarantee, got "
                f"{type(item).__name__}",
                "fixed",
            )
    return list(fixed)


def _no_fit(fitted: _Fitted, requested: Guarantee, fixed: bool) -> BudgetExceededError:
    beside = " (beside the fixed releases)" if fixed else ""
    policy, totals = fitted.policy, fitted.totals
    return BudgetExceededError(
        fitted.name,
        requested,
        policy.spent(totals)[0],
        policy.remaining(totals)[0],
        policy.guarantee,
        detail=(
            f"No amount of noise makes this plan fit{beside}: nothing is left of the budget, the fixed "
            "releases alone exceed it, or a release costs more than what remains whatever its noise (e.g. "
            "Gaussian noise against a budget whose δ is used up)."
        ),
    )


def allocate(
    releases: Sequence[PlannedRelease],
    *,
    accountant: PrivacyAccountant | None = None,
    dataset: str | None = None,
    target: Guarantee | BudgetPolicy | None = None,
    against: Literal["remaining", "budget"] = "remaining",
    fixed: Sequence[Any] = (),
) -> Allocation:
    """Calibrate planned releases together: the least noise whose composition as one plan fits a budget.

    Parameters
    ----------
    releases : sequence of PlannedRelease
        The releases of the plan, each with its weight and group size.
    accountant : PrivacyAccountant, optional
        With ``dataset``: fit the plan to that dataset's budget, under its rule and neighbouring relation.
    dataset : str, optional
        The dataset.
    target : PureDP, ApproxDP, GaussianDP or BudgetPolicy, optional
        Instead of an accountant: a bare guarantee the plan must meet (under the rule ``set_budget`` would
        choose by default, for a replace-one dataset), or a
        :class:`~dp_pipeline.accounting.BudgetPolicy` (a budget with its rule and relation, e.g.
        the share of a dataset's budget that a run has reserved:
        ``BudgetPolicy.declare(share, rule, relation)``), on which nothing is spent.
    against : {"remaining", "budget"}, default "remaining"
        With an accountant: fit what remains of the budget (after every active spend, open reservations
        included), or the whole budget as if nothing were spent.
    fixed : sequence of mechanisms, events or guarantees, optional
        Releases of the same plan whose noise is already decided (each for groups of one: apply a group
        size with :func:`~dp_pipeline.accounting.group_event`). They are priced with the
        calibrated releases as one plan, so these get what the target leaves after them (a run whose
        fixed tasks and free tasks share one budget). Charge them together:
        ``spend_plan(dataset, [*fixed, *allocation], delta=allocation.delta)``; :attr:`Allocation.cost` is
        that plan's total.

    Returns
    -------
    Allocation
        The calibrated releases (a sequence of :class:`AllocatedRelease`), to charge as one plan:
        ``accountant.spend_plan(dataset, allocation, delta=allocation.delta, key=...)``.

    Raises
    ------
    InvalidParameterError
        A malformed release (its index is named), neither or both of ``target`` and ``accountant``, a bad
        ``against``. Nothing is charged, ever.
    BudgetExceededError
        No amount of noise makes the plan fit (nothing is left of the budget).
    UnsupportedCompositionError
        The plan (with the fixed releases) cannot be charged to the budget at all (Gaussian noise against
        a pure ε budget, or randomized response on an add/remove dataset).
    UnknownDatasetError
        The dataset has no budget.

    Notes
    -----
    Release i gets noise of standard deviation sᵢ = t/√wᵢ (so its precision is wᵢ times that of a release
    of weight 1; :class:`PlannedRelease` defines the standard deviation of each kind), and t is the least
    common scale at which the budget's policy (:class:`~dp_pipeline.accounting.BudgetPolicy`, the
    check :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.quote` makes) admits the whole plan.
    That check prices the plan exactly as
    :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend_plan` will with ``delta=`` the
    target's δ, under the dataset's rule: on an (ε, δ) budget with basic
    composition, the tight total of :func:`~dp_pipeline.accounting.compose_plan` at the
    target's δ (exact μ-GDP when every release is Gaussian, dp-accounting's privacy-loss distribution
    otherwise, also for a plan of pure releases: 20 Laplace releases in (1, 10⁻⁴) get scale 13.55 instead
    of the 20 of Σε at δ = 0, 500 get 71 instead of 500); under the μ-GDP rules √(Σμᵢ²). So the answer is
    never above the target: the returned mechanisms are the ones the check accepted. Charge them at the
    same δ, :attr:`Allocation.delta` (the plan then counts that δ; a pure budget, δ = 0, is priced at
    δ = 0).

    t is found by doubling or halving a first guess until the check changes its answer, then by bisection
    in log scale until the accepted and refused scales differ by at most 10⁻⁴ (relative). When every
    release is Gaussian, the cost is exact μ-GDP composition and the answer is the closed form up to
    that tolerance: σᵢ = √(Σⱼ Δⱼ²wⱼ)/(μ·√wᵢ), i.e. Σ(Δᵢ/σᵢ)² = μ², with μ the largest μ-GDP whose
    (ε, δ) conversion fits the target (Dong, Roth & Su 2022, Cor. 3.3 and 2.13). With other noise the
    privacy-loss distribution is discretised pessimistically, which costs at most about 10⁻⁴ of ε (see
    ``compose_plan``). Each evaluation of a mixed plan composes a PLD (about 0.1–0.3 s for 20 distinct
    releases; identical releases are composed at once), and a search takes 15–20 evaluations.

    Calibrating is free: nothing is charged, and another process may spend in between; the later
    ``spend_plan`` checks again. Tight (PLD) composition is valid for releases fixed before any of them
    runs: run exactly these mechanisms, each once, and do not pick among them from earlier results. A
    Gaussian release is built with :meth:`~dp_pipeline.mechanisms.Gaussian.from_mu` (σ = Δ/μ, guarantee
    μ-GDP). Group sizes enter through each release's event (Laplace and Gaussian noise see a sensitivity
    kΔ; other mechanisms the group guarantee), so each release may have its own.

    An Airflow run calibrates its tasks this way (one release per attempt and map index) against its share:
    ``target=BudgetPolicy.declare(share, rule, relation)``.

    References
    ----------
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
    Koskela, Jälkö & Honkela, "Computing tight differential privacy guarantees using FFT", AISTATS 2020.
    PipelineDP, ``PLDBudgetAccountant`` (a search over one noise scale with dp-accounting's PLD).

    Examples
    --------
    >>> from dp_pipeline import ApproxDP, PlannedRelease, allocate
    >>> plan = [PlannedRelease("gaussian", sensitivity=1.0) for _ in range(20)]
    >>> allocation = allocate(plan, target=ApproxDP(1.0, 1e-6))
    >>> round(allocation[0].std, 2)
    18.89
    """
    plans = _check_releases(releases)
    decided = _check_fixed(fixed)
    fitted, side = _budget_holder(accountant, dataset, target, against)
    goal = fitted.goal(side)
    delta = _goal_delta(goal)

    def fits(scale: float) -> bool:
        return fitted.fits([*decided, *_calibrate(plans, scale)], delta)

    guess = _first_guess(plans, goal)
    scale = _least_fitting(fits, guess)
    if scale is None:
        largest = [*decided, *_calibrate(plans, guess * 2.0**_MAX_STEPS)]
        raise _no_fit(fitted, fitted.price(largest, delta).cost, bool(decided))
    chosen = _calibrate(plans, scale)
    cost = fitted.price([*decided, *chosen], delta)
    return Allocation(chosen, scale, goal, cost.cost, cost.method)


def _goal_delta(goal: Guarantee) -> float | None:
    """The δ a plan fitted to ``goal`` is priced at: the goal's δ when it has one above 0 (a pure plan may
    then use it: its PLD at δ > 0 is far below Σε), else None (the rule's default)."""
    if isinstance(goal, ApproxDP) and goal.delta > 0.0:
        return goal.delta
    return None
