"""Composite estimators: each DP step charges its own release; all or nothing only when asked for.

A Pipeline, ColumnTransformer or FeatureUnion runs its steps one after the other (or in joblib workers),
and each DP step charges its ledger just before it draws its noise, as it does on its own. Nothing looks
for the call a step runs in: a step's ``accountant`` parameter alone says what it pays. So when a later step
of a call is refused, the earlier steps stay charged and the call returns nothing: the ledger then counts
releases whose output was never returned, an over-count, never an under-count (every release that drew
noise was charged before it did).

To charge a call's DP steps all or none, say so:

* :class:`AllOrNothing` wraps a composite. Before each call it reserves the total of the DP steps the call
  releases through (:func:`releases`), all datasets or none, and runs the call on a copy whose DP steps pay
  from the reservations (``set_params(accountant=reservation)`` on clones and copies, so that joblib
  workers pay from them too: a reservation pickles as its ledger's URL, dataset and key).
* :func:`search_cost` gives the total cost of a ``GridSearchCV``, ``RandomizedSearchCV`` or
  ``cross_validate`` before it runs (candidates × splits × (fit + scoring), plus the refit), and
  :func:`reserve_search` reserves it and hands back a clone of the search that pays from the reservation
  and raises errors instead of scoring them ``NaN`` (``error_score="raise"``).

Neither changes the estimators it is given: it works on clones (``sklearn.base.clone`` then
``set_params``) and, for a fitted estimator, on a copy that shares everything but its DP steps.

What a step costs before it runs: once fitted, its ``cost_``; a step that the call fits first (``fit``,
``fit_transform``) is reserved at :meth:`~dp_pipeline.transformers._base.DPTransformer.declared_cost`, the
most one ``transform`` can cost whatever the number of its features, so its payment always fits.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import (
    GridSearchCV,
    ParameterGrid,
    ParameterSampler,
    RandomizedSearchCV,
    check_cv,
)
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from dp_pipeline._spending import as_spender
from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting import BudgetReport, DatasetHandle, PrivacyAccountant, Request, Reservation
from dp_pipeline.events import PrivacyEvent, composite_event
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.transformers._base import DPTransformer

__all__ = [
    "AllOrNothing",
    "CallCost",
    "Release",
    "ReservedSearch",
    "releases",
    "reserve_search",
    "search_cost",
]

COMPOSITES = (Pipeline, ColumnTransformer, FeatureUnion)
_FITTING = ("fit", "fit_transform", "fit_predict")
_SEARCHES = (GridSearchCV, RandomizedSearchCV)
_Key = tuple[int, str, int]  # accountant (by identity), dataset, group size: one reservation
_Handle = TypeVar("_Handle")


# ------------------------------------------------------------------------------------------------------
# which DP steps a call releases through


@dataclass(frozen=True)
class Release:
    """One DP step's release in a call: the step and the method the call runs on it. A fitting method
    (``fit`` with ``bounds="dp"``, ``fit_transform``) costs what the step declares it may cost
    (:meth:`~DPTransformer.declared_fit_cost`); ``transform`` costs the fitted ``cost_``."""

    step: DPTransformer
    method: str

    @property
    def cost(self) -> PrivacyEvent:
        fitted: PrivacyEvent | None = getattr(self.step, "cost_", None)
        if self.method == "transform" and fitted is not None:
            return fitted
        declared = self.step.declared_fit_cost(joint=self.method != "fit")
        assert declared is not None  # releases() lists a fit only when it charges
        return declared


def releases(estimator: Any, method: str) -> list[Release]:
    """The DP steps that one call of ``estimator.method`` releases through, in the order they run.

    A DP transformer releases in ``transform`` and ``fit_transform``, and in ``fit`` when it learns from X
    (``bounds="dp"``). A Pipeline's steps before the last run
    ``fit_transform`` in the fitting methods and ``transform`` otherwise, and the last step runs the method
    itself; a ColumnTransformer's transformers (and remainder) run ``fit_transform`` in ``fit`` and
    ``fit_transform``, ``transform`` otherwise; a FeatureUnion's run the method (``fit`` fits only).
    Other estimators release nothing; one that holds DP steps in another way raises InvalidParameterError,
    since what its calls release cannot be told.
    """
    if isinstance(estimator, DPTransformer):
        charges = method in ("transform", "fit_transform") or (
            method == "fit" and estimator.declared_fit_cost(joint=False) is not None
        )
        return [Release(estimator, method)] if charges else []
    fitting = method in _FITTING
    if isinstance(estimator, Pipeline):
        steps = [step for _, step in estimator.steps if not _skipped(step)]
        if not steps:
            return []
        *head, last = steps
        inner = "fit_transform" if fitting else "transform"
        return [r for step in head for r in releases(step, inner)] + releases(last, method)
    if isinstance(estimator, ColumnTransformer):
        if fitting:
            children = [t for _, t, _ in estimator.transformers] + [estimator.remainder]
        else:
            children = [t for _, t, _ in getattr(estimator, "transformers_", estimator.transformers)]
        inner = "fit_transform" if fitting else "transform"
        return [r for child in children if not _skipped(child) for r in releases(child, inner)]
    if isinstance(estimator, FeatureUnion):
        inner = method if method in ("fit", "fit_transform") else "transform"
        children = [t for _, t in estimator.transformer_list]
        return [r for child in children if not _skipped(child) for r in releases(child, inner)]
    if _holds_dp_steps(estimator):
        raise InvalidParameterError(
            f"{type(estimator).__name__} holds DP steps, but what its calls release cannot be told; put DP "
            "steps in a Pipeline, ColumnTransformer or FeatureUnion",
            "estimator",
        )
    return []


def _skipped(step: Any) -> bool:
    return step is None or isinstance(step, str)  # "passthrough", "drop"


def _holds_dp_steps(estimator: Any) -> bool:
    return any(isinstance(obj, DPTransformer) for obj in _reachable(estimator) if obj is not estimator)


def _reachable(root: Any) -> Iterator[Any]:
    """Every estimator reachable from ``root`` through its attributes (parameters and fitted state), and
    lists, tuples and dicts of them, once each."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, BaseEstimator):
            yield obj
            todo.extend(vars(obj).values())


