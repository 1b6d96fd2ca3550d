"""PrivacyAccountant: per-dataset privacy budgets over a persistent, hash-chained ledger.

The accountant does the arithmetic; a :class:`~dp_pipeline.accounting.ledger.base.LedgerStore` keeps the
records and provides the lock. Check and reserve happen in one transaction, so two processes can never
both take the last part of a budget, and a refusal writes nothing.
"""

from __future__ import annotations

import decimal
import functools
import getpass
import json
import math
import os
import socket
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from dp_pipeline._validation import check_positive_int, check_real
from dp_pipeline.accounting.composition import (
    as_approx_dp,
    compose_plan,
    compose_plan_gdp,
    event_gdp,
    flatten_events,
    group_event,
)
from dp_pipeline.accounting.ledger import LedgerStore, MemoryLedger, open_store
from dp_pipeline.accounting.ledger.base import (
    KEY_ENV,
    DatasetHead,
    DatasetState,
    LedgerRecord,
    LedgerTransaction,
    RecordSigner,
    ReservationRecords,
    canonical_json,
    check_chain,
    utc_now,
)
from dp_pipeline.accounting.ledger.urls import redact_url
from dp_pipeline.accounting.relations import to_relation
from dp_pipeline.events import DEFAULT_RELATION, RELATIONS, PrivacyEvent, Relation
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    UnknownDatasetError,
    UnsupportedCompositionError,
    printable,
)
from dp_pipeline.guarantees import (
    ApproxDP,
    GaussianDP,
    Guarantee,
    PureDP,
    format_guarantee,
    guarantee_from_dict,
    least_double_where,
)

_T = TypeVar("_T")

__all__ = [
    "BudgetReport",
    "LedgerEntry",
    "PrivacyAccountant",
    "ReleaseEntry",
    "Reservation",
    "UnknownDatasetError",
    "VerifyReport",
]

Method = Literal["basic", "gdp"]
Against = Literal["remaining", "budget"]

# Exact decimal arithmetic: a double's exact value has at most 309 digits before the point and 1074 after
# it, so a sum of them needs under 1,400 digits and a sum of their squares (μ²) under 2,800 (plus a few
# carries); Inexact is trapped so that a result that would need rounding raises instead of being rounded
# silently.
_EXACT = decimal.Context(
    prec=3000,
    Emax=100_000,
    Emin=-100_000,
    rounding=decimal.ROUND_HALF_EVEN,
    traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero],
)
_UP = decimal.Context(prec=40, rounding=decimal.ROUND_CEILING)
_DOWN = decimal.Context(prec=40, rounding=decimal.ROUND_FLOOR)
_ZERO = Decimal(0)
_MAX_NAME = 255
_MAX_KEY = 512


# ------------------------------------------------------------------------------------------------------
# exact arithmetic helpers

T = TypeVar("T")


def _dec(value: float) -> Decimal:
    """A float's exact binary value as a decimal (0.1 → 0.1000000000000000055511151231257827…).

    A mechanism calibrated with the float ε = 0.1 can lose exactly that much, which is more than the 1/10
    that its shortest repr reads; costs and budgets are therefore recorded and compared at the exact value.
    Ledgers written before recorded the repr decimals (0.1); they still read and verify, since the stored
    strings are parsed and summed as they are.
    """
    return Decimal(float(value))


def _float_up(value: Decimal) -> float:
    """The least float whose exact value is ≥ value."""
    result = float(value)
    while _dec(result) < value:
        result = math.nextafter(result, math.inf)
    return result


def _float_down(value: Decimal) -> float:
    """The greatest float ≥ 0 whose exact value is ≤ value (0 for negative values)."""
    if value <= 0:
        return 0.0
    result = float(value)
    while _dec(result) > value:
        result = math.nextafter(result, -math.inf)
    return max(result, 0.0)


def _sqrt_up(value: Decimal) -> float:
    """The least float whose exact square is ≥ value (a 40-digit root can be above it by an ulp)."""
    if value <= 0:
        return 0.0
    root = _float_up(_UP.sqrt(value))
    while _square(_dec(math.nextafter(root, 0.0))) >= value:
        root = math.nextafter(root, 0.0)
    return root


def _sqrt_down(value: Decimal) -> float:
    """The greatest float whose exact square is ≤ value."""
    if value <= 0:
        return 0.0
    root = _float_down(_DOWN.sqrt(value))
    while _square(_dec(math.nextafter(root, math.inf))) <= value:
        root = math.nextafter(root, math.inf)
    return root


def _add(a: Decimal, b: Decimal) -> Decimal:
    return _EXACT.add(a, b)


def _sub(a: Decimal, b: Decimal) -> Decimal:
    return _EXACT.subtract(a, b)


def _square(a: Decimal) -> Decimal:
    return _EXACT.multiply(a, a)


def _parse_decimal(text: Any, where: str) -> Decimal:
    try:
        value = Decimal(str(text))
    except decimal.InvalidOperation:
        raise LedgerError(f"{where}: {text!r} is not a decimal number") from None
    if not value.is_finite():
        raise LedgerError(f"{where}: {text!r} is not finite")
    return value


# ------------------------------------------------------------------------------------------------------
# budget, charges and running totals


@dataclass(frozen=True)
class _Budget:
    """A dataset's budget: the guarantee (ApproxDP or GaussianDP), the method, the neighbouring relation and,
    for an (ε, δ) budget under the μ-GDP filter, μ_B = the largest μ whose (ε, δ_B) conversion fits ε_B."""

    guarantee: Guarantee
    method: Method
    mu_limit: Decimal | None = None
    relation: Relation = DEFAULT_RELATION

    @property
    def currency(self) -> Literal["approx", "gdp"]:
        return "gdp" if isinstance(self.guarantee, GaussianDP) else "approx"

    def state_budget(self) -> dict[str, Any]:
        return {
            "guarantee": self.guarantee.to_dict(),
            "mu_limit": None if self.mu_limit is None else str(self.mu_limit),
            "relation": self.relation,
        }

    @classmethod
    def from_state(cls, state: DatasetState, where: str) -> _Budget:
        try:
            guarantee = guarantee_from_dict(dict(state.budget["guarantee"]))
        except (KeyError, TypeError, InvalidParameterError) as err:
            raise LedgerError(f"{where}: unreadable budget {state.budget!r} ({err})") from None
        if state.method not in ("basic", "gdp"):
            raise LedgerError(f"{where}: unknown composition method {state.method!r}")
        raw = state.budget.get("mu_limit")
        mu_limit = None if raw is None else _parse_decimal(raw, where)
        method: Method = "gdp" if state.method == "gdp" else "basic"
        # a budget stored before relations existed has none: it is read as the default
        relation = state.budget.get("relation", DEFAULT_RELATION)
        if relation not in RELATIONS:
            raise LedgerError(f"{where}: unknown neighbouring relation {relation!r}")
        return cls(guarantee, method, mu_limit, relation)

    def describe(self) -> str:
        if self.currency == "gdp":
            return f"{self.guarantee!r} (μ-GDP filter)"
        if self.method == "gdp":
            return f"{self.guarantee!r} (basic composition of pure spends, or the μ-GDP filter)"
        return f"{self.guarantee!r} (basic composition)"


