"""One call of a composite estimator charges all its DP steps, or none; a search has its whole budget or
does not start.

A Pipeline, ColumnTransformer or FeatureUnion runs its steps one after the other (or in worker processes),
and each DP step charges its ledger when it releases. Charged one by one, a call can pay for its first
releases and then be refused, losing what it paid and returning nothing. Here the total of the call is
reserved **before any step draws noise**, in one transaction per dataset, and every DP step of the call
pays from that reservation (:meth:`~dp_pipeline.accounting.reservation.Reservation.spend`). If the total
does not fit, ``BudgetExceededError`` is raised and nothing is charged.

How a call finds its DP steps. scikit-learn has no hook before a composite's steps run, so:

* **In one process** (a Pipeline; a ColumnTransformer or FeatureUnion with ``n_jobs`` None or 1), the first
  DP step of a call that releases looks up the call stack for the outermost composite method being run
  (``fit``, ``fit_transform``, ``transform``, ``predict``, ``score`` …), lists the DP steps that this
  method releases through (:func:`releases`), and if there are two or more, reserves their total once for
  the call; every DP step of the call then pays from it. Nothing to do for the user. A call with one DP
  step charges it directly, as before.
* **Across processes** the steps of a ColumnTransformer or FeatureUnion with ``n_jobs > 1`` run in joblib
  workers, where the composite's call is not on the stack, and scikit-learn passes nothing of the parent's
  context to them but its own configuration. Such a step charging a plain accountant is refused before it
  draws noise (InvalidParameterError naming :class:`AllOrNothing`), in every worker: the call charges
  nothing. Wrap the composite in :class:`AllOrNothing`, which reserves in the parent and hands the steps the
  reservations themselves (a reservation pickles as its ledger's URL, dataset and key, and the workers pay
  from it), or use ``n_jobs=1``.

What a step costs before it runs: once fitted, its ``cost_``; a step that the call fits first (``fit``,
``fit_transform``) is reserved at :meth:`~dp_pipeline.transformers._base.DPTransformer.declared_cost`, the
most one ``transform`` can cost whatever the number of its features, so its payment always fits.

Searches: :func:`search_cost` gives the total cost of a ``GridSearchCV``, ``RandomizedSearchCV`` or
``cross_validate`` before it runs (candidates × splits × (fit + scoring), plus the refit), and
:func:`reserve_search` reserves it, so that the search has its whole budget or does not start; inside it
the search raises errors instead of scoring them ``NaN`` (``error_score="raise"``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

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

from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting import BudgetReport, PrivacyAccountant, Reservation
from dp_pipeline.accounting.request import Request
from dp_pipeline.charging import check_ledger
from dp_pipeline.events import PrivacyEvent, composite_event
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.transformers._base import DPTransformer

__all__ = ["AllOrNothing", "CallCost", "Release", "releases", "reserve_search", "search_cost", "spender_for"]

COMPOSITES = (Pipeline, ColumnTransformer, FeatureUnion)
_FITTING = ("fit", "fit_transform", "fit_predict")
_CALLS = frozenset(
    {
        *_FITTING,
        "transform",
        "predict",
        "predict_proba",
        "predict_log_proba",
        "decision_function",
        "score",
        "score_samples",
    }
)
_HELPERS = frozenset({"_fit_transform_one", "_transform_one"})  # sklearn.pipeline runs composite steps
_SEARCHES = (GridSearchCV, RandomizedSearchCV)


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
    def event(self) -> PrivacyEvent:
        """The releases as one event: a ``"composite"`` of them (charged as the sum of their charges)."""
        if len(self.costs) == 1:
            return self.costs[0]
        return composite_event(self.costs, self.costs[0].relation)


def _group_key(step: DPTransformer) -> tuple[int, str, int]:
    return id(step.accountant), step.dataset, check_positive_int(step.group_size, "group_size")


def _groups(calls: Sequence[Release]) -> list[_Group]:
    """The releases that charge a PrivacyAccountant, by accountant, dataset and group size (checked first:
    a bad accountant or dataset raises InvalidParameterError before anything is reserved). Releases that
    charge nothing or pay from a reservation already are left to themselves."""
    groups: dict[tuple[int, str, int], _Group] = {}
    for release in calls:
        step = release.step
        check_ledger(step.accountant, step.dataset)
        if not isinstance(step.accountant, PrivacyAccountant):
            continue  # "unaccounted", a Reservation, or another spender: charged as it says
        key = _group_key(step)
        groups.setdefault(key, _Group(step.accountant, step.dataset, key[2])).costs.append(release.cost)
    return list(groups.values())


def _reserve(groups: Sequence[_Group], label: str) -> list[Reservation]:
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
    return [reservation.commit() for reservation in done]


def _label(estimator: Any, method: str, count: int) -> str:
    return f"{type(estimator).__name__}.{method}: {count} DP releases, all or nothing"


# ------------------------------------------------------------------------------------------------------
# in one process: the call on the stack


@dataclass
class _Call:
    """A composite call in progress that holds reservations: its frame (kept, so that its id is not reused
    while the entry exists), the reservation of each group, and how many payments are still to come."""

    frame: FrameType
    payers: dict[tuple[int, str, int], Reservation]
    left: int


_LOCK = threading.Lock()
_ACTIVE: dict[tuple[int, int], _Call] = {}


def spender_for(step: DPTransformer) -> Any:
    """What a DP step's release is charged to now: its accountant, or the reservation of the composite
    call it runs in (reserved here by the call's first release; see the module notes).

    Raises
    ------
    InvalidParameterError
        The step runs a composite's part in a worker (``n_jobs > 1``) and charges a plain accountant: the
        call cannot be made all or nothing from there (nothing is charged).
    BudgetExceededError
        The call's total does not fit (nothing is charged).
    """
    accountant = step.accountant
    if not isinstance(accountant, PrivacyAccountant):
        return accountant
    stack = _stack(sys._getframe(1))
    found = _outermost_call(stack)
    if found is None:
        if any(_is_helper(frame) for frame in stack):
            raise InvalidParameterError(
                f"{type(step).__name__} runs as a part of a ColumnTransformer or FeatureUnion in a joblib "
                "worker (n_jobs > 1), where its call cannot be charged all or nothing; nothing was charged. "
                "Wrap the composite in dp_pipeline.transformers.AllOrNothing(...), or give it n_jobs=1",
                "accountant",
            )
        return accountant
    frame, estimator, method = found
    key = (threading.get_ident(), id(frame))
    live = {id(f) for f in stack}
    with _LOCK:
        _forget_finished(live)
        call = _ACTIVE.get(key)
        if call is None:
            calls = releases(estimator, method)
            groups = _groups(calls)
            count = sum(len(g.costs) for g in groups)
            if count < 2:
                return accountant  # one release needs no reservation
            reserved = _reserve(groups, _label(estimator, method, count))
            payers = {
                (id(g.accountant), g.dataset, g.group_size): r for g, r in zip(groups, reserved, strict=True)
            }
            call = _ACTIVE[key] = _Call(frame, payers, count)
        payer = call.payers.get(_group_key(step))
        if payer is None:
            return accountant  # not one of the releases the call declares (e.g. inside a custom step)
        call.left -= 1
        if call.left <= 0:
            del _ACTIVE[key]
        return payer


def _stack(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _outermost_call(stack: Sequence[FrameType]) -> tuple[FrameType, Any, str] | None:
    """The outermost frame running a public method of a Pipeline, ColumnTransformer or FeatureUnion."""
    found = None
    for frame in stack:
        name = frame.f_code.co_name
        if name in _CALLS:
            owner = frame.f_locals.get("self")
            if isinstance(owner, COMPOSITES):
                found = (frame, owner, name)
    return found


def _is_helper(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_name in _HELPERS and code.co_filename.replace("\\", "/").endswith("sklearn/pipeline.py")


def _forget_finished(live: set[int]) -> None:
    """Drop the calls of this thread that are no longer on its stack, and those of threads that ended (a
    call that raised before all its steps paid)."""
    me, threads = threading.get_ident(), sys._current_frames()
    for key, call in list(_ACTIVE.items()):
        thread = key[0]
        if (thread == me and id(call.frame) not in live) or (thread != me and thread not in threads):
            del _ACTIVE[key]


# ------------------------------------------------------------------------------------------------------
# explicit: the wrapper, and searches


@contextmanager
def _paying(root: Any, calls: Sequence[Release], label: str) -> Iterator[list[Reservation]]:
    """Reserve the total of ``calls`` (all or none) and make the DP steps reachable from ``root`` pay from
    the reservations while the block runs: their ``accountant`` is the reservation of their group (copies,
    clones and workers inherit it). On exit every DP step reachable from ``root`` that pays from one of
    them charges its accountant again."""
    groups = _groups(calls)
    if not groups:
        yield []
        return
    reserved = _reserve(groups, label)
    payers = {(id(g.accountant), g.dataset, g.group_size): r for g, r in zip(groups, reserved, strict=True)}
    originals = {r.key: g.accountant for g, r in zip(groups, reserved, strict=True)}
    with _SWAPPING:
        for step in _dp_steps(root):
            if isinstance(step.accountant, PrivacyAccountant) and _group_key(step) in payers:
                step.accountant = payers[_group_key(step)]
        try:
            yield reserved
        finally:
            for step in _dp_steps(root):
                paying = step.accountant
                if isinstance(paying, Reservation) and paying.key in originals:
                    step.accountant = originals[paying.key]


def _dp_steps(root: Any) -> list[DPTransformer]:
    return [obj for obj in _reachable(root) if isinstance(obj, DPTransformer)]


_SWAPPING = threading.RLock()  # the steps' accountants are swapped one call at a time


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
    """Charge every DP step of each call of a composite estimator, or none, also with ``n_jobs > 1``.

    Before each call (``fit``, ``fit_transform``, ``transform``, ``predict``, ``predict_proba``,
    ``decision_function``, ``score``) it reserves the total cost of the DP steps that the call releases
    through (:func:`releases`; a step the call fits first at its declared cost), one reservation per
    accountant, dataset and group size, all or none: a refusal raises ``BudgetExceededError`` before any
    step draws noise, and nothing is charged. The steps then pay from the reservations, in this process or
    in joblib workers (a reservation pickles as its ledger's URL, dataset and key). Reserved budget that a
    call did not use stays charged: its steps may have released data.

    Plain composites run in one process are all or nothing without it (see
    :mod:`dp_pipeline.transformers.composite`); use it for a ColumnTransformer or FeatureUnion with
    ``n_jobs > 1``, whose steps are otherwise refused in the workers.

    Parameters
    ----------
    estimator : estimator
        A Pipeline, ColumnTransformer or FeatureUnion (or a DP transformer), cloned by ``fit``.

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone; its DP steps charge their own accountants between calls.

    Notes
    -----
    The steps' accountants are swapped for the reservations during a call, one call at a time in a process
    (calls of wrapped estimators from several threads wait for each other).

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
        estimator = clone(self.estimator)
        calls = releases(estimator, method)
        with _paying(estimator, calls, _label(estimator, method, len(calls))):
            out = getattr(estimator, method)(X, y, **params)
        self.estimator_ = estimator
        return out

    def _call(self, method: str, *args: Any, **params: Any) -> Any:
        check_is_fitted(self)
        estimator = self.estimator_
        calls = releases(estimator, method)
        with _paying(estimator, calls, _label(estimator, method, len(calls))):
            return getattr(estimator, method)(*args, **params)

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
        (:meth:`~dp_pipeline.accounting.accountant.PrivacyAccountant.quote`).

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
) -> Iterator[list[Reservation]]:
    """Reserve the whole cost of a search or cross-validation (:func:`search_cost`), then run it inside the
    block: it has its whole budget, or it does not start.

    All datasets are reserved before the block runs, all or none (``BudgetExceededError``, nothing charged).
    Inside the block the search's DP steps pay from the reservations (its clones and joblib workers too),
    and a search raises errors instead of scoring them as ``error_score`` (it is set to ``"raise"`` for the
    block), so that a refused release can never become a ``NaN`` score. Give ``cross_validate`` (and
    ``cross_val_score``) ``error_score="raise"`` yourself. On exit the steps charge their own accountants
    again (those of the search and its ``best_estimator_``; estimators that ``cross_validate`` returns keep
    paying from the reservation). Budget reserved and not used stays charged.

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
    >>> with reserve_search(search, X, y):
    ...     _ = search.fit(X, y)
    >>> acct.spent("d").epsilon
    6.5
    """
    estimator, calls = _search_calls(search, X, y, groups, cv, scoring, return_train_score)
    label = f"{type(search).__name__} of {type(estimator).__name__}: {len(calls)} DP releases"
    raising = isinstance(search, _SEARCHES)
    previous = search.error_score if raising else None
    with _paying(search, calls, label) as reserved:
        if raising:
            search.error_score = "raise"
        try:
            yield reserved
        finally:
            if raising:
                search.error_score = previous