# ------------------------------------------------------------------------------------------------------
# reserving a call's total


@dataclass
class _Group:
    """The releases of one call charged to one accountant, dataset and group size: one reservation."""

    accountant: PrivacyAccountant
    dataset: str
    group_size: int
    costs: list[PrivacyEvent] = field(default_factory=list)

    @property
    def key(self) -> _Key:
        return id(self.accountant), self.dataset, self.group_size

    @property
    def event(self) -> PrivacyEvent:
        """The releases as one event: a ``"composite"`` of them (charged as the sum of their charges)."""
        if len(self.costs) == 1:
            return self.costs[0]
        return composite_event(self.costs, self.costs[0].relation)


def _charged(step: DPTransformer) -> _Group | None:
    """The empty group of the reservation a step would pay from: its dataset's, when it charges a dataset
    (an accountant with ``dataset=``, or a dataset handle); None when it pays from a reservation already or
    charges nothing. InvalidParameterError for a bad accountant, dataset or group size."""
    spender = as_spender(step.accountant, step.dataset)
    k = check_positive_int(step.group_size, "group_size")
    if isinstance(spender, DatasetHandle) and isinstance(spender.accountant, PrivacyAccountant):
        return _Group(spender.accountant, spender.name, k)
    return None


def _groups(calls: Sequence[Release]) -> list[_Group]:
    """The releases that charge a dataset, by accountant, dataset and group size (every step checked
    first: a bad accountant or dataset raises InvalidParameterError before anything is reserved). Releases
    that charge nothing or pay from a reservation already are left to themselves."""
    groups: dict[_Key, _Group] = {}
    for release in calls:
        group = _charged(release.step)
        if group is not None:
            groups.setdefault(group.key, group).costs.append(release.cost)
    return list(groups.values())


def _reserve(groups: Sequence[_Group], label: str) -> list[tuple[_Group, Reservation]]:
    """Reserve every group's total (committed: the call will read data), all or none: when one is refused,
    the ones already reserved are cancelled (no data was read yet) and the refusal is raised."""
    done: list[Reservation] = []
    try:
        for group in groups:
            done.append(
                group.accountant.reserve(group.dataset, group.event, group_size=group.group_size, label=label)
            )
    except BaseException:
        for reservation in done:
            reservation.cancel("another dataset of the same call was refused; no data was read")
        raise
    return [(group, reservation.commit()) for group, reservation in zip(groups, done, strict=True)]