@dataclass(frozen=True)
class _Charge:
    """What one reservation adds to the running totals, as exact decimals.

    ``epsilon``/``delta`` are None when the reservation has no (ε, δ) in the budget's rule (μ-GDP
    budgets; non-pure spends under the pure-or-GDP rule); ``mu2`` (μ²) is None when it has no μ or
    the rule does not use one (basic composition).
    """

    epsilon: Decimal | None
    delta: Decimal | None
    mu2: Decimal | None

    def to_json(self) -> dict[str, str | None]:
        return {
            "epsilon": None if self.epsilon is None else str(self.epsilon),
            "delta": None if self.delta is None else str(self.delta),
            "mu2": None if self.mu2 is None else str(self.mu2),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> _Charge:
        if not isinstance(data, Mapping):
            raise LedgerError(f"{where}: unreadable charge {data!r}")

        def get(name: str) -> Decimal | None:
            raw = data.get(name)
            return None if raw is None else _parse_decimal(raw, where)

        return cls(get("epsilon"), get("delta"), get("mu2"))

    @property
    def is_pure(self) -> bool:
        return self.epsilon is not None and self.delta == 0


@dataclass(frozen=True)
class _Totals:
    """Running totals over the active (open or committed) reservations of a dataset."""

    epsilon: Decimal = _ZERO
    delta: Decimal = _ZERO
    mu2: Decimal = _ZERO
    impure: int = 0  # active charges that are not pure ε-DP
    no_mu: int = 0  # active charges without a μ
    active: int = 0  # open or committed reservations
    open: int = 0  # open reservations

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": str(self.epsilon),
            "delta": str(self.delta),
            "mu2": str(self.mu2),
            "impure": self.impure,
            "no_mu": self.no_mu,
            "active": self.active,
            "open": self.open,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> _Totals:
        if not isinstance(data, Mapping):
            raise LedgerError(f"{where}: unreadable running totals {data!r}")
        try:
            counts = {name: int(data[name]) for name in ("impure", "no_mu", "active", "open")}
            return cls(
                _parse_decimal(data["epsilon"], where),
                _parse_decimal(data["delta"], where),
                _parse_decimal(data["mu2"], where),
                **counts,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise LedgerError(f"{where}: unreadable running totals {data!r} ({err})") from None

    def plus(self, charge: _Charge) -> _Totals:
        return _Totals(
            _add(self.epsilon, charge.epsilon or _ZERO),
            _add(self.delta, charge.delta or _ZERO),
            _add(self.mu2, charge.mu2 or _ZERO),
            self.impure + (0 if charge.is_pure else 1),
            self.no_mu + (1 if charge.mu2 is None else 0),
            self.active + 1,
            self.open + 1,
        )

    def minus(self, charge: _Charge) -> _Totals:
        return _Totals(
            _sub(self.epsilon, charge.epsilon or _ZERO),
            _sub(self.delta, charge.delta or _ZERO),
            _sub(self.mu2, charge.mu2 or _ZERO),
            self.impure - (0 if charge.is_pure else 1),
            self.no_mu - (1 if charge.mu2 is None else 0),
            self.active - 1,
            self.open - 1,
        )

    def committed(self) -> _Totals:
        return replace(self, open=self.open - 1)

    def same_as(self, other: _Totals) -> bool:
        return (
            self.epsilon == other.epsilon
            and self.delta == other.delta
            and self.mu2 == other.mu2
            and (self.impure, self.no_mu, self.active, self.open)
            == (other.impure, other.no_mu, other.active, other.open)
        )


@functools.lru_cache(maxsize=256)
def _parse_budget(budget_json: str, method: str, where: str) -> _Budget:
    return _Budget.from_state(DatasetState(json.loads(budget_json), method, {}), where)


def _budget_of(state: DatasetState, where: str) -> _Budget:
    """The budget of a head state (parsed once per distinct budget)."""
    return _parse_budget(canonical_json(dict(state.budget)), state.method, where)


def _fits(budget: _Budget, totals: _Totals) -> bool:
    """Whether the running totals (including a new charge) are within the budget; see PrivacyAccountant."""
    g = budget.guarantee
    if isinstance(g, GaussianDP):
        return totals.no_mu == 0 and totals.mu2 <= _square(_dec(g.mu))
    assert isinstance(g, ApproxDP)
    if budget.method == "basic":
        return totals.epsilon <= _dec(g.epsilon) and totals.delta <= _dec(g.delta)
    pure_route = totals.impure == 0 and totals.epsilon <= _dec(g.epsilon)
    gdp_route = totals.no_mu == 0 and budget.mu_limit is not None and totals.mu2 <= _square(budget.mu_limit)
    return pure_route or gdp_route


def _mu_limit(budget: ApproxDP) -> Decimal:
    """The largest μ (a double, rounded down) with GaussianDP(μ).to_approx_dp(δ_B).ε ≤ ε_B.

    ε(μ) grows with μ, so the first μ beyond the limit is found by bisecting the doubles (at most 64
    conversions); a μ with no finite ε at δ_B is beyond it.
    """

    def beyond(mu: float) -> bool:
        try:
            return GaussianDP(mu).to_approx_dp(budget.delta).epsilon > budget.epsilon
        except InvalidParameterError:
            return True

    return _dec(math.nextafter(least_double_where(beyond, 0.0, sys.float_info.max), 0.0))


# ------------------------------------------------------------------------------------------------------
# public value objects


@dataclass(frozen=True)
class BudgetReport:
    """A number in a dataset's budget currency, and the composition method that produced it.

    Returned by :meth:`PrivacyAccountant.spent`, :meth:`~PrivacyAccountant.remaining`,
    :meth:`~PrivacyAccountant.plan_cost` and :meth:`~PrivacyAccountant.budget`.

    Attributes
    ----------
    dataset : str
        The dataset.
    what : str
        ``"spent"``, ``"remaining"``, ``"plan cost"`` or ``"budget"``.
    guarantee : ApproxDP or GaussianDP
        The amount, in the budget's currency. Spent amounts and costs are rounded up, remaining amounts
        down.
    method : str
        ``"basic"`` (Σε, Σδ), ``"gdp"`` (√Σμᵢ², or its (ε, δ_B) reading) or ``"pld"`` (tight plan total).
    budget : ApproxDP or GaussianDP
        The dataset's budget.
    open_reservations : int
        Reservations not yet committed or released; they are counted as spent.
    relation : str
        The dataset's neighbouring relation: ``"replace_one"`` or ``"add_remove"``.
    """

    dataset: str
    what: str
    guarantee: Guarantee
    method: str
    budget: Guarantee
    open_reservations: int = 0
    relation: Relation = DEFAULT_RELATION

    @property
    def epsilon(self) -> float:
        """ε of an (ε, δ) amount; AttributeError for a μ-GDP budget (read ``.mu``)."""
        if isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has a μ-GDP budget: the report has .mu, not .epsilon "
                "(convert with report.guarantee.to_approx_dp(delta))"
            )
        assert isinstance(self.guarantee, ApproxDP)
        return self.guarantee.epsilon

    @property
    def delta(self) -> float:
        """δ of an (ε, δ) amount; AttributeError for a μ-GDP budget (read ``.mu``)."""
        if isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has a μ-GDP budget: the report has .mu, not .delta"
            )
        assert isinstance(self.guarantee, ApproxDP)
        return self.guarantee.delta

    @property
    def mu(self) -> float:
        """μ of a μ-GDP amount; AttributeError for an (ε, δ) budget (read ``.epsilon``/``.delta``)."""
        if not isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has an (ε, δ) budget: the report has .epsilon and .delta, not .mu"
            )
        return self.guarantee.mu

    def __str__(self) -> str:
        amount = format_guarantee(self.guarantee)
        method = {
            "basic": "basic composition",
            "gdp": "μ-GDP filter",
            "pld": "tight PLD composition",
        }.get(self.method, self.method)
        text = (
            f"{self.what} on {self.dataset!r}: {amount} ({method}; budget {format_guarantee(self.budget)}; "
            f"{self.relation})"
        )
        if self.open_reservations:
            text += f", including {self.open_reservations} open reservation(s)"
        return text


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger record as :meth:`PrivacyAccountant.records` shows it.

    Attributes
    ----------
    seq : int
        Position in the dataset's chain.
    time : datetime
        When it was written (UTC).
    kind : str
        ``"budget"``, ``"reserve"``, ``"commit"`` or ``"release"``.
    status : str
        For a reservation: ``"open"``, ``"committed"`` or ``"released"``; otherwise the kind.
    label, key : str or None
        The spend's label and idempotency key.
    group_size : int or None
        The group size k the spend was charged for.
    guarantee : Guarantee or None
        The cost charged (a reservation), or the budget set (a budget record).
    method : str or None
        How the cost was composed (plans: ``"pld"``, ``"basic"`` or ``"gdp"``), or the budget's rule.
    events : tuple of PrivacyEvent
        The events of a reservation (several for a plan).
    reservation : int or None
        For ``commit``/``release``: the seq of the reservation it ends.
    reason, actor : str or None
        Why and by whom (releases and budget changes).
    hash : str
        The record's hash in the chain.
    relation : str or None
        The dataset's neighbouring relation, for budget and reserve records (records written before
        relations existed: the default, ``"replace_one"``).
    """

    dataset: str
    seq: int
    time: datetime
    kind: str
    status: str
    label: str | None
    key: str | None
    group_size: int | None
    guarantee: Guarantee | None
    method: str | None
    events: tuple[PrivacyEvent, ...] = field(default=())
    reservation: int | None = None
    reason: str | None = None
    actor: str | None = None
    hash: str = ""
    relation: Relation | None = None


@dataclass(frozen=True)
class ReleaseEntry:
    """One release (a charged reservation) as :meth:`PrivacyAccountant.history` shows it.

    Attributes
    ----------
    dataset : str
    seq : int
        The seq of the reservation record in the dataset's chain (see :meth:`PrivacyAccountant.records`).
    time : datetime
        When it was charged (UTC).
    label, key : str or None
        The spend's label and idempotency key.
    group_size : int
        The group size k it was charged for.
    cost : Guarantee
        What was charged, in the budget's currency (for the group of k).
    method : str or None
        How a plan's cost was composed (``"pld"``, ``"basic"`` or ``"gdp"``).
    events : tuple of PrivacyEvent
        The mechanisms' events (several for a plan).
    status : str
        ``"open"`` (reserved, still counted), ``"committed"`` or ``"cancelled"`` (released back to the
        budget before data was read).
    ended : datetime or None
        When it was committed or cancelled.
    reason, actor : str or None
        Why and by whom it was cancelled.
    """

    dataset: str
    seq: int
    time: datetime
    label: str | None
    key: str | None
    group_size: int
    cost: Guarantee
    method: str | None
    events: tuple[PrivacyEvent, ...]
    status: str
    ended: datetime | None = None
    reason: str | None = None
    actor: str | None = None


@dataclass(frozen=True)
class VerifyReport:
    """The result of a successful :meth:`PrivacyAccountant.verify`: what was checked.

    Attributes
    ----------
    datasets : tuple of str
    records : int
        How many records were checked.
    signatures : bool
        Whether signatures were checked (a key was configured).
    anchored : bool
        Whether the chains were checked against an anchor.
    """

    datasets: tuple[str, ...]
    records: int
    signatures: bool = False
    anchored: bool = False

    def __str__(self) -> str:
        n = len(self.datasets)
        text = f"ledger verified: {self.records} records in {n} dataset(s); chains, totals and budgets intact"
        text += "; signatures valid" if self.signatures else "; signatures not checked (no key)"
        if self.anchored:
            text += "; the anchor's heads are still in the chains"
        return text


class Reservation:
    """A reserved (and possibly committed) charge on a dataset's budget.

    Obtained from :meth:`PrivacyAccountant.reserve` (open), or from :meth:`~PrivacyAccountant.spend` and
    :meth:`~PrivacyAccountant.spend_plan` (committed). As a context manager it commits when the block
    ends, **also when the block raises**: once inside the block the attempt may have read data, and an
    error afterwards does not take back what the data revealed. An attempt that certainly never read
    data calls :meth:`release` with a reason; then nothing is committed.

    Attributes
    ----------
    dataset, key : str
        The dataset and the idempotency key.
    seq : int
        The reservation's record in the dataset's chain.
    cost : Guarantee
        The charge, in the budget's currency (after group size and plan composition).
    method : str
        How the cost was composed.
    status : str
        ``"open"``, ``"committed"`` or ``"released"`` as last seen by this object.
    """

    def __init__(
        self,
        accountant: PrivacyAccountant,
        dataset: str,
        key: str,
        seq: int,
        cost: Guarantee,
        method: str,
        status: str,
        label: str | None,
        group_size: int,
    ) -> None:
        self._accountant = accountant
        self.dataset = dataset
        self.key = key
        self.seq = seq
        self.cost = cost
        self.method = method
        self.status = status
        self.label = label
        self.group_size = group_size

    def commit(self) -> Reservation:
        """Mark the reservation spent (idempotent). LedgerError if it was released."""
        if self.status != "committed":
            self.status = self._accountant._commit(self.dataset, self.key)
        return self

    def release(self, reason: str) -> Reservation:
        """Return the reservation to the budget: only for an attempt that never read data.

        Recorded with ``reason``. LedgerError if it was already committed.
        """
        if self.status != "released":
            self.status = self._accountant._release(self.dataset, self.key, reason, None, by="attempt")
        return self

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self.status == "open":
            self.commit()
        return False

    def __repr__(self) -> str:
        return (
            f"Reservation(dataset={self.dataset!r}, key={self.key!r}, cost={self.cost!r}, "
            f"method={self.method!r}, status={self.status!r})"
        )


# ------------------------------------------------------------------------------------------------------
# input checks


def _check_name(value: Any, name: str, limit: int = _MAX_NAME) -> str:
    """A dataset name, key, label or reason that every backend stores as written, or InvalidParameterError.

    A NUL byte (PostgreSQL cannot store one; SQLite would) and a lone surrogate (not UTF-8 at all) are
    refused, so that every backend accepts exactly the same names.
    """
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidParameterError(
            f"{name!r} must be a non-empty string of at most {limit} characters, got {value!r}", name
        )
    if "\x00" in value:
        raise InvalidParameterError(f"{name!r} must not contain a NUL byte, got {value!r}", name)
    if not _encodes(value):
        raise InvalidParameterError(
            f"{name!r} must be valid Unicode text, got {value!r} with a lone surrogate (often a file name or "
            "bytes decoded with errors='surrogateescape')",
            name,
        )
    return value


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_optional_text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    return _check_name(value, name, limit)


def _to_event(cost: Any, name: str = "cost") -> PrivacyEvent:
    """A spend as an event: a PrivacyEvent, a guarantee, or a mechanism (an object with ``.event``)."""
    if isinstance(cost, PrivacyEvent):
        return cost
    if isinstance(cost, Guarantee):
        return PrivacyEvent(kind="guarantee", guarantee=cost)
    event = getattr(cost, "event", None)
    if isinstance(event, PrivacyEvent):
        return event
    raise InvalidParameterError(
        f"{name!r} must be a mechanism (an object with an .event), a PrivacyEvent or a guarantee "
        f"(PureDP, ApproxDP, GaussianDP), got {type(cost).__name__}",
        name,
    )


def _to_events(costs: Any) -> list[PrivacyEvent]:
    if isinstance(costs, (str, bytes, Mapping)) or not isinstance(costs, Iterable):
        raise InvalidParameterError(
            f"'costs' must be a list of mechanisms, events or guarantees, got {type(costs).__name__}", "costs"
        )
    items = list(costs)
    if not items:
        raise InvalidParameterError("'costs' is empty: a plan needs at least one release", "costs")
    return [_to_event(item, f"costs[{i}]") for i, item in enumerate(items)]


def _check_budget(budget: Any) -> Guarantee:
    if isinstance(budget, PureDP):
        return budget.to_approx_dp()
    if isinstance(budget, (ApproxDP, GaussianDP)):
        return budget
    raise InvalidParameterError(
        f"'budget' must be ApproxDP(epsilon, delta), PureDP(epsilon) or GaussianDP(mu), got "
        f"{type(budget).__name__}",
        "budget",
    )


def _default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover - no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


# ------------------------------------------------------------------------------------------------------
# pricing: a request's charge under a budget


@dataclass(frozen=True)
class _Price:
    charge: _Charge
    cost: Guarantee
    method: str
    budget: _Budget
    remaining_delta: Decimal | None  # the remaining δ a basic plan was composed at (None: not used)


def _laplace_epsilon(event: PrivacyEvent, k: int) -> Decimal | None:
    """k·Δ/b, the exact ε of a Laplace event's noise for a group of k, rounded up to 40 digits.

    The scale was rounded up from Δ/ε, so this is at most the float ε and often exactly the decimal the
    user wrote (Laplace(ε = 0.2) has b = 5 and loses exactly 1/5). None for other kinds of event.
    """
    scale = event.parameters.get("scale")
    if event.kind != "laplace" or event.sensitivity is None or not isinstance(scale, float | int):
        return None
    if not (math.isfinite(scale) and scale > 0.0):
        return None
    exact = k * Fraction(event.sensitivity) / Fraction(scale)
    return _UP.divide(Decimal(exact.numerator), Decimal(exact.denominator))


def _pure_epsilon(event: PrivacyEvent, grouped: ApproxDP, k: int) -> Decimal:
    """ε of a pure group charge: never less than k times the exact ε of one individual (exactly kε), or
    for Laplace noise the exact loss of the noise itself when that is smaller."""
    epsilon = _dec(grouped.epsilon)
    if not isinstance(event.guarantee, GaussianDP):
        single = as_approx_dp(event.guarantee)
        if single.delta == 0.0:
            epsilon = max(epsilon, _EXACT.multiply(Decimal(k), _dec(single.epsilon)))
    noise = _laplace_epsilon(event, k)
    return epsilon if noise is None else min(epsilon, noise)


def _event_charge(budget: _Budget, event: PrivacyEvent, k: int) -> tuple[_Charge, Guarantee]:
    """What one event adds to the totals under the budget's rule, for groups of k, and the cost shown.

    The event is first read under the dataset's relation (:func:`to_relation`, before grouping). A
    ``"composite"`` event is charged as the sum of its parts' charges: Σε and Σδ, and Σμᵢ² (tighter than
    the μ of its total guarantee).
    """
    event = to_relation(event, budget.relation)
    if event.kind == "composite":
        total = _sum_charges([_event_charge(budget, part, k)[0] for part in event.parts])
        return total, _charge_cost(budget, total)
    grouped = group_event(event, k)
    g = grouped.guarantee
    if budget.method == "basic":
        if isinstance(g, GaussianDP):
            raise UnsupportedCompositionError(
                f"a μ-GDP spend ({g!r}) has no single (ε, δ), so basic composition cannot charge it to the "
                f"(ε, δ) budget {budget.guarantee!r}. Spend a mechanism calibrated to (ε, δ), give the "
                "dataset a GaussianDP budget, or set this budget with method='gdp'."
            )
        approx = as_approx_dp(g)
        if approx.delta == 0.0:
            return _Charge(_pure_epsilon(event, approx, k), _ZERO, None), approx
        return _Charge(_dec(approx.epsilon), _dec(approx.delta), None), approx
    try:
        mu = _dec(event_gdp(grouped).mu)
    except UnsupportedCompositionError:
        hint = (
            "give the dataset an (ε, δ) budget with basic composition"
            if budget.currency == "gdp"
            else "set this (ε, δ) budget with method='basic'"
        )
        raise UnsupportedCompositionError(
            f"the spend {g!r} has δ > 0 and no μ-GDP guarantee (f_ε,δ(0) = 1 − δ < 1 = G_μ(0)), so it "
            f"cannot be charged to the budget {budget.describe()}. Use a pure or Gaussian mechanism, or "
            f"{hint}."
        ) from None
    if event.kind == "gaussian" or isinstance(event.guarantee, GaussianDP):
        # group privacy of μ-GDP is exactly kμ
        mu = max(mu, _EXACT.multiply(Decimal(k), _dec(event_gdp(event).mu)))
    if budget.currency == "gdp":
        return _Charge(None, None, _square(mu)), GaussianDP(_float_up(mu))
    if not isinstance(g, GaussianDP):
        approx = as_approx_dp(g)
        if approx.delta == 0.0:
            return _Charge(_pure_epsilon(event, approx, k), _ZERO, _square(mu)), g
    return _Charge(None, None, _square(mu)), g


def _charge_cost(budget: _Budget, charge: _Charge) -> Guarantee:
    """A summed charge as a guarantee in the budget's currency (rounded up)."""
    by_sums = budget.method == "basic" or charge.is_pure
    if charge.epsilon is not None and charge.delta is not None and by_sums:
        return ApproxDP(_float_up(charge.epsilon), _float_up(charge.delta))
    assert charge.mu2 is not None
    return GaussianDP(_sqrt_up(charge.mu2))