def _label(estimator: Any, method: str, count: int) -> str:
    return f"{type(estimator).__name__}.{method}: {count} DP releases, all or nothing"


# ------------------------------------------------------------------------------------------------------
# pointing DP steps at the reservations, on clones and copies


def _paying(
    steps: Iterable[tuple[_Handle, DPTransformer]], calls: Sequence[Release], label: str
) -> tuple[dict[_Handle, Reservation], list[tuple[_Group, Reservation]]]:
    """Reserve the total of ``calls`` (all or none) and tell which reservation each of ``steps`` (a DP
    step, named by a handle) pays from: the one of its accountant, dataset and group size. Every step and
    every release is checked before anything is reserved."""
    plan = {h: group.key for h, step in steps if (group := _charged(step)) is not None}
    reserved = _reserve(_groups(calls), label)
    payers = {group.key: reservation for group, reservation in reserved}
    return {h: payers[key] for h, key in plan.items() if key in payers}, reserved


def _accountant_params(estimator: Any) -> dict[str, DPTransformer]:
    """The ``accountant`` parameter of every DP step among an (unfitted) estimator's parameters, by its
    name for ``set_params`` (``"pipeline__step__accountant"``)."""
    if isinstance(estimator, DPTransformer):
        return {"accountant": estimator}
    params = estimator.get_params(deep=True)
    return {f"{name}__accountant": step for name, step in params.items() if isinstance(step, DPTransformer)}


def _cloned_paying(
    estimator: Any, calls: Sequence[Release], label: str
) -> tuple[Any, list[tuple[_Group, Reservation]]]:
    """A clone of ``estimator`` whose DP steps pay from a reservation of the total of ``calls`` (made here,
    all or none), set through ``set_params``; ``estimator`` is left as it is."""
    working = clone(estimator)
    payers, reserved = _paying(_accountant_params(working).items(), calls, label)
    return working.set_params(**payers), reserved


def _dp_steps(root: Any) -> list[DPTransformer]:
    return [obj for obj in _reachable(root) if isinstance(obj, DPTransformer)]


def _repointed(fitted: Any, payers: Mapping[int, Any]) -> Any:
    """A copy of a fitted estimator in which each DP step named (by identity) in ``payers`` is a shallow
    copy that pays ``payers[id(step)]`` (``set_params(accountant=…)``): it shares the step's fitted state
    and kept generator, so a seeded step's noise goes on as in the original, never repeats. The other
    estimators are shared (a call only reads them); the composites holding them are copied. ``fitted``
    is left as it is."""
    memo: dict[int, Any] = {}
    for obj in _reachable(fitted):
        if id(obj) in payers:
            memo[id(obj)] = copy.copy(obj).set_params(accountant=payers[id(obj)])
        elif not isinstance(obj, COMPOSITES):
            memo[id(obj)] = obj
    return copy.deepcopy(fitted, memo)


def _charging_again(fitted: Any, reserved: Sequence[tuple[_Group, Reservation]]) -> Any:
    """A copy of ``fitted`` in which the DP steps that pay from one of ``reserved`` charge that
    reservation's accountant again (a step back from a joblib worker holds a copy of the reservation: it
    is known by its dataset and key)."""
    back = {(r.dataset, r.key): group for group, r in reserved}
    payers: dict[int, Any] = {}
    for step in _dp_steps(fitted):
        paying = step.accountant
        group = back.get((paying.dataset, paying.key)) if isinstance(paying, Reservation) else None
        if group is not None:  # the accountant with the step's dataset=, or the handle of a step without one
            same = step.dataset == group.dataset
            payers[id(step)] = group.accountant if same else group.accountant.dataset(group.dataset)
    return _repointed(fitted, payers)


# ------------------------------------------------------------------------------------------------------
# explicit all or nothing


def _inner_has(method: str) -> Callable[[Any], bool]:
    def check(self: AllOrNothing) -> bool:
        inner = self.estimator_ if hasattr(self, "estimator_") else self.estimator
        return hasattr(inner, method)

    return check


def _delegated(method: str) -> Any:
    """The wrapper's ``method``: the fitted estimator's, its DP releases reserved together first (present
    when the estimator has it)."""

    def call(self: AllOrNothing, *args: Any, **params: Any) -> Any:
        return self._call(method, *args, **params)

    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"The estimator's ``{method}``, its DP releases reserved together first."
    return available_if(_inner_has(method))(call)


class AllOrNothing(MetaEstimatorMixin, BaseEstimator):
    """Charge every DP step of each call of a composite estimator, or none.

    Before each call (``fit``, ``fit_transform``, ``transform``, ``predict``, ``predict_proba``,
    ``decision_function``, ``score``) it reserves the total cost of the DP steps that the call releases
    through (:func:`releases`; a step the call fits first at its declared cost), one reservation per
    accountant, dataset and group size, all or none: a refusal raises ``BudgetExceededError`` before any
    step draws noise, and nothing is charged. The call then runs on a copy of the estimator whose DP steps
    pay from the reservations, in this process or in joblib workers (``n_jobs > 1``: a reservation pickles
    as its ledger's URL, dataset and key). Reserved budget that a call did not use stays charged: its steps
    may have released data.

    Without it, a Pipeline, ColumnTransformer or FeatureUnion charges each DP step just before that step's
    noise: a refused later step leaves the earlier ones charged.

    Parameters
    ----------
    estimator : estimator
        A Pipeline, ColumnTransformer or FeatureUnion (or a DP transformer); never changed (``fit`` works on
        a clone).

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone; its DP steps charge their own accountants (the ones ``estimator`` names).

    Notes
    -----
    Guarantee: for each call, the ledger holds a charge of at least what the call released, made before
    any step drew noise. Proof: the call's releases are listed from the composite's structure
    (:func:`releases`), each at an upper bound of its cost (``cost_`` once fitted, else the declared cost);
    their sum per dataset is reserved and committed before the call runs; every DP step of the copy that
    runs pays from its dataset's reservation, which refuses a payment beyond what it holds
    (:meth:`~dp_pipeline.accounting._reservation.Reservation.spend`). A release that the listing missed
    (a step inside an estimator of another kind, refused by :func:`releases`, or a step that is not a
    parameter) pays its own accountant, as it does without the wrapper: it is still charged before its
    noise, so nothing is released uncharged.

    The copy is made per call: a fitting call clones ``estimator`` and points its DP steps at the
    reservations with ``set_params``; a fitted call copies the composites of ``estimator_`` and replaces
    each DP step by a shallow copy given ``accountant=reservation`` (it shares the step's fitted state and
    generator). Calls from several threads need no lock: none changes a shared object.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.compose import ColumnTransformer
    >>> from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
    >>> from dp_pipeline.transformers import AllOrNothing, LaplaceNoise
    >>> acct = PrivacyAccountant("memory://")
    >>> acct.set_budget("d", PureDP(1.5))
    >>> step = LaplaceNoise(epsilon=1.0, lower=0.0, upper=1.0, accountant=acct, dataset="d")
    >>> both = AllOrNothing(ColumnTransformer([("a", step, [0]), ("b", step, [1])]))
    >>> try:
    ...     both.fit_transform(np.zeros((4, 2)))
    ... except BudgetExceededError:
    ...     print(acct.spent("d").epsilon)
    0.0
    """

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator

    def fit(self, X: Any, y: Any = None, **params: Any) -> AllOrNothing:
        """Fit a clone of the estimator, its DP steps' releases reserved together first."""
        self._fitted("fit", X, y, **params)
        return self

    def fit_transform(self, X: Any, y: Any = None, **params: Any) -> Any:
        """Fit a clone and release its transform of X, all DP releases reserved together first."""
        return self._fitted("fit_transform", X, y, **params)

    def _fitted(self, method: str, X: Any, y: Any, **params: Any) -> Any:
        calls = releases(self.estimator, method)
        working, reserved = _cloned_paying(self.estimator, calls, _label(self.estimator, method, len(calls)))
        out = getattr(working, method)(X, y, **params)
        self.estimator_ = _charging_again(working, reserved)
        return out

    def _call(self, method: str, *args: Any, **params: Any) -> Any:
        check_is_fitted(self)
        fitted = self.estimator_
        calls = releases(fitted, method)
        steps = ((id(step), step) for step in _dp_steps(fitted))
        payers, _ = _paying(steps, calls, _label(fitted, method, len(calls)))
        return getattr(_repointed(fitted, payers), method)(*args, **params)

    transform = _delegated("transform")
    predict = _delegated("predict")
    predict_proba = _delegated("predict_proba")
    decision_function = _delegated("decision_function")
    score = _delegated("score")

    @property
    def classes_(self) -> Any:
        """The fitted estimator's classes (classifiers)."""
        return self.estimator_.classes_

    def get_feature_names_out(self, input_features: Any = None) -> Any:
        """The fitted estimator's output feature names."""
        return self.estimator_.get_feature_names_out(input_features)