def _sum_charges(charges: Sequence[_Charge]) -> _Charge:
    eps: Decimal | None = _ZERO
    delta: Decimal | None = _ZERO
    mu2: Decimal | None = _ZERO
    for c in charges:
        eps = None if eps is None or c.epsilon is None else _add(eps, c.epsilon)
        delta = None if delta is None or c.delta is None else _add(delta, c.delta)
        mu2 = None if mu2 is None or c.mu2 is None else _add(mu2, c.mu2)
    if eps is None or delta is None:
        eps = delta = None
    return _Charge(eps, delta, mu2)


def _remaining_delta(budget: _Budget, totals: _Totals) -> Decimal:
    assert isinstance(budget.guarantee, ApproxDP)
    return max(_ZERO, _sub(_dec(budget.guarantee.delta), totals.delta))


def _price(
    budget: _Budget,
    events: Sequence[PrivacyEvent],
    k: int,
    plan: bool,
    plan_delta: float | None,
    totals: _Totals,
) -> _Price:
    """The charge of a request under a budget (one event, or a plan composed as a whole).

    A plan's events are read under the dataset's relation and its composites split into their parts, so
    that the tight composition sees every part.
    """
    if not plan:
        charge, cost = _event_charge(budget, events[0], k)
        method = "gdp" if budget.currency == "gdp" else budget.method
        if budget.method == "gdp" and budget.currency == "approx" and charge.is_pure:
            method = "basic"
        return _Price(charge, cost, method, budget, None)
    events = flatten_events([to_relation(e, budget.relation) for e in events])
    grouped = [group_event(e, k) for e in events]
    if budget.method == "basic":
        return _price_basic_plan(budget, events, grouped, k, plan_delta, totals)
    total = _sum_charges([_event_charge(budget, e, k)[0] for e in events])
    if budget.currency == "gdp":
        assert total.mu2 is not None
        gdp_total = compose_plan_gdp(grouped).guarantee
        assert isinstance(gdp_total, GaussianDP)
        return _Price(total, GaussianDP(max(_sqrt_up(total.mu2), gdp_total.mu)), "gdp", budget, None)
    if budget.method == "gdp":
        assert total.mu2 is not None
        if total.is_pure:
            assert total.epsilon is not None
            return _Price(total, ApproxDP(_float_up(total.epsilon), 0.0), "basic", budget, None)
        return _Price(total, GaussianDP(_sqrt_up(total.mu2)), "gdp", budget, None)


@functools.lru_cache(maxsize=512)
def _price_one(budget: _Budget, event_json: str, k: int) -> _Price:
    """The price of one event (not a plan), which depends only on the budget, the event and k.

    Keyed by the event's canonical JSON, so that repeated spends of the same release (the common case:
    one mechanism spent many times) skip re-validating and re-grouping it. Errors are not cached.
    """
    event = PrivacyEvent.from_dict(json.loads(event_json))
    return _price(budget, [event], k, False, None, _Totals())


def _is_pure_event(event: PrivacyEvent) -> bool:
    """Whether an event is pure ε-DP: a guarantee with δ = 0 and noise that is not Gaussian."""
    if event.kind == "gaussian" or isinstance(event.guarantee, GaussianDP):
        return False
    return as_approx_dp(event.guarantee).delta == 0.0


def _price_basic_plan(
    budget: _Budget,
    events: Sequence[PrivacyEvent],
    grouped: Sequence[PrivacyEvent],
    k: int,
    plan_delta: float | None,
    totals: _Totals,
) -> _Price:
    """A plan on an (ε, δ) budget under basic composition: its tight total at the δ asked for, or by
    default at δ = 0 when every event is pure and at the remaining δ otherwise; or the exact sums Σε, Σδ
    of its events when those are no larger."""
    remaining: Decimal | None = None
    if plan_delta is not None:
        target = plan_delta
    elif all(_is_pure_event(e) for e in events):
        # Composing pure releases at a δ > 0 would buy a slightly smaller ε with δ that later (ε, δ)
        # releases need, and the spend would make the dataset's δ budget unusable: price them at δ = 0.
        target = 0.0
    else:
        remaining = _remaining_delta(budget, totals)
        target = _float_down(remaining)
    total: _Charge | None
    try:
        total = _sum_charges([_event_charge(budget, e, k)[0] for e in events])
    except UnsupportedCompositionError:  # a μ-GDP event has no single (ε, δ); the PLD composes it
        total = None
    try:
        composed = compose_plan(grouped, delta=target)
    except UnsupportedCompositionError as err:
        if total is not None and total.epsilon is not None and total.delta is not None:
            # no finite ε at the δ left: charge the exact sums, which the check then refuses if they exceed
            cost = ApproxDP(_float_up(total.epsilon), _float_up(total.delta))
            return _Price(_Charge(total.epsilon, total.delta, None), cost, "basic", budget, remaining)
        raise UnsupportedCompositionError(
            f"the plan has no finite ε at δ = {target} (the δ left in budget {budget.guarantee!r}): {err}"
        ) from None
    g = composed.guarantee
    assert isinstance(g, ApproxDP)
    pld = _Charge(_dec(g.epsilon), _dec(g.delta), None)
    assert pld.epsilon is not None and pld.delta is not None
    if (
        total is not None
        and total.epsilon is not None
        and total.delta is not None
        and (composed.method == "basic" or (total.delta <= pld.delta and total.epsilon <= pld.epsilon))
    ):
        # the exact decimal sums: never above what spending the events one by one would charge
        basic_cost = ApproxDP(_float_up(total.epsilon), _float_up(total.delta))
        return _Price(_Charge(total.epsilon, total.delta, None), basic_cost, "basic", budget, remaining)
    return _Price(pld, g, composed.method, budget, remaining)


# ------------------------------------------------------------------------------------------------------
# the accountant