# ------------------------------------------------------------------------------------------------------
# searches


@dataclass(frozen=True)
class CallCost:
    """What a search (or cross-validation) charges one dataset before it runs: its accountant's report of
    the total (``cost``, what reserving it charges now), how many releases, and their group size."""

    dataset: str
    group_size: int
    releases: int
    cost: BudgetReport
    accountant: PrivacyAccountant = field(repr=False, compare=False)


def _search_calls(
    search: Any, X: Any, y: Any, groups: Any, cv: Any, scoring: Any, return_train_score: bool
) -> tuple[Any, list[Release]]:
    """The estimator whose DP steps a search or cross-validation runs, and every release it makes."""
    if isinstance(search, _SEARCHES):
        if cv is not None or scoring is not None or return_train_score:
            raise InvalidParameterError(
                "cv, scoring and return_train_score are the search's own parameters; set them on it", "cv"
            )
        estimator, cv, scoring, return_train_score = (
            search.estimator,
            search.cv,
            search.scoring,
            search.return_train_score,
        )
        candidates = _candidates(search)
        refit = bool(search.refit)
    else:
        estimator, candidates, refit = search, [{}], False
    n_splits = check_cv(cv, y, classifier=is_classifier(estimator)).get_n_splits(X, y, groups)
    scores = _scorings(scoring) * (2 if return_train_score else 1)
    calls: list[Release] = []
    refits: dict[str, list[Release]] = {}
    for params in candidates:
        candidate = clone(estimator).set_params(**params)
        fit, scored = releases(candidate, "fit"), releases(candidate, "score")
        calls.extend((fit + scored * scores) * n_splits)
        refits.setdefault(repr([r.cost for r in fit]), fit)
    if refit:  # the best candidate is known only afterwards: each distinct fitting cost once
        calls.extend(r for fit in refits.values() for r in fit)
    return estimator, calls


def _candidates(search: GridSearchCV | RandomizedSearchCV) -> list[dict[str, Any]]:
    if isinstance(search, GridSearchCV):
        return list(ParameterGrid(search.param_grid))
    if not isinstance(search.random_state, int):
        raise InvalidParameterError(
            "a RandomizedSearchCV draws its candidates when it runs; give it an int random_state so that "
            "their cost is known before",
            "random_state",
        )
    sampler = ParameterSampler(search.param_distributions, search.n_iter, random_state=search.random_state)
    return list(sampler)


def _scorings(scoring: Any) -> int:
    """How many times one evaluation runs the estimator: once per metric (multi-metric scoring may share
    predictions, so this can only count more than happens)."""
    if scoring is None or isinstance(scoring, str) or callable(scoring):
        return 1
    return max(1, len(scoring))


def search_cost(
    search: Any,
    X: Any,
    y: Any = None,
    *,
    groups: Any = None,
    cv: Any = None,
    scoring: Any = None,
    return_train_score: bool = False,
) -> list[CallCost]:
    """The total cost of a search or cross-validation before it runs, per dataset; nothing is charged.

    Parameters
    ----------
    search : GridSearchCV, RandomizedSearchCV or estimator
        A search (its candidates, ``cv``, ``scoring``, ``return_train_score`` and ``refit`` are read from
        it; a RandomizedSearchCV needs an int ``random_state``), or the estimator that ``cross_validate``
        will run (then give ``cv``, ``scoring`` and ``return_train_score`` as you give them to it).
    X, y, groups
        The data, as the search will get it (only the number of splits is read from it).

    Returns
    -------
    list of CallCost
        Per accountant, dataset and group size: the number of releases and what reserving them charges
        (:meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.quote`).

    Notes
    -----
    Counted: candidates × splits × (the DP releases of one ``fit`` + those of one evaluation per metric, and
    as many again on the training part with ``return_train_score``), plus the refit. The refit's candidate
    is known only after the search, so when candidates differ in what fitting costs (a grid over a DP
    step's ε), each distinct cost is counted once, an upper bound. A step the search fits is counted at its
    :meth:`~dp_pipeline.transformers._base.DPTransformer.declared_cost`.
    """
    _, calls = _search_calls(search, X, y, groups, cv, scoring, return_train_score)
    return [
        CallCost(
            g.dataset,
            g.group_size,
            len(g.costs),
            g.accountant.quote(g.dataset, Request.one(g.event, g.group_size)).costs[0],
            g.accountant,
        )
        for g in _groups(calls)
    ]