class PrivacyAccountant:
    """Per-dataset privacy budgets over a persistent ledger: check, reserve, commit, refuse.

    Parameters
    ----------
    ledger : str or LedgerStore
        Where the ledger lives. A SQLAlchemy URL: ``"sqlite:///ledger.db"`` (an SQLite file, the embedded
        choice) or ``"postgresql+psycopg://user:pw@host/db"`` (many workers); ``"memory://"`` for an
        in-memory ledger (notebooks, tests); or a store object such as
        :class:`~dp_pipeline.accounting.ledger.memory.MemoryLedger`. There is no default: a ledger silently
        created in the working directory would give every directory its own budget.
    create : bool or None, default None
        ``None``: create a ledger (the SQLite file, or the schema in an empty database) only at a URL where
        none was ever created by this user on this machine (the first run); a ledger that existed and is
        gone, or an empty (0-byte) file, raises LedgerError naming it, so a day-2 job cannot start over on a
        fresh, full budget (see :mod:`~dp_pipeline.accounting.ledger.known` for what this can and cannot
        know). ``True``: create the ledger if there is none, on purpose. ``False``: never create anything
        (what the Airflow hook, the dashboard and the command use).
    read_only : bool, default False
        Open for reports, history and :meth:`verify` only (also on a read-only file system); every
        write raises LedgerError. ``?mode=ro`` on an SQLite URL does the same.
    key : str or bytes, optional
        The ledger's signing key, kept outside the database (at least 16 bytes). Default: the environment
        variable ``DP_PIPELINE_LEDGER_KEY`` if set. Every record written with a key carries the HMAC of its
        hash, and :meth:`verify` checks the signatures (see the README, "Tamper evidence").
    timeout : float, default 30
        Seconds a write (spend, reserve, commit, release, set_budget) waits for the ledger's lock before it
        raises LedgerError; nothing is written then.

    Notes
    -----
    **Budgets and rules.** Each dataset has one budget in one currency, chosen by :meth:`set_budget`:

    * ``ApproxDP(ε_B, δ_B)`` (``PureDP(ε_B)`` is ``ApproxDP(ε_B, 0)``) with ``method="basic"`` (the
      default): a spend of (εᵢ, δᵢ) is accepted iff Σεᵢ ≤ ε_B and Σδᵢ ≤ δ_B over all active spends.
      Basic composition holds when each spend is chosen after earlier results are known, i.e. as a
      privacy filter (Dwork & Roth 2014, Thm 3.16; Rogers, Roth, Ullman & Vadhan 2016).
    * ``GaussianDP(μ_B)``: the μ-GDP filter. Each spend's μᵢ is the tightest μ of the event for the
      group (Gaussian noise: kS/σ; pure ε: 2Φ⁻¹(e^ε/(1+e^ε))); accepted iff Σμᵢ² ≤ μ_B². The filter is
      valid under full adaptivity (Smith & Thakurta 2022). An (ε, δ > 0) spend has no μ and raises
      UnsupportedCompositionError.
    * ``ApproxDP(ε_B, δ_B)`` with δ_B > 0 and ``method="gdp"``: let μ_B be the largest μ whose (ε, δ_B)
      reading (GaussianDP(μ).to_approx_dp(δ_B)) is within ε_B. Every spend must have a μ (pure ε or
      Gaussian noise); a spend is accepted iff (P) every active spend is pure and Σεᵢ ≤ ε_B, or
      (G) Σμᵢ² ≤ μ_B². The report names the route that gives the smaller ε.

      *Validity of P-or-G.* Let L be the privacy loss of the whole transcript. Split the transcripts by
      the final set of accepted spends. Where it satisfies P, every spend was pure and L ≤ Σεᵢ ≤ ε_B on
      that transcript (pure losses bound the loss pathwise), so it adds nothing to the hockey-stick
      divergence E[(1 − e^{ε_B − L})₊]. Every other transcript satisfies G at its end, hence at every
      step (the sums only grow), so it is also a transcript of the G-only filter, with the same
      probabilities under both neighbouring datasets; its part of the divergence is at most that of the
      G-only filter, which is μ_B-GDP and so (ε_B, δ_B)-DP. Hence the whole is (ε_B, δ_B)-DP.

      *Why not "basic or G" with δ.* If the route that may fail is basic composition with δᵢ > 0,
      neither part contributes zero: an analyst can branch on an earlier output, spend non-Gaussian
      (ε, δ) releases on one branch and Gaussian releases up to μ_B on the other, and the two parts may
      each approach δ_B. The accountant therefore never mixes a δ-carrying basic rule with the μ-GDP
      filter on one budget; which rule a budget uses is fixed when the budget is set, before any spend,
      and cannot change while spends are recorded.

    **Neighbouring relation.** Each dataset also declares which datasets are neighbours (``relation=`` of
    :meth:`set_budget`): one person's rows replaced by another's (``"replace_one"``, the default) or added or
    removed (``"add_remove"``). Every spend is read under it before group sizes and composition
    (:func:`~dp_pipeline.accounting.relations.to_relation`): an event that states no relation costs what it
    says; an add/remove event on a replace-one dataset is re-priced for a removal plus an addition (exactly
    from its noise when it gives its replace-one sensitivity, by group privacy of size 2 otherwise); a
    replace-one event on an add/remove dataset is refused. The recorded events state the relation they were
    charged under. A ``"composite"`` event (a release of several columns) is charged as the sum of its parts'
    charges under the budget's rule, and plans compose its parts.

    **Plans** (:meth:`plan_cost`, :meth:`spend_plan`) are releases declared before any of them runs.
    Under basic composition a plan is charged as one record at its tight total from
    :func:`~dp_pipeline.accounting.composition.compose_plan`, read at the δ you give or by default at
    δ = 0 when every release is pure ε-DP (so pure plans leave the δ budget alone) and at the budget's
    remaining δ otherwise, unless the exact sums Σεᵢ, Σδᵢ are no larger; the record then counts in
    basic composition with that (ε, δ). Under the μ-GDP rules a plan costs √Σμᵢ² (the same as its
    spends one by one).

    **Exact arithmetic.** Amounts are the exact binary values of the floats (ε = 0.1 is
    0.1000000000000000055…, what noise calibrated with that float can lose), summed exactly; μ² is
    exact too. Totals are cached as decimal strings, so a spend is O(1). The comparison with the budget
    is exact: a total equal to the budget fits (40 spends of ε = 0.125 fit ε_B = 5) and anything above
    it is refused (50 spends of ε = 0.1 exceed ε_B = 5 by 2.8·10⁻¹⁵, so the 50th is refused). Every
    number that had to be rounded (group sizes, μ of pure ε, square roots, PLD totals, conversions) was
    rounded toward more privacy loss, so a case that rounding makes uncertain is refused. Reported spent
    amounts round up and remaining amounts down, so spending exactly ``remaining()`` succeeds.

    **Ledger.** Every change is a new, hash-chained record (budget, reserve, commit, release). Check
    and reserve run in one locked transaction; a refusal writes nothing. A reservation stays counted
    until committed or released; one whose process died stays counted (fail closed) until an operator
    calls :meth:`release` with a reason, which is recorded. Idempotency keys: a key pays for exactly one
    release per dataset; any later spend or reservation with it is refused with
    :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges nothing (see :meth:`spend`).

    **Copies.** ``copy.deepcopy`` (and so scikit-learn's ``clone``) returns the same accountant, so
    charges land in the one ledger configured. Pickling carries the URL (an SQL ledger reopens the same
    database in the new process); a memory ledger cannot be pickled.

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014.
    Rogers, Roth, Ullman & Vadhan, "Privacy odometers and filters: pay-as-you-go composition", NeurIPS 2016.
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
    Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.

    Examples
    --------
    >>> from dp_pipeline import ApproxDP, PureDP, PrivacyAccountant
    >>> acct = PrivacyAccountant("memory://")
    >>> acct.set_budget("patients", ApproxDP(1.0, 1e-6))
    >>> _ = acct.spend("patients", PureDP(0.25), label="count")
    >>> print(acct.remaining("patients"))
    remaining on 'patients': ε = 0.75, δ = 1e-06 (basic composition; budget ε = 1, δ = 1e-06; replace_one)
    """

    def __init__(
        self,
        ledger: str | LedgerStore,
        *,
        create: bool | None = None,
        read_only: bool = False,
        key: str | bytes | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._budgets: dict[str, _Budget] = {}  # last budget seen per dataset: a pricing hint only
        if isinstance(ledger, str):
            if key is None:
                key = os.environ.get(KEY_ENV) or None
            self._store: LedgerStore = open_store(
                ledger, create=create, read_only=read_only, key=key, timeout=timeout
            )
        elif isinstance(ledger, LedgerStore):
            if create is not None or read_only or key is not None or timeout != 30.0:
                raise InvalidParameterError(
                    "create, read_only, key and timeout are options of opening a URL; a store object is "
                    "already open (pass them to the store, e.g. SQLLedger(url, key=...))",
                    "ledger",
                )
            self._store = ledger
        else:
            raise InvalidParameterError(
                "'ledger' must be a database URL (e.g. 'sqlite:///ledger.db', 'memory://') or a LedgerStore, "
                f"got {type(ledger).__name__}",
                "ledger",
            )

    @property
    def store(self) -> LedgerStore:
        """The ledger store."""
        return self._store

    @property
    def url(self) -> str:
        """The ledger's URL (``"memory://"`` for a memory ledger)."""
        return self._store.url

    # ------------------------------------------------------------------------------------- budgets

    def set_budget(
        self,
        dataset: str,
        budget: ApproxDP | PureDP | GaussianDP,
        *,
        method: str = "auto",
        relation: str | None = None,
        reason: str | None = None,
        actor: str | None = None,
    ) -> None:
        """Set or change a dataset's budget.

        Parameters
        ----------
        dataset : str
            The dataset (at most 255 characters).
        budget : ApproxDP, PureDP or GaussianDP
            The total privacy loss the dataset may incur.
        method : {"auto", "basic", "gdp"}
            The composition rule (see the class Notes). ``"auto"``: basic composition for (ε, δ) budgets,
            the μ-GDP filter for GaussianDP. ``"gdp"`` on an (ε, δ) budget needs δ > 0.
        relation : {"replace_one", "add_remove"}, optional
            Which datasets are neighbours: one person's rows replaced by another's (``"replace_one"``, the
            default for a new dataset) or one person's rows added or removed (``"add_remove"``). Every spend
            is read under it (see :func:`~dp_pipeline.accounting.relations.to_relation`): row-level releases
            are private only under replace-one and are refused on an add/remove dataset. None keeps the
            relation of an existing dataset. It cannot change once spends are recorded.
        reason, actor : str, optional
            Recorded with the change (actor defaults to user@host).

        Raises
        ------
        InvalidParameterError
            A wrong type, a budget below what is already spent, or a change of currency, method or relation
            while spends are recorded. Nothing changes then.

        Notes
        -----
        Setting the same budget again writes nothing. Raising a budget is a deliberate decision and is
        recorded as a new ``budget`` record with the previous one.
        """
        dataset = _check_name(dataset, "dataset")
        guarantee = _check_budget(budget)
        reason = _check_optional_text(reason, "reason", 2000)
        actor = _check_optional_text(actor, "actor", 255)
        if method not in ("auto", "basic", "gdp"):
            raise InvalidParameterError(
                f"'method' must be 'auto', 'basic' or 'gdp', got {method!r}", "method"
            )
        if relation is not None and relation not in RELATIONS:
            raise InvalidParameterError(
                f"'relation' must be 'replace_one' or 'add_remove', got {relation!r}", "relation"
            )
        resolved: Method
        mu_limit: Decimal | None = None
        if isinstance(guarantee, GaussianDP):
            if method == "basic":
                raise InvalidParameterError(
                    "a GaussianDP budget composes by the μ-GDP filter: use method='gdp'", "method"
                )
            resolved = "gdp"
        else:
            assert isinstance(guarantee, ApproxDP)
            resolved = "gdp" if method == "gdp" else "basic"
            if resolved == "gdp":
                if guarantee.delta == 0.0:
                    raise InvalidParameterError(
                        "method='gdp' needs δ > 0: μ-GDP implies no pure ε-DP guarantee", "method"
                    )
                mu_limit = _mu_limit(guarantee)

        def run(tx: LedgerTransaction) -> None:
            head = tx.head
            where = f"dataset {dataset!r}"
            totals = _Totals() if head is None else _Totals.from_json(head.state.totals, where)
            previous = None if head is None else _Budget.from_state(head.state, where)
            kept = DEFAULT_RELATION if previous is None else previous.relation
            new = _Budget(guarantee, resolved, mu_limit, kept if relation is None else relation)  # type: ignore[arg-type]
            if previous is not None:
                if previous == new:
                    return
                if previous.relation != new.relation and totals.active:
                    raise InvalidParameterError(
                        f"dataset {dataset!r} has {totals.active} active spend(s) charged under the relation"
                        f" {previous.relation!r}; it cannot change to {new.relation!r} (the spends were"
                        " priced for the other relation). Nothing was changed.",
                        "relation",
                    )
                if (previous.currency, previous.method) != (new.currency, new.method) and totals.active:
                    raise InvalidParameterError(
                        f"dataset {dataset!r} has {totals.active} active spend(s) under "
                        f"{previous.describe()}; its currency or composition rule cannot change to "
                        f"{new.describe()} (switching rules after results are known is not a valid "
                        "composition). Nothing was changed.",
                        "budget",
                    )
                if not _fits(new, totals):
                    spent = _spent_report(dataset, previous, totals)
                    raise InvalidParameterError(
                        f"the new budget {new.guarantee!r} of dataset {dataset!r} is below what is already "
                        f"spent ({spent.guarantee!r}, {spent.method}). Nothing was changed.",
                        "budget",
                    )
            body = {
                "budget": new.guarantee.to_dict(),
                "method": new.method,
                "mu_limit": None if mu_limit is None else str(mu_limit),
                "relation": new.relation,
                "previous": None if previous is None else previous.guarantee.to_dict(),
                "reason": reason,
                "actor": actor or _default_actor(),
                "totals": totals.to_json(),
            }
            tx.append("budget", body, DatasetState(new.state_budget(), new.method, totals.to_json()))

        self._store.atomic(dataset, run)

    def budget(self, dataset: str) -> BudgetReport:
        """The dataset's budget and its composition rule."""
        _, budget, totals = self._read(dataset)
        method = budget.method
        return BudgetReport(
            dataset, "budget", budget.guarantee, method, budget.guarantee, totals.open, budget.relation
        )

    def relation(self, dataset: str) -> Relation:
        """The dataset's neighbouring relation, ``"replace_one"`` or ``"add_remove"`` (:meth:`set_budget`)."""
        _, budget, _ = self._read(dataset)
        return budget.relation

    def datasets(self) -> list[str]:
        """The datasets with a budget in this ledger, sorted."""
        return [name for name in self._store.datasets() if self._store.head(name) is not None]

    # ------------------------------------------------------------------------------------- reports

    def spent(self, dataset: str) -> BudgetReport:
        """What the dataset has spent (open reservations included), rounded up, with the method."""
        _, budget, totals = self._read(dataset)
        return _spent_report(dataset, budget, totals)

    def remaining(self, dataset: str) -> BudgetReport:
        """What is left of the dataset's budget, rounded down, with the method."""
        _, budget, totals = self._read(dataset)
        return _remaining_report(dataset, budget, totals)

    def history(
        self, dataset: str, *, limit: int | None = None, since: datetime | None = None
    ) -> list[ReleaseEntry]:
        """One entry per release of the dataset, oldest first: time, label, cost, group size and status.

        Parameters
        ----------
        dataset : str
        limit : int, optional
            Only the latest ``limit`` releases.
        since : datetime, optional
            Only releases charged at or after this time (a naive datetime is read as UTC).

        Budget changes and the commit/release records are in :meth:`records` (the raw hash chain).
        """
        records = self._records(dataset)
        if since is not None:
            if not isinstance(since, datetime):
                raise InvalidParameterError(
                    f"'since' must be a datetime, got {type(since).__name__}", "since"
                )
            since = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
        ends: dict[int, LedgerRecord] = {r.reservation: r for r in records if r.reservation is not None}
        releases = _read_all(
            dataset, [r for r in records if r.kind == "reserve"], lambda r: _release_entry(r, ends.get(r.seq))
        )
        if since is not None:
            releases = [e for e in releases if e.time >= since]
        if limit is not None:
            n = check_positive_int(limit, "limit")
            releases = releases[-n:]
        return releases

    def records(self, dataset: str) -> list[LedgerEntry]:
        """Every record of the dataset's hash chain in order: budget changes, reservations, commits and
        releases, with time, label, key, group size, cost and status."""
        records = self._records(dataset)
        ends: dict[int, LedgerRecord] = {r.reservation: r for r in records if r.reservation is not None}
        return _read_all(dataset, records, lambda r: _entry(r, ends))

    def _records(self, dataset: str) -> list[LedgerRecord]:
        dataset = _check_name(dataset, "dataset")
        records = list(self._store.records(dataset))
        if not records and self._store.head(dataset) is None:
            raise self._unknown(dataset)
        return records

    def open_reservations(self, dataset: str) -> list[LedgerEntry]:
        """Reservations of the dataset that were neither committed nor released (e.g. a process died)."""
        dataset = _check_name(dataset, "dataset")
        if self._store.head(dataset) is None:
            raise UnknownDatasetError(dataset)
        return [_entry(r, {}) for r in self._store.open_reservations(dataset)]

    # ------------------------------------------------------------------------------------- spending

    def spend(
        self,
        dataset: str,
        cost: Any,
        group_size: int = 1,
        label: str | None = None,
        key: str | None = None,
    ) -> Reservation:
        """Check and charge one release in one transaction (reserve and commit).

        Parameters
        ----------
        dataset : str
            The dataset charged.
        cost : mechanism, PrivacyEvent or Guarantee
            The release: a mechanism (anything with an ``.event``), its event, or a bare guarantee.
        group_size : int, default 1
            Charge for groups of k individuals (e.g. a person contributes k rows).
        label : str, optional
            Shown in the history.
        key : str, optional
            Idempotency key; it pays for exactly one release on the dataset. The first call with a key
            charges it and returns the reservation. Every later call with that key (a retry, a duplicate,
            a racing process), whatever the first reservation's state and whether or not its result
            reached the caller, costs nothing, writes nothing and returns nothing: it raises
            :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` naming that state, since a retry that
            released again would draw fresh noise nobody paid for. Keep and reuse the first call's
            result; if it was lost, a new release needs a new key and is charged again. A later call
            asking for a different cost raises InvalidParameterError instead. Without a key, a random
            one is made (every call is a new release).

        Returns
        -------
        Reservation
            The committed reservation.

        Raises
        ------
        BudgetExceededError
            The spend does not fit; nothing was written.
        KeyAlreadyUsedError
            The key already has a reservation (open, committed or released); nothing was written.
        UnsupportedCompositionError
            The spend cannot be expressed in the budget's currency (e.g. (ε, δ > 0) against μ-GDP).
        UnknownDatasetError, InvalidParameterError
            No budget for the dataset; invalid arguments.
        LedgerError
            The ledger's lock was not obtained within the accountant's ``timeout`` (nothing was written;
            retrying is safe, with the same key), the ledger is read-only or closed, or it is damaged.
        """
        return self._reserve(dataset, [_to_event(cost)], group_size, label, key, False, None, commit=True)

    def reserve(
        self,
        dataset: str,
        cost: Any,
        *,
        key: str | None = None,
        group_size: int = 1,
        label: str | None = None,
    ) -> Reservation:
        """Check and reserve one release; commit it later (or use the result as a context manager).

        The reservation counts as spent from now on. See :class:`Reservation` for the context-manager
        rule (it commits even when the block raises) and :meth:`spend` for the parameters and errors.

        The key follows :meth:`spend`'s contract: a second ``reserve`` (or ``spend``) with a key the
        dataset already holds raises :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges
        nothing, also while the first reservation is still open. Only the first call's
        :class:`Reservation` commits or releases it.
        """
        return self._reserve(dataset, [_to_event(cost)], group_size, label, key, False, None, commit=False)

    def plan_cost(
        self,
        dataset: str,
        costs: Sequence[Any],
        group_size: int = 1,
        *,
        delta: float | None = None,
        against: Against = "remaining",
    ) -> BudgetReport:
        """The tight total of a plan fixed in advance, in the budget's currency; nothing is charged.

        Parameters
        ----------
        dataset : str
            The dataset whose budget sets the currency (and the remaining δ of an (ε, δ) budget).
        costs : list of mechanisms, events or guarantees
            Every release of the plan.
        group_size : int, default 1
        delta : float, optional
            For (ε, δ) budgets under basic composition: the δ at which to read the plan's ε. Default:
            δ = 0 when every release is pure (a guarantee with δ = 0 and noise that is not Gaussian),
            otherwise the δ the budget has left (the whole budget's δ with ``against="budget"``).
        against : {"remaining", "budget"}, default "remaining"
            Price the plan against what remains (after every active spend) or against the whole budget, as
            if nothing had been spent yet (e.g. "can one run of this DAG ever fit?").
        """
        budget, totals, price = self._price_plan(dataset, costs, group_size, delta, against)
        return BudgetReport(
            dataset, "plan cost", price.cost, price.method, budget.guarantee, totals.open, budget.relation
        )

    def plan_fits(
        self,
        dataset: str,
        costs: Sequence[Any],
        group_size: int = 1,
        *,
        delta: float | None = None,
        against: Against = "remaining",
    ) -> bool:
        """Whether :meth:`spend_plan` with these arguments would be accepted now; nothing is charged.

        The plan is priced as :meth:`plan_cost` prices it and checked by the budget's own rule against
        everything spent so far (open reservations included), exactly as :meth:`spend_plan` checks it.
        Another process may spend in between, so a plan that fits now can still be refused later. With
        ``against="budget"`` the plan is checked against the whole budget, as if nothing had been spent:
        whether it could ever be accepted. This is the one plan check: the ``dp-pipeline plan check``
        command, the Airflow DAG check and the DAG policy all ask it.

        Raises
        ------
        UnsupportedCompositionError
            The plan cannot be charged to the budget at all (e.g. (ε, δ > 0) releases on a μ-GDP budget).
        """
        budget, totals, price = self._price_plan(dataset, costs, group_size, delta, against)
        return _fits(budget, totals.plus(price.charge))

    def _price_plan(
        self, dataset: str, costs: Sequence[Any], group_size: Any, delta: Any, against: Any
    ) -> tuple[_Budget, _Totals, _Price]:
        events = _to_events(costs)
        k = check_positive_int(group_size, "group_size")
        plan_delta = self._check_plan_delta(delta)
        if against not in ("remaining", "budget"):
            raise InvalidParameterError(
                f"'against' must be 'remaining' or 'budget', got {printable(against)!r}", "against"
            )
        _, budget, totals = self._read(dataset)
        if against == "budget":
            totals = _Totals()
        return budget, totals, _price(budget, events, k, True, plan_delta, totals)

    def spend_plan(
        self,
        dataset: str,
        costs: Sequence[Any],
        *,
        key: str | None = None,
        label: str | None = None,
        group_size: int = 1,
        delta: float | None = None,
    ) -> Reservation:
        """Check and charge a whole plan at its tight total, as one record (see :meth:`plan_cost`).

        ``key`` pays for one plan, under :meth:`spend`'s contract: reusing it raises
        :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges nothing.
        """
        events = _to_events(costs)
        plan_delta = self._check_plan_delta(delta)
        return self._reserve(dataset, events, group_size, label, key, True, plan_delta, commit=True)

    def release(self, dataset: str, key: str, reason: str, *, actor: str | None = None) -> Reservation:
        """Operator release: return an open reservation (e.g. of a process that died) to the budget.

        Only for attempts that never read data. Recorded with ``reason`` and ``actor`` (default
        user@host). Releasing a released reservation again does nothing; a committed one cannot be
        released (LedgerError).
        """
        dataset = _check_name(dataset, "dataset")
        key = _check_name(key, "key", _MAX_KEY)
        self._release(dataset, key, reason, actor, by="operator")
        found = self._store.reservation(dataset, key=key)
        assert found is not None
        return self._reservation(dataset, found)

    # ------------------------------------------------------------------------------------- verify

    def verify(
        self, dataset: str | None = None, *, anchor: Mapping[str, Any] | str | os.PathLike[str] | None = None
    ) -> VerifyReport:
        """Recompute every hash chain and running total, and replay every spend against its budget.

        Checks, per dataset: the hash of every record and the chain of ``prev_hash`` (an edited, deleted
        or inserted record breaks it); with a key, every signature, and that no record after the first
        signed one is unsigned; that the head row points at the last record and caches the budget,
        method and totals the records imply; that every running total written in a record equals the sum
        of the charges before it; that every budget record fits what was spent before it, that every
        reservation was priced (by the accountant's own pricing) at no less than its request costs under
        the budget in force when it was made, and fitted that budget; that commits and releases end open
        reservations, once; and that idempotency keys are unique.

        Parameters
        ----------
        dataset : str, optional
            Check only this dataset (UnknownDatasetError if the ledger has no such dataset).
        anchor : mapping or path, optional
            A checkpoint from :meth:`anchor` (the mapping, or the path of its JSON file). Every dataset it
            names must still exist and extend the chain it recorded: a rollback, a truncation, a rewritten
            chain, a re-created dataset or an older copy of the ledger fails.

        Raises
        ------
        LedgerError
            Naming the first problem.
        """
        names = self._store.datasets()
        if dataset is not None:
            dataset = _check_name(dataset, "dataset")
            if dataset not in names and (anchor is None or dataset not in _read_anchor(anchor)):
                raise UnknownDatasetError(dataset)
            names = [dataset]
        signer = getattr(self._store, "signer", None)
        count = 0
        tips: dict[str, list[LedgerRecord]] = {}
        for name in names:
            records = self._store.records(name)
            head = self._store.head(name)
            problem = check_chain(name, records, head, signer) or _check_semantics(name, records, head)
            if problem:
                raise LedgerError(f"ledger verification failed: {problem}")
            count += len(records)
            tips[name] = records
        if anchor is not None:
            problem = _check_anchor(_read_anchor(anchor), tips, signer, only=dataset)
            if problem:
                raise LedgerError(f"ledger verification against the anchor failed: {problem}")
        return VerifyReport(tuple(names), count, signer is not None, anchor is not None)

    def anchor(self) -> dict[str, Any]:
        """Verify the ledger and return a checkpoint of every dataset's head, to keep outside the database.

        The checkpoint is a small JSON-serialisable mapping: per dataset the seq and hash of its last
        record, and, with a key, an HMAC of the whole checkpoint. Keep it where whoever can write the
        database cannot (another machine, object storage with versioning, a CI artifact);
        ``verify(anchor=…)`` or ``dp-pipeline ledger verify --anchor FILE`` later proves the ledger only
        grew since. ``dp-pipeline ledger anchor --output FILE`` writes it to a file.
        """
        self.verify()
        heads = {}
        for name in self._store.datasets():
            head = self._store.head(name)
            assert head is not None  # verify() checked that every dataset with records has a head
            heads[name] = {"seq": head.seq, "hash": head.hash}
        checkpoint: dict[str, Any] = {"format": _ANCHOR_FORMAT, "time": utc_now(), "datasets": heads}
        signer = getattr(self._store, "signer", None)
        if signer is not None:
            checkpoint["mac"] = signer.sign(canonical_json(checkpoint))
        return checkpoint

    # ------------------------------------------------------------------------------------- internals

    def _check_plan_delta(self, delta: Any) -> float | None:
        if delta is None:
            return None
        value = check_real(delta, "delta")
        if not 0.0 <= value < 1.0:
            raise InvalidParameterError(f"'delta' must lie in [0, 1), got {value}", "delta")
        return value

    def _atomic(self, dataset: str, fn: Callable[[LedgerTransaction], T]) -> T:
        """``store.atomic``; an UnknownDatasetError raised inside names the ledger (read after the lock)."""
        try:
            return self._store.atomic(dataset, fn)
        except UnknownDatasetError as err:
            if err.ledger is not None:
                raise
            raise self._unknown(dataset) from None

    def _unknown(self, dataset: str) -> UnknownDatasetError:
        empty = not any(self._store.head(name) is not None for name in self._store.datasets())
        return UnknownDatasetError(dataset, redact_url(self.url), empty)

    def _read(self, dataset: str) -> tuple[DatasetHead, _Budget, _Totals]:
        dataset = _check_name(dataset, "dataset")
        head = self._store.head(dataset)
        if head is None:
            raise self._unknown(dataset)
        where = f"dataset {dataset!r}"
        return head, _budget_of(head.state, where), _Totals.from_json(head.state.totals, where)

    def _reservation(
        self, dataset: str, found: ReservationRecords, cost: Guarantee | None = None
    ) -> Reservation:
        body = found.reserve.body
        if cost is None:
            cost = guarantee_from_dict(dict(body["cost"]))
        assert found.reserve.key is not None
        return Reservation(
            self,
            dataset,
            found.reserve.key,
            found.reserve.seq,
            cost,
            str(body.get("composition")),
            found.status,
            body.get("label"),
            int(body.get("group_size", 1)),
        )

    def _reserve(
        self,
        dataset: str,
        events: list[PrivacyEvent],
        group_size: Any,
        label: Any,
        key: Any,
        plan: bool,
        plan_delta: float | None,
        *,
        commit: bool,
    ) -> Reservation:
        dataset = _check_name(dataset, "dataset")
        k = check_positive_int(group_size, "group_size")
        label = _check_optional_text(label, "label", 2000)
        given_key = _check_optional_text(key, "key", _MAX_KEY)
        key = given_key or f"auto-{uuid.uuid4().hex}"
        event_dicts = [e.to_dict() for e in events]
        # Price outside the lock, so that the lock is held only for the check and the writes: a plan
        # (its PLD can take a while) from a fresh read, one release from the budget last seen. Inside,
        # the price is recomputed only if the budget, or the remaining δ a plan was composed at, changed.
        price: _Price | None = None
        if plan:
            _, budget, totals = self._read(dataset)
            if given_key is None or self._store.reservation(dataset, key=given_key) is None:
                price = _price(budget, events, k, plan, plan_delta, totals)  # a used key is refused unpriced
        elif dataset in self._budgets:
            price = _price_one(self._budgets[dataset], canonical_json(event_dicts[0]), k)
        where = f"dataset {dataset!r}"

        def request(stated: list[dict[str, Any]]) -> str:
            return canonical_json({"events": stated, "group_size": k, "plan": plan, "delta": plan_delta})

        def run(tx: LedgerTransaction) -> tuple[ReservationRecords, Guarantee]:
            head = tx.head
            if head is None:
                raise UnknownDatasetError(dataset)  # named in full by _atomic
            relation = _budget_of(head.state, where).relation
            # every recorded event states its relation: one that states none was charged under the dataset's
            stated = [(e if e.relation is not None else e.under(relation)).to_dict() for e in events]
            # a random key cannot exist yet: look up only keys the caller chose
            found = None if given_key is None else tx.reservation(key=key)
            if found is not None:  # a key pays for one release: every later call is refused
                _check_same_request(dataset, key, found, request(stated))
                raise KeyAlreadyUsedError(dataset, key, found.status)
            current = _budget_of(head.state, where)
            totals = _Totals.from_json(head.state.totals, where)
            p = price
            if (
                p is None
                or p.budget != current
                or (p.remaining_delta is not None and p.remaining_delta != _remaining_delta(current, totals))
            ):
                p = _price(current, events, k, plan, plan_delta, totals)
            after = totals.plus(p.charge)
            if not _fits(current, after):
                spent = _spent_report(dataset, current, totals)
                remaining = _remaining_report(dataset, current, totals)
                single = None if k == 1 else _price(current, events, 1, plan, plan_delta, totals).cost
                raise BudgetExceededError(
                    dataset,
                    p.cost,
                    spent.guarantee,
                    remaining.guarantee,
                    current.guarantee,
                    detail=_refusal_detail(current, p),
                    group_size=k,
                    single=single,
                )
            after_json = after.to_json()
            body = {
                "label": label,
                "group_size": k,
                "plan": plan,
                "delta": plan_delta,
                "relation": relation,
                "events": stated,
                "cost": p.cost.to_dict(),
                "composition": p.method,
                "charge": p.charge.to_json(),
                "totals": after_json,
            }
            state = head.state
            record = tx.append("reserve", body, DatasetState(state.budget, state.method, after_json), key=key)
            end: LedgerRecord | None = None
            if commit:
                done = after.committed().to_json()
                end = tx.append(
                    "commit",
                    {"totals": done},
                    DatasetState(state.budget, state.method, done),
                    key=key,
                    reservation=record.seq,
                )
            return ReservationRecords(record, end), p.cost

        found, cost = self._atomic(dataset, run)
        if dataset not in self._budgets:
            head = self._store.head(dataset)
            if head is not None:
                self._budgets[dataset] = _budget_of(head.state, where)
        return self._reservation(dataset, found, cost)

    def _commit(self, dataset: str, key: str) -> str:
        def run(tx: LedgerTransaction) -> str:
            head = tx.head
            found = tx.reservation(key=key)
            if head is None or found is None:
                raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
            if found.status == "released":
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} was released and cannot be "
                    "committed; if data was read, spend again with a new key"
                )
            if found.status == "open":
                t = _Totals.from_json(head.state.totals, f"dataset {dataset!r}").committed().to_json()
                tx.append(
                    "commit",
                    {"totals": t},
                    DatasetState(head.state.budget, head.state.method, t),
                    key=key,
                    reservation=found.reserve.seq,
                )
            return "committed"

        return self._store.atomic(dataset, run)

    def _release(self, dataset: str, key: str, reason: Any, actor: Any, *, by: str) -> str:
        reason = _check_name(reason, "reason", 2000) if isinstance(reason, str) and reason.strip() else None
        if reason is None:
            raise InvalidParameterError("a release needs a non-empty 'reason' (it is recorded)", "reason")
        actor = _check_optional_text(actor, "actor", 255) or _default_actor()

        def run(tx: LedgerTransaction) -> str:
            head = tx.head
            if head is None:
                raise UnknownDatasetError(dataset)  # named in full by _atomic
            found = tx.reservation(key=key)
            if found is None:
                raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
            if found.status == "committed":
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} is committed (its attempt may "
                    "have read data) and cannot be released"
                )
            if found.status == "open":
                where = f"dataset {dataset!r}, record seq={found.reserve.seq}"
                charge = _Charge.from_json(found.reserve.body.get("charge"), where)
                t = _Totals.from_json(head.state.totals, f"dataset {dataset!r}").minus(charge)
                body = {"reason": reason, "actor": actor, "by": by, "totals": t.to_json()}
                tx.append(
                    "release",
                    body,
                    replace(head.state, totals=t.to_json()),
                    key=key,
                    reservation=found.reserve.seq,
                )
            return "released"

        return self._atomic(dataset, run)

    # ------------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Close the ledger's connections."""
        self._store.close()

    def __enter__(self) -> PrivacyAccountant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __copy__(self) -> PrivacyAccountant:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PrivacyAccountant:
        # A handle to one external ledger: copies (sklearn clone, GridSearchCV) must charge the same one.
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (PrivacyAccountant, (self._store,))

    def __repr__(self) -> str:
        store = self._store
        shown = repr(store) if isinstance(store, MemoryLedger) else repr(getattr(store, "_shown", store.url))
        return f"PrivacyAccountant({shown})"


def _check_same_request(dataset: str, key: str, found: ReservationRecords, request: str) -> None:
    body = found.reserve.body
    stored = canonical_json(
        {
            "events": body.get("events"),
            "group_size": body.get("group_size"),
            "plan": body.get("plan"),
            "delta": body.get("delta"),
        }
    )
    if stored != request:
        raise InvalidParameterError(
            f"the key {key!r} already reserved a different cost on dataset {dataset!r} "
            f"({body.get('cost')}, group size {body.get('group_size')}); use a new key for a different "
            "release",
            "key",
        )


def _spent_report(dataset: str, budget: _Budget, totals: _Totals) -> BudgetReport:
    g = budget.guarantee
    if isinstance(g, GaussianDP):
        spent_mu = GaussianDP(_sqrt_up(totals.mu2))
        return BudgetReport(dataset, "spent", spent_mu, "gdp", g, totals.open, budget.relation)
    assert isinstance(g, ApproxDP)
    if budget.method == "basic":
        spent = ApproxDP(_float_up(totals.epsilon), _float_up(totals.delta))
        return BudgetReport(dataset, "spent", spent, "basic", g, totals.open, budget.relation)
    candidates: list[tuple[ApproxDP, str]] = []
    if totals.impure == 0:
        candidates.append((ApproxDP(_float_up(totals.epsilon), 0.0), "basic"))
    if totals.no_mu == 0:
        gdp = GaussianDP(_sqrt_up(totals.mu2))
        candidates.append((gdp.to_approx_dp(g.delta) if gdp.mu > 0 else ApproxDP(0.0, 0.0), "gdp"))
    spent, method = min(candidates, key=lambda c: (c[0].epsilon, c[1] != "basic"))
    return BudgetReport(dataset, "spent", spent, method, g, totals.open, budget.relation)