@dataclass(frozen=True)
class ReservedSearch:
    """What :func:`reserve_search` hands back: the search to run, paying from the reservations.

    Attributes
    ----------
    search : estimator
        A clone of the search (or of the estimator given for ``cross_validate``) whose DP steps pay from
        ``reservations``; a search's clone has ``error_score="raise"``.
    reservations : list of Reservation
        One per accountant, dataset and group size, committed: the search's whole cost is charged.
    """

    search: Any
    reservations: list[Reservation]


@contextmanager
def reserve_search(
    search: Any,
    X: Any,
    y: Any = None,
    *,
    groups: Any = None,
    cv: Any = None,
    scoring: Any = None,
    return_train_score: bool = False,
) -> Iterator[ReservedSearch]:
    """Reserve the whole cost of a search or cross-validation (:func:`search_cost`), and hand back a clone
    of it that pays from the reservation: it has its whole budget, or it does not start.

    All datasets are reserved first, all or none (``BudgetExceededError``, nothing charged). Run the clone
    it yields (``reserved.search``) inside the block: its DP steps pay from the reservations (its own
    clones and joblib workers too), and a search clone raises errors instead of scoring them as
    ``error_score`` (it has ``error_score="raise"``), so that a refused release can never become a ``NaN``
    score. Give ``cross_validate`` (and ``cross_val_score``) ``error_score="raise"`` yourself. ``search``
    itself is never changed. On exit the clone's ``best_estimator_`` becomes a copy whose DP steps charge
    their own accountants again (estimators that ``cross_validate`` returns keep paying from the
    reservation). Budget reserved and not used stays charged.

    Parameters
    ----------
    search, X, y, groups, cv, scoring, return_train_score
        As for :func:`search_cost`.

    Yields
    ------
    ReservedSearch
        The clone to run and the reservations.

    Notes
    -----
    Guarantee: every release of the run is paid from a reservation made before it started, or charged on
    its own before its noise. Proof: the reservations hold :func:`search_cost` (an upper bound of what the
    run releases, see its notes); the clone's DP steps are the ones the search clones for each candidate
    and refit, so each of their releases pays from its reservation, which refuses a payment beyond what it
    holds. A DP step that a candidate brings in (a grid over steps) is not among the clone's parameters:
    it charges its own accountant as usual, an over-count on top of the reservation.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sklearn.pipeline import make_pipeline
    >>> from dp_pipeline import PrivacyAccountant, PureDP
    >>> from dp_pipeline.transformers import LaplaceNoise, reserve_search, search_cost
    >>> acct = PrivacyAccountant("memory://")
    >>> acct.set_budget("d", PureDP(20.0))
    >>> X, y = np.random.default_rng(0).uniform(0, 1, (40, 2)), np.arange(40) % 2
    >>> pipe = make_pipeline(LaplaceNoise(epsilon=0.5, lower=0, upper=1, accountant=acct, dataset="d"),
    ...                      LogisticRegression())
    >>> search = GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0]}, cv=3)
    >>> [c.cost.epsilon for c in search_cost(search, X, y)]   # 2 × 3 × (fit + score) + refit = 13 × 0.5
    [6.5]
    >>> with reserve_search(search, X, y) as reserved:
    ...     _ = reserved.search.fit(X, y)
    >>> acct.spent("d").epsilon
    6.5
    """
    estimator, calls = _search_calls(search, X, y, groups, cv, scoring, return_train_score)
    label = f"{type(search).__name__} of {type(estimator).__name__}: {len(calls)} DP releases"
    working, reserved = _cloned_paying(search, calls, label)
    if isinstance(search, _SEARCHES):
        working.set_params(error_score="raise")
    try:
        yield ReservedSearch(working, [reservation for _, reservation in reserved])
    finally:
        if hasattr(working, "best_estimator_"):
            working.best_estimator_ = _charging_again(working.best_estimator_, reserved)