def _remaining_report(dataset: str, budget: _Budget, totals: _Totals) -> BudgetReport:
    g = budget.guarantee
    if isinstance(g, GaussianDP):
        left = _sqrt_down(max(_ZERO, _sub(_square(_dec(g.mu)), totals.mu2)))
        return BudgetReport(dataset, "remaining", GaussianDP(left), "gdp", g, totals.open, budget.relation)
    assert isinstance(g, ApproxDP)
    if budget.method == "basic":
        rest = ApproxDP(
            _float_down(_sub(_dec(g.epsilon), totals.epsilon)), _float_down(_sub(_dec(g.delta), totals.delta))
        )
        return BudgetReport(dataset, "remaining", rest, "basic", g, totals.open, budget.relation)
    spent = _spent_report(dataset, budget, totals)
    rest = ApproxDP(
        _float_down(_sub(_dec(g.epsilon), _dec(spent.epsilon))),
        _float_down(_sub(_dec(g.delta), _dec(spent.delta))),
    )
    return BudgetReport(dataset, "remaining", rest, spent.method, g, totals.open, budget.relation)


def _entry(record: LedgerRecord, ends: Mapping[int, LedgerRecord]) -> LedgerEntry:
    body = record.body
    guarantee: Guarantee | None = None
    events: tuple[PrivacyEvent, ...] = ()
    method: str | None = None
    status = record.kind
    if record.kind == "reserve":
        guarantee = guarantee_from_dict(dict(body["cost"]))
        events = tuple(PrivacyEvent.from_dict(dict(e)) for e in body.get("events", ()))
        method = body.get("composition")
        end = ends.get(record.seq)
        status = "open" if end is None else ("committed" if end.kind == "commit" else "released")
    elif record.kind == "budget":
        guarantee = guarantee_from_dict(dict(body["budget"]))
        method = body.get("method")
    return LedgerEntry(
        dataset=record.dataset,
        seq=record.seq,
        time=datetime.fromisoformat(record.time),
        kind=record.kind,
        status=status,
        label=body.get("label"),
        key=record.key,
        group_size=body.get("group_size"),
        guarantee=guarantee,
        method=method,
        events=events,
        reservation=record.reservation,
        reason=body.get("reason"),
        actor=body.get("actor"),
        hash=record.hash,
        relation=body.get("relation", DEFAULT_RELATION) if record.kind in ("budget", "reserve") else None,
    )


def _request_charge(budget: _Budget, body: Mapping[str, Any], totals: _Totals) -> _Charge:
    """What a reservation's request (its events, group size, plan and δ) costs under ``budget``, priced by
    the accountant's own pricing as :meth:`PrivacyAccountant.spend`/``spend_plan`` priced it."""
    k = int(body["group_size"])
    if not body.get("plan"):
        return _price_one(budget, canonical_json(dict(body["events"][0])), k).charge
    events = [PrivacyEvent.from_dict(dict(e)) for e in body["events"]]
    return _price(budget, events, k, True, body.get("delta"), totals).charge


def _covers(recorded: _Charge, needed: _Charge) -> bool:
    """Whether a recorded charge counts at least what the request needs.

    A missing amount only makes the check stricter (a charge without ε is not pure; one without μ blocks
    the μ-GDP route), so it is allowed; an amount the request does not have, or a smaller one, is not.
    Ledgers written before amounts were recorded at the float's exact binary value hold its shortest
    decimal instead, which may be below the exact value by less than half a unit in the last place: an
    amount that rounds to the same double as the price covers it.
    """
    for got, need in (
        (recorded.epsilon, needed.epsilon),
        (recorded.delta, needed.delta),
        (recorded.mu2, needed.mu2),
    ):
        if need is None and got is not None:
            return False
        if need is not None and got is not None and got < need and float(got) < float(need):
            return False
    return True
def _refusal_detail(budget: _Budget, price: _Price) -> str:
    detail = f"Rule: {budget.describe()}; the request was composed by {price.method!r}."
    g = budget.guarantee
    if isinstance(g, ApproxDP) and g.delta == 0 and isinstance(price.cost, ApproxDP) and price.cost.delta > 0:
        detail += (
            " The budget has δ = 0 (pure DP): no release with δ > 0 fits it, however large its noise. Use "
            "pure noise (Laplace, staircase) or set a budget with δ > 0."
        )
    return detail


def _read_all(
    dataset: str, records: Sequence[LedgerRecord], read: Callable[[LedgerRecord], _T]
) -> list[_T]:
    """``read`` of every record, or one clear LedgerError naming the first record it cannot read."""
    entries: list[_T] = []
    unreadable = None
    for r in records:
        try:
            entries.append(read(r))
        except (KeyError, TypeError, ValueError) as err:  # incl. InvalidParameterError
            unreadable = f"record seq {r.seq} is unreadable ({type(err).__name__}: {err})"
            break
    if unreadable is not None:  # raised outside the handler: one clear error, no raw chain
        raise LedgerError(
            f"dataset {dataset!r}: {unreadable}; the ledger is corrupt or was altered (run verify)"
        )
    return entries


def _release_entry(record: LedgerRecord, end: LedgerRecord | None) -> ReleaseEntry:
    entry = _entry(record, {} if end is None else {record.seq: end})
    assert entry.guarantee is not None
    return ReleaseEntry(
        dataset=entry.dataset,
        seq=entry.seq,
        time=entry.time,
        label=entry.label,
        key=entry.key,
        group_size=int(entry.group_size or 1),
        cost=entry.guarantee,
        method=entry.method,
        events=entry.events,
        status="cancelled" if entry.status == "released" else entry.status,
        ended=None if end is None else datetime.fromisoformat(end.time),
        reason=None if end is None else end.body.get("reason"),
        actor=None if end is None else end.body.get("actor"),
    )


def _check_semantics(dataset: str, records: Sequence[LedgerRecord], head: DatasetHead | None) -> str | None:
    """Replay the running totals, the budgets and the reservation states; the first inconsistency, or None.

    Every reservation is re-priced under the budget in force when it was made and must fit it, so a
    budget raised outside dp-pipeline for a spend and put back afterwards is found.
    """
    totals = _Totals()
    budget: _Budget | None = None
    budget_state: tuple[Any, str] | None = None
    reserves: dict[int, _Charge] = {}
    ended: set[int] = set()
    keys: set[str] = set()
    try:
        for record in records:
            where = f"dataset {dataset!r}, record seq={record.seq}"
            body = record.body
            if record.kind == "budget":
                guarantee = guarantee_from_dict(dict(body["budget"]))
                method = body.get("method")
                state: dict[str, Any] = {"guarantee": guarantee.to_dict(), "mu_limit": body.get("mu_limit")}
                if "relation" in body:  # budget records written before relations existed have none
                    state["relation"] = body["relation"]
                budget_state = (state, str(method))
                budget = _Budget.from_state(DatasetState(*budget_state, {}), where)
                if (
                    isinstance(budget.guarantee, ApproxDP)
                    and budget.mu_limit is not None
                    # as a double: older ledgers stored the limit's shortest decimal (see _covers)
                    and float(budget.mu_limit) > float(_mu_limit(budget.guarantee))
                ):
                    return (
                        f"{where}: the budget's μ limit {budget.mu_limit} is above the one its (ε, δ) allows"
                    )
                if not _fits(budget, totals):
                    return f"{where}: the budget {budget.describe()} is below what was already spent"
            elif budget is None:
                return f"{where}: a {record.kind} record before any budget was set"
            elif record.kind == "reserve":
                if record.key is None or record.key in keys:
                    return f"{where}: missing or repeated idempotency key {record.key!r}"
                keys.add(record.key)
                charge = _Charge.from_json(body.get("charge"), where)
                if not _covers(charge, _request_charge(budget, body, totals)):
                    return (
                        f"{where}: the recorded charge {charge.to_json()} is below what its request costs "
                        f"under the budget in force, {budget.describe()}"
                    )
                reserves[record.seq] = charge
                totals = totals.plus(charge)
                if not _fits(budget, totals):
                    return (
                        f"{where}: the reservation does not fit the budget in force, {budget.describe()}; it "
                        "was accepted against another budget (the stored budget was changed outside "
                        "dp-pipeline)"
                    )
            else:
                target = record.reservation
                if target not in reserves:
                    return f"{where}: {record.kind} of seq={target}, which is not a reservation"
                if target in ended:
                    return f"{where}: reservation seq={target} was already committed or released"
                ended.add(target)
                totals = totals.committed() if record.kind == "commit" else totals.minus(reserves[target])
            stored = _Totals.from_json(body.get("totals"), where)
            if not stored.same_as(totals):
                return (
                    f"{where}: running totals {stored.to_json()} differ from the records' sum "
                    f"{totals.to_json()}"
                )
        if head is not None:
            where = f"dataset {dataset!r}, head row"
            if not _Totals.from_json(head.state.totals, where).same_as(totals):
                return f"{where}: cached totals {dict(head.state.totals)} differ from the records' sum"
            if budget_state is not None:
                cached = (dict(head.state.budget), head.state.method)
                if (
                    canonical_json(cached[0]) != canonical_json(budget_state[0])
                    or cached[1] != budget_state[1]
                ):
                    return f"{where}: cached budget {cached} differs from the last budget record"
    except LedgerError as err:
        return str(err)
    except (KeyError, TypeError, ValueError, InvalidParameterError) as err:
        return f"dataset {dataset!r}: unreadable record ({type(err).__name__}: {err})"
    return None


_ANCHOR_FORMAT = "dp-pipeline ledger anchor 1"


def _read_anchor(anchor: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """The datasets of a checkpoint from :meth:`PrivacyAccountant.anchor` (a mapping or its JSON file)."""
    if isinstance(anchor, Mapping):
        data: Any = anchor
    elif isinstance(anchor, (str, os.PathLike)):
        try:
            data = json.loads(Path(anchor).read_text(encoding="utf-8"))
        except OSError as err:
            raise InvalidParameterError(f"cannot read the anchor file: {err.strerror}", "anchor") from None
        except (ValueError, UnicodeDecodeError):
            raise InvalidParameterError("the anchor file is not JSON", "anchor") from None
    else:
        raise InvalidParameterError(
            "'anchor' must be a checkpoint from acct.anchor() or the path of its file, got "
            f"{type(anchor).__name__}",
            "anchor",
        )
    datasets = data.get("datasets") if isinstance(data, Mapping) else None
    if (
        not isinstance(data, Mapping)
        or data.get("format") != _ANCHOR_FORMAT
        or not isinstance(datasets, Mapping)
        or not all(
            isinstance(point, Mapping)
            and type(point.get("seq")) is int
            and point["seq"] >= 1
            and isinstance(point.get("hash"), str)
            for point in datasets.values()
        )
    ):
        raise InvalidParameterError(
            "not a dp-pipeline ledger anchor (see PrivacyAccountant.anchor)", "anchor"
        )
    return data


def _check_anchor(
    anchor: Mapping[str, Any],
    chains: Mapping[str, Sequence[LedgerRecord]],
    signer: RecordSigner | None,
    only: str | None,
) -> str | None:
    """The first way the chains fail to extend the anchor's heads, or None."""
    if signer is not None and "mac" in anchor:
        unsigned = {name: value for name, value in anchor.items() if name != "mac"}
        if not signer.valid(canonical_json(unsigned), anchor["mac"]):
            return "the anchor's MAC does not match the ledger key (the anchor was edited, or another key)"
    for name, point in anchor["datasets"].items():
        if only is not None and name != only:
            continue
        seq, digest = point["seq"], point["hash"]
        records = chains.get(name, ())
        if not records:
            return (
                f"dataset {name!r} is in the anchor (seq={seq}) but not in the ledger: it was deleted, or "
                "this is an older copy of the ledger"
            )
        if len(records) < seq:
            return (
                f"dataset {name!r}: the anchor has seq={seq} but the ledger ends at seq={len(records)}; "
                "records were removed (a rollback, or an older copy of the ledger)"
            )
        if records[seq - 1].hash != digest:
            return (
                f"dataset {name!r}: record seq={seq} differs from the anchor; the chain was rewritten or the "
                "dataset re-created"
            )
    return None
