"""PrivacyAccountant: per-dataset privacy budgets over a persistent, hash-chained ledger.

The accountant runs the transactions: it validates the request, checks and reserves in one locked
transaction (a refusal writes nothing), honours idempotency keys, and commits or cancels. The arithmetic is
the dataset's budget rule's (:mod:`dp_pipeline.accounting.rules`), priced by
:mod:`~dp_pipeline.accounting.pricing`; what is written is in :mod:`~dp_pipeline.accounting.records`,
what is shown in :mod:`~dp_pipeline.accounting.reports`, and verify's replay in
:mod:`~dp_pipeline.accounting.verify`. A :class:`~dp_pipeline.accounting.ledger.base.LedgerStore` keeps the
records and provides the lock.
"""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

from dp_pipeline._validation import check_positive_int, check_real
from dp_pipeline.accounting import pricing
from dp_pipeline.accounting.incremental import IncrementalVerifier
from dp_pipeline.accounting.ledger import LedgerStore, MemoryLedger, open_store
from dp_pipeline.accounting.ledger.base import (
    END_KINDS,
    KEY_ENV,
    DatasetHead,
    LedgerRecord,
    LedgerTransaction,
    ReservationRecords,
    canonical_json,
    check_chain,
    utc_now,
)
from dp_pipeline.accounting.ledger.urls import redact_url
from dp_pipeline.accounting.partitions import partition_names
from dp_pipeline.accounting.payments import (
    Holding,
    Paid,
    event_keys,
    read_reservation,
    read_shares,
    route,
)
from dp_pipeline.accounting.records import (
    BudgetBody,
    CancelBody,
    DatasetBudget,
    PayBody,
    ReserveBody,
    ShrinkBody,
    append,
    append_commit,
    budget_of,
    partitions_of,
    request_of,
    with_totals,
)
from dp_pipeline.accounting.reports import (
    BudgetReport,
    LedgerEntry,
    ReleaseEntry,
    VerifyReport,
    budget_report,
    ledger_entry,
    paid_entry,
    partition_reports,
    read_all,
    release_entry,
)
from dp_pipeline.accounting.reservation import Reservation, warn_renamed
from dp_pipeline.accounting.rules import Totals, user_rule
from dp_pipeline.accounting.verify import (
    ANCHOR_FORMAT,
    check_anchor,
    check_semantics,
    legacy_partitions_finding,
    read_anchor,
    unbounded_reading,
)
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
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP, guarantee_from_dict

__all__ = [
    "BudgetReport",
    "LedgerEntry",
    "PrivacyAccountant",
    "ReleaseEntry",
    "Reservation",
    "UnknownDatasetError",
    "VerifyReport",
]

Against = Literal["remaining", "budget"]

T = TypeVar("T")

_MAX_NAME = 255
_MAX_KEY = 512


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


def _check_partitions(partition: Any) -> tuple[str, ...]:
    """The partitions a release names, each a name every backend stores (see :func:`_check_name`)."""
    return tuple(_check_name(name, "partition") for name in partition_names(partition))


def _check_partitioned(dataset: str, budget: DatasetBudget, partitions: tuple[str, ...]) -> None:
    if partitions and budget.partitions is None:
        raise InvalidParameterError(
            f"dataset {dataset!r} is not partitioned, so a release cannot name a partition; declare it with "
            "set_budget(..., relation='add_remove', partitions=L) (L: the most partitions one person's data "
            "lie in), or charge "
            "the whole dataset",
            "partition",
        )
    if partitions and budget.legacy:
        raise InvalidParameterError(
            f"dataset {dataset!r} was declared partitioned under replace-one by an earlier version; parallel "
            "composition does not hold under replace-one (a person replaced may move to other partitions), "
            "so nothing is charged to its partitions any more: its partition totals count for every person, "
            f"and releases on the whole dataset are checked against that. Declare it with "
            f"set_budget({dataset!r}, ..., relation='add_remove') once it has no active spends, or release "
            "per partition on a new dataset declared with relation='add_remove', partitions=L",
            "partition",
        )


def _check_parallel(dataset: str, previous: DatasetBudget | None, new: DatasetBudget) -> None:
    """InvalidParameterError unless a partitioned budget is declared under add/remove (a dataset declared
    partitioned under replace-one by an earlier version may keep that declaration, read without parallel
    composition)."""
    kept = previous is not None and previous.legacy and previous.partitions == new.partitions
    if new.legacy and not kept:
        raise InvalidParameterError(
            f"a partitioned budget requires relation='add_remove', and dataset {dataset!r} would be "
            f"{new.relation!r}: parallel composition over partitions holds when one person is added or "
            "removed, not when one is replaced by another who may lie in other partitions. Declare "
            f"set_budget({dataset!r}, ..., relation='add_remove', partitions=L): aggregates (dp_count, "
            "dp_sum, dp_mean, dp_histogram) calibrate to add/remove, and row-level releases (add_noise, "
            "randomized_response) are refused on such a dataset. Nothing was changed.",
            "partitions",
        )


def _default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover - no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


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
        Seconds a write (spend, reserve, commit, cancel, set_budget) waits for the ledger's lock before it
        raises LedgerError; nothing is written then.

    Notes
    -----
    **Budgets and rules.** Each dataset has one budget in one currency, ``ApproxDP(ε_B, δ_B)``
    (``PureDP(ε_B)`` is ``ApproxDP(ε_B, 0)``) or ``GaussianDP(μ_B)``, and one rule, both chosen by
    :meth:`set_budget`. Each rule is a class with its validity argument in its docstring:

    * ``rule="basic"`` (:class:`~dp_pipeline.accounting.rules.BasicComposition`, the default for (ε, δ)):
      Σεᵢ ≤ ε_B and Σδᵢ ≤ δ_B over all active spends;
    * ``rule="gdp_filter"`` (:class:`~dp_pipeline.accounting.rules.GaussianDPFilter`, the default for μ-GDP):
      Σμᵢ² ≤ μ_B²; an (ε, δ > 0) spend has no μ and raises UnsupportedCompositionError;
    * ``rule="pure_or_gdp"`` (:class:`~dp_pipeline.accounting.rules.PureOrGaussianDP`, (ε, δ > 0) budgets):
      every active spend pure and Σεᵢ ≤ ε_B, or Σμᵢ² ≤ μ_B² with μ_B the largest μ whose (ε, δ_B) reading
      fits ε_B. The report names the route that gives the smaller ε;
    * ``rule="zcdp"`` (:class:`~dp_pipeline.accounting.rules.ZeroConcentratedDP`, (ε, δ > 0) budgets):
      every active spend pure and Σεᵢ ≤ ε_B, or Σρᵢ ≤ ρ_B with ρ = ε²/2 for pure ε, (kΔ)²/(2σ²) for Gaussian
      noise, and ρ_B the largest ρ whose (ε, δ_B) reading fits ε_B: mixed Laplace and Gaussian releases
      chosen one after another. ``"auto"`` stays ``"basic"`` (see :mod:`dp_pipeline.accounting.rules`).

    Which rule a budget uses is fixed when the budget is set, before any spend, and cannot change while
    spends are recorded: switching rules after results are known is not a valid composition.

    **Partitions.** A dataset declared with ``set_budget(..., relation="add_remove", partitions=L)`` keeps
    one total per partition; a release names the partitions it reads (``partition=``), and is accepted while
    every person's loss (the whole-dataset releases and those of the partitions holding their data) fits:
    exactly for L = 1, through the L largest partition totals for L ≥ 2 (parallel composition, valid
    adaptively under add/remove only: see :class:`~dp_pipeline.accounting.records.DatasetBudget`).
    :meth:`partitions` reports each partition.

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

    **Plans** (:meth:`plan_cost`, :meth:`plan_fits`, :meth:`spend_plan`) are releases declared before any of
    them runs, charged as one record at the total the budget's rule gives them: under basic composition
    their tight total from :func:`~dp_pipeline.accounting.composition.compose_plan` (read at the δ you give,
    by default at δ = 0 when every release is pure and at the remaining δ otherwise), under the μ-GDP rules
    √Σμᵢ² (the same as their spends one by one).

    **Exact arithmetic.** Amounts are the exact binary values of the floats (ε = 0.1 is
    0.1000000000000000055…, what noise calibrated with that float can lose), summed exactly; μ² is
    exact too. Totals are cached as decimal strings, so a spend is O(1). The comparison with the budget
    is exact: a total equal to the budget fits (40 spends of ε = 0.125 fit ε_B = 5) and anything above
    it is refused (50 spends of ε = 0.1 exceed ε_B = 5 by 2.8·10⁻¹⁵, so the 50th is refused). Every
    number that had to be rounded (group sizes, μ of pure ε, square roots, PLD totals, conversions) was
    rounded toward more privacy loss, so a case that rounding makes uncertain is refused. Reported spent
    amounts round up and remaining amounts down, so spending exactly ``remaining()`` succeeds.

    **Ledger.** Every change is a new, hash-chained record (budget, reserve, commit, and ``release`` for a
    cancellation). Check and reserve run in one locked transaction; a refusal writes nothing. A
    reservation stays counted until committed or cancelled; one whose process died stays counted (fail
    closed) until an operator calls :meth:`cancel` with a reason, which is recorded. Idempotency keys: a
    key pays for exactly one release per dataset; any later spend or reservation with it is refused with
    :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges nothing (see :meth:`spend`).

    **Paying from a reservation.** A :class:`Reservation` is a budget the work it covers spends from:
    :meth:`Reservation.spend` pays a release from it (a ``pay`` record, adding nothing to the dataset's
    totals), :meth:`reservation` reopens one by key in another process, :meth:`shrink` lowers one to a
    sub-plan of what it declared. Code that pays from a reservation is handed the reservation
    (and, at most, a read-only accountant: ``read_only=True`` refuses every charge), so that it cannot
    charge the reservation's dataset again.

    **Copies.** ``copy.deepcopy`` (and so scikit-learn's ``clone``) returns the same accountant, so
    charges land in the one ledger configured. Pickling carries the URL (an SQL ledger reopens the same
    database in the new process); a memory ledger cannot be pickled.

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014.
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
        self._budgets: dict[str, DatasetBudget] = {}  # last budget seen per dataset: a pricing hint only
        # per legacy dataset, unbounded_reading of its records and the chain tip (seq, hash) it was read at
        self._readings: dict[str, tuple[tuple[int, str], str | None]] = {}
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
        self._verifier = IncrementalVerifier(self._store)

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
        rule: str | None = None,
        relation: str | None = None,
        reason: str | None = None,
        actor: str | None = None,
        method: str | None = None,
        partitions: int | None = None,
    ) -> None:
        """Set or change a dataset's budget.

        Parameters
        ----------
        dataset : str
            The dataset (at most 255 characters).
        budget : ApproxDP, PureDP or GaussianDP
            The total privacy loss the dataset may incur.
        rule : {"auto", "basic", "gdp_filter", "pure_or_gdp", "zcdp"}, default "auto"
            How spends compose against the budget (see the class Notes and
            :mod:`dp_pipeline.accounting.rules`): ``"basic"`` sums ε and δ; ``"gdp_filter"`` sums μ² (μ-GDP
            budgets); ``"pure_or_gdp"`` takes pure and Gaussian releases on an (ε, δ > 0) budget, by Σε while
            all are pure or by Σμ² against the largest μ that fits; ``"zcdp"`` takes the same releases by Σε
            while all are pure or by Σρ against the largest ρ that fits (tighter than ``"pure_or_gdp"`` when
            many releases are pure, looser when nearly all are Gaussian). ``"auto"``: ``"basic"`` for (ε, δ)
            budgets, ``"gdp_filter"`` for GaussianDP. The older name ``"gdp"`` means ``"gdp_filter"`` on a
            GaussianDP budget and ``"pure_or_gdp"`` on an (ε, δ) budget.
        relation : {"replace_one", "add_remove"}, optional
            Which datasets are neighbours: one person's rows replaced by another's (``"replace_one"``, the
            default for a new dataset) or one person's rows added or removed (``"add_remove"``). Every spend
            is read under it (see :func:`~dp_pipeline.accounting.relations.to_relation`): row-level releases
            are private only under replace-one and are refused on an add/remove dataset. None keeps the
            relation of an existing dataset. It cannot change once spends are recorded.
        reason, actor : str, optional
            Recorded with the change (actor defaults to user@host).
        method : str, optional
            Deprecated name of ``rule`` (DeprecationWarning).
        partitions : int, optional
            Declare the dataset partitioned by a public attribute (a region, a cohort, the day of a per-day
            dataset), with L = ``partitions`` the most partitions one person's data lie in. Requires
            ``relation="add_remove"`` (parallel composition does not hold under replace-one). Releases then
            name the partitions they read (``spend(..., partition=...)``), each partition keeps its own
            total, and a release is accepted while every person's loss, the releases that named no
            partition plus those of the partitions holding the person's data, fits (exactly for L = 1,
            through the L largest partition totals for L ≥ 2); the dataset's spent amount composes the L
            largest partition totals (parallel composition; the validity argument is in
            :class:`~dp_pipeline.accounting.records.DatasetBudget`). None keeps the declaration of an
            existing dataset (a new one is not partitioned). While spends are recorded L may grow, not
            shrink. Names such as ``"visits/2026-11-24"`` map to a dataset and a partition with
            :func:`~dp_pipeline.accounting.partitions.split_partition`.

        Raises
        ------
        InvalidParameterError
            A wrong type, a rule that does not take this budget, a budget below what is already spent, a
            partitioned budget on a relation other than ``"add_remove"``, or a change of currency, rule or
            relation (or a smaller L) while spends are recorded. Nothing changes then.

        Notes
        -----
        Setting the same budget again writes nothing. Raising a budget is a deliberate decision and is
        recorded as a new ``budget`` record with the previous one.
        """
        name, parameter = _rule_choice(rule, method)
        dataset = _check_name(dataset, "dataset")
        guarantee = _check_budget(budget)
        reason = _check_optional_text(reason, "reason", 2000)
        actor = _check_optional_text(actor, "actor", 255)
        if relation is not None and relation not in RELATIONS:
            raise InvalidParameterError(
                f"'relation' must be 'replace_one' or 'add_remove', got {relation!r}", "relation"
            )
        asked = cast(Relation | None, relation)
        declared = None if partitions is None else check_positive_int(partitions, "partitions")
        chosen = user_rule(name, guarantee, parameter).create(guarantee)

        def run(tx: LedgerTransaction) -> None:
            head = tx.head
            previous: DatasetBudget | None = None
            if head is None:
                new, totals = DatasetBudget(chosen, asked or DEFAULT_RELATION, declared), chosen.empty()
                _check_parallel(dataset, None, new)
            else:
                where = f"dataset {dataset!r}"
                previous = budget_of(head.state, where)
                new = DatasetBudget(chosen, asked or previous.relation, declared or previous.partitions)
                if previous == new:
                    return
                _check_parallel(dataset, previous, new)
                totals = _changed_totals(
                    dataset, previous, new, previous.rule.read_totals(head.state.totals, where)
                )
            previous_guarantee = None if previous is None else previous.guarantee
            body = BudgetBody(new, previous_guarantee, reason, actor or _default_actor(), totals)
            append(tx, body, new.head_state(totals))

        self._atomic(dataset, run)

    def budget(self, dataset: str) -> BudgetReport:
        """The dataset's budget and its rule (``method``: the rule's stored name, "basic" or "gdp")."""
        _, budget, totals = self._read(dataset)
        return budget_report(dataset, "budget", budget, totals)

    def relation(self, dataset: str) -> Relation:
        """The dataset's neighbouring relation, ``"replace_one"`` or ``"add_remove"`` (:meth:`set_budget`)."""
        _, budget, _ = self._read(dataset)
        return budget.relation

    def datasets(self) -> list[str]:
        """The datasets with a budget in this ledger, sorted."""
        return [name for name in self._store.datasets() if self._store.head(name) is not None]

    # ------------------------------------------------------------------------------------- reports

    def spent(self, dataset: str) -> BudgetReport:
        """What the dataset has spent (open reservations included), rounded up, with the method.

        A dataset declared partitioned under replace-one by an earlier version whose records hold a
        row-level release on a partition has an unbounded loss: the report says so (``unbounded``, ε or μ
        ``inf``; see :func:`~dp_pipeline.accounting.verify.unbounded_reading`).
        """
        head, budget, totals = self._read(dataset)
        return budget_report(dataset, "spent", budget, totals, self._unbounded(dataset, head, budget))

    def remaining(self, dataset: str) -> BudgetReport:
        """What is left of the dataset's budget, rounded down, with the method (nothing, and why, for a
        dataset whose loss is unbounded: see :meth:`spent`)."""
        head, budget, totals = self._read(dataset)
        return budget_report(dataset, "remaining", budget, totals, self._unbounded(dataset, head, budget))

    def partitions(self, dataset: str) -> dict[str, BudgetReport]:
        """What each partition of a partitioned dataset has spent, by partition name (sorted).

        Each report is the loss, under the dataset's rule and rounded up, of a person whose data lie in that
        partition alone: the releases that named it plus those that named no partition. :meth:`spent`
        composes the L largest. Empty for a dataset that is not partitioned, or before any release named a
        partition.
        """
        _, budget, totals = self._read(dataset)
        return partition_reports(dataset, budget, totals)

    def history(
        self, dataset: str, *, limit: int | None = None, since: datetime | None = None
    ) -> list[ReleaseEntry]:
        """One entry per release of the dataset, oldest first: time, label, cost, group size and status.

        A release paid from a reservation (:meth:`Reservation.spend`) is an entry of its own, with status
        ``"paid"`` and ``paid_from`` set to the reservation's key; it charged the dataset nothing (its
        reservation did), so add up only the entries without ``paid_from`` for what the dataset was
        charged. A reservation shrunk to a sub-plan (:meth:`shrink`) shows what it holds now.

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
        ends = _ends(records)
        shrunk = {r.reservation: r for r in records if r.kind == "shrink"}  # the last shrink holds

        def entry(r: LedgerRecord) -> ReleaseEntry:
            if r.kind == "pay":
                return paid_entry(r)
            return release_entry(r, ends.get(r.seq), shrunk.get(r.seq))

        releases = read_all(dataset, [r for r in records if r.kind in ("reserve", "pay")], entry)
        if since is not None:
            releases = [e for e in releases if e.time >= since]
        if limit is not None:
            n = check_positive_int(limit, "limit")
            releases = releases[-n:]
        return releases

    def records(self, dataset: str) -> list[LedgerEntry]:
        """Every record of the dataset's hash chain in order: budget changes, reservations, commits and
        cancellations, with time, label, key, group size, cost and status."""
        records = self._records(dataset)
        ends = _ends(records)
        return read_all(dataset, records, lambda r: ledger_entry(r, ends))

    def _records(self, dataset: str) -> list[LedgerRecord]:
        dataset = _check_name(dataset, "dataset")
        records = list(self._store.records(dataset))
        if not records and self._store.head(dataset) is None:
            raise self._unknown(dataset)
        return records

    def open_reservations(self, dataset: str) -> list[LedgerEntry]:
        """Reservations of the dataset that were neither committed nor cancelled (e.g. a process died)."""
        dataset = _check_name(dataset, "dataset")
        if self._store.head(dataset) is None:
            raise UnknownDatasetError(dataset)
        return [ledger_entry(r, {}) for r in self._store.open_reservations(dataset)]

    # ------------------------------------------------------------------------------------- spending

    def spend(
        self,
        dataset: str,
        cost: Any,
        group_size: int = 1,
        label: str | None = None,
        key: str | None = None,
        *,
        partition: str | Sequence[str] | None = None,
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
        partition : str or list of str, optional
            On a partitioned dataset (``set_budget(..., relation="add_remove", partitions=L)``), the
            partition or partitions the
            release reads: it is charged to each of them. None: the whole dataset (it counts for every
            partition). InvalidParameterError on a dataset that is not partitioned.

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
        return self._reserve(
            dataset, [_to_event(cost)], group_size, label, key, False, None, commit=True, partition=partition
        )

    def reserve(
        self,
        dataset: str,
        cost: Any,
        *,
        key: str | None = None,
        group_size: int = 1,
        label: str | None = None,
        partition: str | Sequence[str] | None = None,
    ) -> Reservation:
        """Check and reserve one release; commit it later (or use the result as a context manager).

        The reservation counts as spent from now on. See :class:`Reservation` for the context-manager
        rule (it commits even when the block raises) and :meth:`spend` for the parameters and errors.

        The key follows :meth:`spend`'s contract: a second ``reserve`` (or ``spend``) with a key the
        dataset already holds raises :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges
        nothing, also while the first reservation is still open. Only the first call's
        :class:`Reservation` commits or releases it.
        """
        return self._reserve(
            dataset, [_to_event(cost)], group_size, label, key, False, None, commit=False, partition=partition
        )

    def spend_cost(self, dataset: str, cost: Any, group_size: int = 1) -> BudgetReport:
        """What :meth:`spend` would charge for one release now, in the budget's currency; nothing is charged.

        The release is priced exactly as :meth:`spend` prices it (a ``"composite"`` event as the sum of its
        parts' charges under the budget's rule), not as a plan.
        """
        events = [_to_event(cost)]
        k = check_positive_int(group_size, "group_size")
        _, budget, totals = self._read(dataset)
        price = pricing.price(budget, events, k, False, None, totals)
        return BudgetReport(
            dataset, "spend cost", price.cost, price.method, budget.guarantee, totals.open, budget.relation
        )

    def plan_cost(
        self,
        dataset: str,
        costs: Sequence[Any],
        group_size: int = 1,
        *,
        delta: float | None = None,
        against: Against = "remaining",
        partition: str | Sequence[str] | None = None,
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
        partition : str or list of str, optional
            The partitions the plan reads, on a partitioned dataset (see :meth:`spend`).
        """
        budget, totals, price, _ = self._price_plan(dataset, costs, group_size, delta, against, partition)
        return BudgetReport(
            dataset,
            "plan cost",
            price.cost,
            price.method,
            budget.guarantee,
            totals.open,
            budget.relation,
            budget.partitions,
        )

    def plan_fits(
        self,
        dataset: str,
        costs: Sequence[Any],
        group_size: int = 1,
        *,
        delta: float | None = None,
        against: Against = "remaining",
        partition: str | Sequence[str] | None = None,
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
        return self.plans_fit(dataset, [(costs, group_size, partition)], delta=delta, against=against)

    def plans_fit(
        self,
        dataset: str,
        plans: Sequence[tuple[Any, ...]],
        *,
        delta: float | None = None,
        against: Against = "remaining",
    ) -> bool:
        """Whether several plans on one dataset, each reading its own partitions, would all be accepted:
        as :meth:`spend_plan` of each, one after the other in the order given, would be now. Nothing is
        charged.

        For work charged to a dataset in several parts, e.g. an Airflow run whose tasks read two days of a
        per-day dataset (one reservation per partition, and one for the whole dataset): each part may fit
        on its own and not all together. Each plan is priced as :meth:`plan_cost` prices it, against the
        totals the plans before it leave, and checked by the budget's rule, as :meth:`plan_fits` checks one.

        Parameters
        ----------
        dataset : str
        plans : list of (costs, group_size, partition) or (costs, group_size, partition, delta)
            Each plan's releases (mechanisms, events or guarantees), its group size, the partitions it
            reads (a name, a list, or None for the whole dataset), and optionally the δ it is read at.
        delta : float, optional
            As for :meth:`plan_cost`: the δ of the plans that give none.
        against : {"remaining", "budget"}, default "remaining"
            After everything spent so far, or on the whole budget as if nothing had been spent.

        Raises
        ------
        InvalidParameterError
            ``plans`` is not a non-empty list of such tuples, or as :meth:`plan_fits`.
        UnsupportedCompositionError
            A plan cannot be charged to the budget at all.
        """
        budget, totals, parsed = self._plans(dataset, plans, delta, against)
        if budget.legacy:
            head, budget, totals = self._read(dataset)
            if self._unbounded(dataset, head, budget):
                return False
            totals = budget.rule.empty() if against == "budget" else totals
        for events, k, plan_delta, partitions in parsed:
            price = pricing.price(budget, events, k, True, plan_delta, budget.composed(totals))
            totals = budget.rule.add(totals, price.charge, partitions)
            if not budget.fits(totals):
                return False
        return True

    def _price_plan(
        self, dataset: str, costs: Sequence[Any], group_size: Any, delta: Any, against: Any, partition: Any
    ) -> tuple[DatasetBudget, Totals, pricing.Price, tuple[str, ...]]:
        budget, totals, parsed = self._plans(dataset, [(costs, group_size, partition)], delta, against)
        ((events, k, plan_delta, partitions),) = parsed
        price = pricing.price(budget, events, k, True, plan_delta, budget.composed(totals))
        return budget, totals, price, partitions

    def _plans(
        self, dataset: str, plans: Any, delta: Any, against: Any
    ) -> tuple[DatasetBudget, Totals, list[tuple[list[PrivacyEvent], int, float | None, tuple[str, ...]]]]:
        """The budget, the totals a plan check starts from (none with ``against="budget"``) and the checked
        plans as ``(events, group size, δ, partitions)``."""
        shape = "(costs, group_size, partition) or (costs, group_size, partition, delta)"
        if isinstance(plans, (str, bytes, Mapping)) or not isinstance(plans, Sequence) or not plans:
            raise InvalidParameterError(f"'plans' must be a non-empty list of {shape}", "plans")
        if not all(isinstance(plan, (tuple, list)) and len(plan) in (3, 4) for plan in plans):
            raise InvalidParameterError(f"each plan must be {shape}", "plans")
        checked = [
            (_to_events(plan[0]), check_positive_int(plan[1], "group_size"), _check_partitions(plan[2]))
            for plan in plans
        ]
        deltas = [self._check_plan_delta(plan[3] if len(plan) == 4 else delta) for plan in plans]
        parsed = [(*plan[:2], plan_delta, plan[2]) for plan, plan_delta in zip(checked, deltas, strict=True)]
        if against not in ("remaining", "budget"):
            raise InvalidParameterError(
                f"'against' must be 'remaining' or 'budget', got {printable(against)!r}", "against"
            )
        _, budget, totals = self._read(dataset)
        for *_, partitions in parsed:
            _check_partitioned(dataset, budget, partitions)
        if against == "budget":
            totals = budget.rule.empty()
        return budget, totals, parsed

    def spend_plan(
        self,
        dataset: str,
        costs: Sequence[Any],
        *,
        key: str | None = None,
        label: str | None = None,
        group_size: int = 1,
        delta: float | None = None,
        partition: str | Sequence[str] | None = None,
    ) -> Reservation:
        """Check and charge a whole plan at its tight total, as one record (see :meth:`plan_cost`).

        ``key`` pays for one plan, under :meth:`spend`'s contract: reusing it raises
        :class:`~dp_pipeline.exceptions.KeyAlreadyUsedError` and charges nothing. ``partition`` names the
        partitions the plan reads on a partitioned dataset (see :meth:`spend`).
        """
        events = _to_events(costs)
        plan_delta = self._check_plan_delta(delta)
        return self._reserve(
            dataset, events, group_size, label, key, True, plan_delta, commit=True, partition=partition
        )

    def cancel(self, dataset: str, key: str, reason: str, *, actor: str | None = None) -> Reservation:
        """Operator cancellation: return an open reservation (e.g. of a process that died) to the budget.

        Only for attempts that never read data. Recorded (as a ``release`` record) with ``reason`` and
        ``actor`` (default user@host). Cancelling a cancelled reservation again does nothing; a committed
        one cannot be cancelled (LedgerError).
        """
        dataset = _check_name(dataset, "dataset")
        key = _check_name(key, "key", _MAX_KEY)
        self._cancel(dataset, key, reason, actor, by="operator")
        found = self._store.reservation(dataset, key=key)
        assert found is not None
        return self._reservation(dataset, found)

    def release(self, dataset: str, key: str, reason: str, *, actor: str | None = None) -> Reservation:
        """Deprecated name of :meth:`cancel` (a "release" is a DP output)."""
        warn_renamed("PrivacyAccountant.release(dataset, key, reason)", "PrivacyAccountant.cancel")
        return self.cancel(dataset, key, reason, actor=actor)

    # ------------------------------------------------------------------------------------- reservations

    def reservation(self, dataset: str, key: str) -> Reservation:
        """The reservation with idempotency ``key`` on ``dataset``, to pay from or commit (e.g. in the
        process of a task that another process reserved for). Nothing is written.

        Raises
        ------
        UnknownDatasetError
            No budget for the dataset.
        LedgerError
            The dataset has no reservation with that key.
        """
        dataset = _check_name(dataset, "dataset")
        key = _check_name(key, "key", _MAX_KEY)
        found = self._store.reservation(dataset, key=key)
        if found is None:
            if self._store.head(dataset) is None:
                raise self._unknown(dataset)
            raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
        return self._reservation(dataset, found)

    def shrink(
        self, dataset: str, key: str, costs: Sequence[Any], *, reason: str, actor: str | None = None
    ) -> Reservation:
        """Replace a reservation's charge by the tight total of a sub-plan of what it declared.

        For work reserved as a whole (a run's plan) of which only part started: the share of the releases
        that never ran goes back to the budget, in one locked transaction recorded as a ``shrink`` record
        with ``reason`` and ``actor`` (default user@host).

        Parameters
        ----------
        dataset, key : str
            The reservation (open or committed).
        costs : list of mechanisms, events or guarantees
            The releases to keep: some of those the reservation declared (as many times at most), e.g. the
            tasks that started. Empty keeps none.
        reason : str
            Why (recorded).

        Returns
        -------
        Reservation
            The reservation with what it holds now. When the sub-plan would not cost less than what the
            reservation holds (all of its releases, or a sub-plan read at a δ that makes it no cheaper),
            nothing is written and the reservation is returned as it was.

        Raises
        ------
        InvalidParameterError
            A release that the reservation did not declare (or more copies than it did); a missing reason.
        BudgetExceededError
            What was already paid from the reservation does not fit the sub-plan's total; nothing changed.
        LedgerError
            No such reservation, it was cancelled, or it is one release (not a plan) that was committed
            (``spend``, or a ``reserve`` whose attempt committed: it may have read data; an open one can be
            shrunk to nothing, like :meth:`cancel`).

        Notes
        -----
        The sub-plan is priced as :meth:`spend_plan` prices a plan, with the reservation's group size and
        δ, against the budget's other spends. The cost may only go down, so the dataset's totals still fit.
        """
        dataset = _check_name(dataset, "dataset")
        key = _check_name(key, "key", _MAX_KEY)
        why = _check_name(reason, "reason", 2000) if isinstance(reason, str) and reason.strip() else None
        if why is None:
            raise InvalidParameterError("a shrink needs a non-empty 'reason' (it is recorded)", "reason")
        actor = _check_optional_text(actor, "actor", 255) or _default_actor()
        events = [] if _is_empty(costs) else _to_events(costs)

        def run(tx: LedgerTransaction) -> ReservationRecords:
            head, found, current, totals, held, paid = _open_reservation(tx, dataset, key)
            if not held.plan and found.status == "committed":
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} is one release, not a plan, "
                    "and is committed (its attempt may have read data): it cannot be shrunk. A shrink hands "
                    "back the share of a plan's (spend_plan) releases that never started"
                )
            rule = current.rule
            stated = [_stated(e, current.relation).to_dict() for e in events]
            if event_keys(stated) - event_keys(held.events):
                raise InvalidParameterError(
                    f"the releases to keep are not a sub-plan of the reservation {key!r} on dataset "
                    f"{dataset!r}: keep only releases it declared, each at most as often",
                    "costs",
                )
            if event_keys(stated) == event_keys(held.events):
                return found
            partitions = partitions_of(found.reserve.body, f"dataset {dataset!r}")
            rest = rule.remove(totals, held.charge, partitions)
            price = (
                pricing.price(current, events, held.group_size, True, held.delta, current.composed(rest))
                if events
                else pricing.zero(current)
            )
            if not rule.fits_within(price.charge, held.charge):
                return found  # not cheaper: keep what it holds
            kept = Holding(
                price.charge, price.cost, price.method, tuple(stated), held.plan, held.group_size, held.delta
            )
            if route(rule, kept, paid) is None:
                raise self._exceeded(dataset, key, current, held, paid, None, kept)
            after = rule.add(rest, price.charge, partitions)
            body = ShrinkBody(stated, price.cost, price.method, price.charge, why, actor, after, partitions)
            append(tx, body, with_totals(head.state, after), key=key, reservation=found.reserve.seq)
            return tx.reservation(key=key) or found

        return self._reservation(dataset, self._atomic(dataset, run))

    def _pay(
        self,
        dataset: str,
        key: str,
        cost: Any,
        group_size: Any,
        label: Any,
        partition: Any,
        *,
        claim: str | None = None,
        within: str | None = None,
    ) -> ReleaseEntry:
        """Pay one release from the reservation ``key`` (see :meth:`Reservation.spend`): as the claim of
        the share ``claim``, within the share ``within`` (see :mod:`~dp_pipeline.accounting.payments`), or
        from the reservation alone."""
        if claim is not None:
            claim = _check_name(claim, "share", _MAX_KEY)
        if within is not None:
            within = _check_name(within, "share", _MAX_KEY)
        event = _to_event(cost)
        k = check_positive_int(group_size, "group_size")
        label = _check_optional_text(label, "label", 2000)
        partitions = _check_partitions(partition)

        def run(tx: LedgerTransaction) -> LedgerRecord:
            head, found, current, totals, held, paid = _open_reservation(tx, dataset, key)
            if found.reserve.body.get("spend"):
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} is the charge of the release "
                    "that spend() made: it holds nothing to pay from. Pay from a budget reserved for the "
                    "work: acct.reserve(...) or acct.spend_plan(...)"
                )
            _check_partitioned(dataset, current, partitions)
            _refuse_unbounded(self._unbounded(dataset, head, current))
            _check_covered(
                dataset, key, partitions_of(found.reserve.body, f"dataset {dataset!r}"), partitions
            )
            rule = current.rule
            plan_delta = _plan_payment_delta(held)
            try:
                price = pricing.price(current, [event], k, False, None, totals)
                plan_delta = None
            except UnsupportedCompositionError as alone:
                if plan_delta is None:
                    raise
                # The rule prices this release only inside a plan (a μ-GDP release under basic
                # composition has no single (ε, δ)): priced as a plan of one release at the δ the
                # reservation's plan was read at, it can be paid as one of the releases the plan declared.
                try:
                    price = pricing.price(current, [event], k, True, plan_delta, current.composed(totals))
                except UnsupportedCompositionError:
                    raise alone from None
            stated = [_stated(event, current.relation).to_dict()]
            shares = read_shares(found, rule, f"dataset {dataset!r}")
            if claim is not None and claim in shares:
                raise KeyAlreadyUsedError(dataset, claim, "committed")
            if (claim is None and within is None and shares) or (claim is not None and _unshared(found)):
                raise LedgerError(
                    f"the reservation {key!r} on dataset {dataset!r} pays either its attempts' shares or "
                    "releases of its own, not both: pay within the attempt's share"
                )
            if within is None:
                limit, before = held, paid
            elif within in shares:
                limit, before = shares[within].held, shares[within].paid
            else:
                raise LedgerError(
                    f"no share {within!r} was claimed from the reservation {key!r} on dataset {dataset!r}: "
                    "an attempt pays within its share once it claimed it"
                )
            now = before.plus(price.charge, stated, k)
            way = route(rule, limit, now)
            if way is None:
                raise self._exceeded(dataset, key, current, limit, before, price.cost, limit)
            release = ReserveBody(
                label,
                k,
                plan_delta is not None,
                plan_delta,
                current.relation,
                stated,
                price.cost,
                price.method,
                price.charge,
                totals,
                partitions,
            )
            cap = None if within is None else limit.charge
            body = PayBody(release, now.total(rule), way, claim or within, cap)
            return append(tx, body, with_totals(head.state, totals), key=key, reservation=found.reserve.seq)

        return paid_entry(self._atomic(dataset, run))

    def _exceeded(
        self,
        dataset: str,
        key: str,
        budget: DatasetBudget,
        held: Holding,
        paid: Paid,
        requested: Guarantee | None,
        limit: Holding,
    ) -> BudgetExceededError:
        """The refusal of a payment (or of a shrink to ``limit``) from the reservation ``key``."""
        rule = budget.rule
        spent = _paid_cost(budget, held, paid)
        try:
            left: object = rule.left(limit.charge, paid.total(rule))[0]
        except NotImplementedError:
            left = "(not reported by this rule)"
        shown = spent if requested is None else requested
        detail = (
            f"Rule: {rule.describe()}; the releases paid from a reservation must fit what it holds"
            + (" (a plan's releases fit its tight total)" if held.plan else "")
            + "."
        )
        if requested is None:
            detail = (
                f"The releases already paid from it ({spent}) do not fit the sub-plan's total "
                f"({limit.cost}). Nothing was changed. " + detail
            )
        return BudgetExceededError(dataset, shown, spent, left, limit.cost, detail=detail, reservation=key)

    def _reservation_report(
        self, dataset: str, key: str, what: str, share: str | None = None
    ) -> BudgetReport:
        """What was paid from a reservation (``what="spent"``) or what is left of it (``"remaining"``); of
        one of its shares when ``share`` names it."""
        found = self._store.reservation(dataset, key=key)
        if found is None:
            raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
        _, budget, _ = self._read(dataset)
        where = f"dataset {dataset!r}"
        held, paid = read_reservation(found, budget.rule, where)
        if share is not None:
            claimed = read_shares(found, budget.rule, where).get(share)
            if claimed is None:
                raise LedgerError(f"no share {share!r} was claimed from the reservation {key!r} on {where}")
            held, paid, key = claimed.held, claimed.paid, f"{key}, share {share}"
        if what == "spent":
            amount = _paid_cost(budget, held, paid)
            method = budget.rule.method_of(paid.total(budget.rule))
        else:
            amount, method = budget.rule.left(held.charge, paid.total(budget.rule))
        return BudgetReport(
            dataset, f"{what} of reservation {key!r}", amount, method, held.cost, 0, budget.relation
        )

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

        A dataset declared partitioned under replace-one by an earlier version (whose partition charges
        were accepted under parallel composition, which does not hold under replace-one) verifies as its
        records were written, and is re-read soundly in the report's ``findings``: what it has spent with
        every partition total counting for every person, whether that exceeds its budget, and its
        row-level partition releases, whose loss is unbounded (see
        :class:`~dp_pipeline.accounting.records.DatasetBudget`).

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
            if dataset not in names and (anchor is None or dataset not in read_anchor(anchor)):
                raise UnknownDatasetError(dataset)
            names = [dataset]
        signer = getattr(self._store, "signer", None)
        count = signed = 0
        tips: dict[str, list[LedgerRecord]] = {}
        findings: list[str] = []
        for name in names:
            records = self._store.records(name)
            head = self._store.head(name)
            problem = check_chain(name, records, head, signer) or check_semantics(name, records, head)
            if problem:
                raise LedgerError(f"ledger verification failed: {problem}")
            count += len(records)
            signed += 0 if signer is None else sum(record.sig is not None for record in records)
            tips[name] = records
            finding = legacy_partitions_finding(name, records, head)
            if finding:
                findings.append(finding)
        if anchor is not None:
            problem = check_anchor(read_anchor(anchor), tips, signer, only=dataset)
            if problem:
                raise LedgerError(f"ledger verification against the anchor failed: {problem}")
        return VerifyReport(
            tuple(names), count, signer is not None, anchor is not None, tuple(findings), signed
        )

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
        checkpoint: dict[str, Any] = {"format": ANCHOR_FORMAT, "time": utc_now(), "datasets": heads}
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
        """``store.atomic`` after checking the records appended since this process last checked (see
        :mod:`~dp_pipeline.accounting.incremental`); an UnknownDatasetError raised inside names the ledger
        (read after the lock)."""
        try:
            return self._verifier.atomic(dataset, fn)
        except UnknownDatasetError as err:
            if err.ledger is not None:
                raise
            raise self._unknown(dataset) from None

    def _unknown(self, dataset: str) -> UnknownDatasetError:
        empty = not any(self._store.head(name) is not None for name in self._store.datasets())
        return UnknownDatasetError(dataset, redact_url(self.url), empty)

    def _read(self, dataset: str) -> tuple[DatasetHead, DatasetBudget, Totals]:
        dataset = _check_name(dataset, "dataset")
        head = self._store.head(dataset)
        if head is None:
            raise self._unknown(dataset)
        where = f"dataset {dataset!r}"
        budget = budget_of(head.state, where)
        return head, budget, budget.rule.read_totals(head.state.totals, where)

    def _unbounded(self, dataset: str, head: DatasetHead, budget: DatasetBudget) -> str | None:
        """:func:`~dp_pipeline.accounting.verify.unbounded_reading` of the dataset at ``head``: None at once
        unless ``budget`` is :attr:`~dp_pipeline.accounting.records.DatasetBudget.legacy`; otherwise its
        records are read once per chain head (under a write's lock they end at ``head``)."""
        if not budget.legacy:
            return None
        tip = (head.seq, head.hash)
        cached = self._readings.get(dataset)
        if cached is not None and cached[0] == tip:
            return cached[1]
        records = self._store.records(dataset)
        reading = unbounded_reading(dataset, records)
        self._readings[dataset] = ((records[-1].seq, records[-1].hash), reading)
        return reading

    def _reservation(self, dataset: str, found: ReservationRecords) -> Reservation:
        body = found.reserve.body
        shrunk = [r for r in found.after if r.kind == "shrink"]
        now = shrunk[-1].body if shrunk else body  # what the reservation holds: its last shrink's
        assert found.reserve.key is not None
        return Reservation(
            self,
            dataset,
            found.reserve.key,
            found.reserve.seq,
            guarantee_from_dict(dict(now["cost"])),
            str(now.get("composition")),
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
        partition: Any = None,
    ) -> Reservation:
        dataset = _check_name(dataset, "dataset")
        partitions = _check_partitions(partition)
        k = check_positive_int(group_size, "group_size")
        label = _check_optional_text(label, "label", 2000)
        given_key = _check_optional_text(key, "key", _MAX_KEY)
        key = given_key or f"auto-{uuid.uuid4().hex}"
        event_dicts = [e.to_dict() for e in events]
        # Price outside the lock, so that the lock is held only for the check and the writes: a plan
        # (its PLD can take a while) from a fresh read, one release from the budget last seen. Inside,
        # the price is recomputed only if the budget, or what of the totals a plan was priced from, changed.
        price: pricing.Price | None = None
        if plan:
            _, budget, totals = self._read(dataset)
            if given_key is None or self._store.reservation(dataset, key=given_key) is None:
                price = pricing.price(
                    budget, events, k, plan, plan_delta, budget.composed(totals)
                )  # a used key is refused unpriced
        elif dataset in self._budgets:
            price = pricing.price_one(self._budgets[dataset], canonical_json(event_dicts[0]), k)
        where = f"dataset {dataset!r}"

        def run(tx: LedgerTransaction) -> ReservationRecords:
            head = tx.head
            if head is None:
                raise UnknownDatasetError(dataset)  # named in full by _atomic
            current = budget_of(head.state, where)
            relation = current.relation
            # every recorded event states its relation: one that states none was charged under the dataset's
            stated = [(e if e.relation is not None else e.under(relation)).to_dict() for e in events]
            # a random key cannot exist yet: look up only keys the caller chose
            found = None if given_key is None else tx.reservation(key=key)
            if found is not None:  # a key pays for one release: every later call is refused
                request = request_of(stated, k, plan, plan_delta, partitions)
                _check_same_request(dataset, key, found, request)
                raise KeyAlreadyUsedError(dataset, key, found.status)
            _check_partitioned(dataset, current, partitions)
            _refuse_unbounded(self._unbounded(dataset, head, current))
            rule = current.rule
            totals = rule.read_totals(head.state.totals, where)
            composed = current.composed(totals)
            p = price
            if (
                p is None
                or p.budget != current
                or (p.basis is not None and p.basis != rule.plan_basis(composed))
            ):
                p = pricing.price(current, events, k, plan, plan_delta, composed)
            after = rule.add(totals, p.charge, partitions)
            if not current.fits(after):
                spent = budget_report(dataset, "spent", current, totals)
                remaining = budget_report(dataset, "remaining", current, totals)
                single = None
                if k > 1:
                    single = pricing.price(current, events, 1, plan, plan_delta, composed).cost
                raise BudgetExceededError(
                    dataset,
                    p.cost,
                    spent.guarantee,
                    remaining.guarantee,
                    current.guarantee,
                    detail=_on_partitions(dataset, current, totals, partitions)
                    + pricing.refusal_detail(current, p),
                    group_size=k,
                    single=single,
                )
            body = ReserveBody(
                label,
                k,
                plan,
                plan_delta,
                relation,
                stated,
                p.cost,
                p.method,
                p.charge,
                after,
                partitions,
                spend=commit and not plan,  # spend(): the charge of its own release
            )
            record = append(tx, body, with_totals(head.state, after), key=key)
            end = append_commit(tx, head.state, after, key, record.seq) if commit else None
            return ReservationRecords(record, end)

        found = self._atomic(dataset, run)
        if dataset not in self._budgets:
            head = self._store.head(dataset)
            if head is not None:
                self._budgets[dataset] = budget_of(head.state, where)
        return self._reservation(dataset, found)

    def _commit(self, dataset: str, key: str) -> str:
        where = f"dataset {dataset!r}"

        def run(tx: LedgerTransaction) -> str:
            head = tx.head
            found = tx.reservation(key=key)
            if head is None or found is None:
                raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
            if found.status == "released":
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} was cancelled (released) and "
                    "cannot be committed; if data was read, spend again with a new key"
                )
            if found.status == "open":
                totals = budget_of(head.state, where).rule.read_totals(head.state.totals, where)
                append_commit(tx, head.state, totals, key, found.reserve.seq)
            return "committed"

        return self._atomic(dataset, run)

    def _cancel(self, dataset: str, key: str, reason: Any, actor: Any, *, by: str) -> str:
        reason = _check_name(reason, "reason", 2000) if isinstance(reason, str) and reason.strip() else None
        if reason is None:
            raise InvalidParameterError(
                "a cancellation needs a non-empty 'reason' (it is recorded)", "reason"
            )
        actor = _check_optional_text(actor, "actor", 255) or _default_actor()

        def run(tx: LedgerTransaction) -> str:
            head, found = _find_reservation(tx, dataset, key)
            if found.status == "committed":
                raise LedgerError(
                    f"the reservation with key {key!r} on dataset {dataset!r} is committed (its attempt may "
                    "have read data) and cannot be cancelled"
                )
            if found.status == "open":
                rule = budget_of(head.state, f"dataset {dataset!r}").rule
                where = f"dataset {dataset!r}, record seq={found.reserve.seq}"
                held, paid = read_reservation(found, rule, where)
                if paid.charges:
                    raise LedgerError(
                        f"the reservation with key {key!r} on dataset {dataset!r} paid for "
                        f"{len(paid.charges)} release(s) and cannot be cancelled (their data was read); "
                        "commit it"
                    )
                partitions = partitions_of(found.reserve.body, where)
                read = rule.read_totals(head.state.totals, f"dataset {dataset!r}")
                totals = rule.remove(read, held.charge, partitions)
                body = CancelBody(reason, actor, by, totals, partitions)
                append(tx, body, with_totals(head.state, totals), key=key, reservation=found.reserve.seq)
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


def _changed_totals(dataset: str, previous: DatasetBudget, new: DatasetBudget, totals: Totals) -> Totals:
    """The totals a changed budget starts from, or InvalidParameterError (nothing changed) when the change
    is not allowed: a relation or rule changed while spends are active, or a budget below what is spent."""
    if previous.relation != new.relation and totals.active:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) charged under the relation"
            f" {previous.relation!r}; it cannot change to {new.relation!r} (the spends were"
            " priced for the other relation). Nothing was changed.",
            "relation",
        )
    if type(previous.rule) is not type(new.rule) and totals.active:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) under "
            f"{previous.rule.describe()}; its currency or composition rule cannot change to "
            f"{new.rule.describe()} (switching rules after results are known is not a valid "
            "composition). Nothing was changed.",
            "budget",
        )
    if totals.active and previous.partitions is not None and (new.partitions or 0) < previous.partitions:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) composed over at most "
            f"{previous.partitions} partition(s) per person; that cannot fall to {new.partitions} (it would "
            "count what was spent for fewer partitions than were declared). Nothing was changed.",
            "partitions",
        )
    carried = new.rule.carry(totals)
    if not new.fits(carried):
        spent = budget_report(dataset, "spent", previous, totals)
        raise InvalidParameterError(
            f"the new budget {new.guarantee!r} of dataset {dataset!r} is below what is already "
            f"spent ({spent.guarantee!r}, {spent.method}). Nothing was changed.",
            "budget",
        )
    return carried


def _rule_choice(rule: Any, method: Any) -> tuple[Any, str]:
    """The rule name asked for and the parameter it came by (``method`` is ``rule``'s deprecated name)."""
    if method is None:
        return ("auto" if rule is None else rule), "rule"
    if rule is not None:
        raise InvalidParameterError("give 'rule' only ('method' is its deprecated name)", "method")
    warn_renamed("set_budget(..., method=...)", "set_budget(..., rule=...)", stacklevel=4)
    return method, "method"


def _on_partitions(dataset: str, budget: DatasetBudget, totals: Totals, partitions: tuple[str, ...]) -> str:
    """What a refusal says first about the partitions a request named (nothing for none)."""
    if not partitions:
        return ""
    reports = partition_reports(dataset, budget, totals)
    spent = ", ".join(
        f"{name!r} (spent {reports[name].guarantee})" if name in reports else f"{name!r} (new: nothing spent)"
        for name in partitions
    )
    return (
        f"The request reads partition(s) {spent}; the dataset's spent amount composes its whole-dataset "
        f"releases and its {budget.partitions} largest partition total(s). "
    )


def _check_covered(dataset: str, key: str, reserved: tuple[str, ...], named: tuple[str, ...]) -> None:
    """InvalidParameterError unless a payment that names ``named`` reads only what a reservation on the
    partitions ``reserved`` counted: any data for a reservation of the whole dataset, else some of its
    partitions (a payment naming none would read the whole dataset)."""
    if reserved and not named:
        raise InvalidParameterError(
            f"the reservation {key!r} on dataset {dataset!r} was charged to the partitions {list(reserved)}; "
            f"a release that names no partition reads every partition of {dataset!r}, which it did not "
            f"count: name the partition the release reads (partition=..., or the name "
            f"'{dataset}/<partition>')",
            "partition",
        )
    if reserved and not set(named) <= set(reserved):
        raise InvalidParameterError(
            f"the reservation {key!r} on dataset {dataset!r} was charged to the partitions {list(reserved)}; "
            "a release paid from it must name the partitions it reads, among those",
            "partition",
        )


def _is_empty(costs: Any) -> bool:
    return isinstance(costs, (list, tuple)) and not costs


def _refuse_unbounded(reading: str | None) -> None:
    """InvalidParameterError when the dataset's loss is unbounded (``reading`` says why)."""
    if reading is not None:
        raise InvalidParameterError(f"{reading} Nothing was charged.", "dataset")


def _stated(event: PrivacyEvent, relation: Relation) -> PrivacyEvent:
    """The event as recorded: one that states no relation is charged under the dataset's."""
    return event if event.relation is not None else event.under(relation)


def _find_reservation(
    tx: LedgerTransaction, dataset: str, key: str
) -> tuple[DatasetHead, ReservationRecords]:
    """The head and the reservation ``key`` inside a transaction; LedgerError if there is none."""
    head = tx.head
    if head is None:
        raise UnknownDatasetError(dataset)  # named in full by _atomic
    found = tx.reservation(key=key)
    if found is None:
        raise LedgerError(f"no reservation with key {key!r} on dataset {dataset!r}")
    return head, found


def _open_reservation(
    tx: LedgerTransaction, dataset: str, key: str
) -> tuple[DatasetHead, ReservationRecords, DatasetBudget, Totals, Holding, Paid]:
    """Inside a transaction: the head, the reservation ``key``, the dataset's budget and totals, and what
    the reservation holds and paid; LedgerError if there is no such reservation or it was cancelled (it holds
    nothing)."""
    head, found = _find_reservation(tx, dataset, key)
    if found.status == "released":
        raise LedgerError(
            f"the reservation with key {key!r} on dataset {dataset!r} was cancelled: it holds nothing to pay "
            "from or shrink"
        )
    where = f"dataset {dataset!r}"
    budget = budget_of(head.state, where)
    totals = budget.rule.read_totals(head.state.totals, where)
    held, paid = read_reservation(found, budget.rule, where)
    return head, found, budget, totals, held, paid


def _unshared(found: ReservationRecords) -> bool:
    """Whether a reservation paid for a release outside any share."""
    return any(r.kind == "pay" and r.body.get("share") is None for r in found.after)


def _plan_payment_delta(held: Holding) -> float | None:
    """The δ at which a release paid from a plan reservation is priced when its rule cannot price it on its
    own: the δ the plan was read at (asked for, or that of its (ε, δ) cost); None for a reservation that
    is not a plan, or whose cost has no δ."""
    if not held.plan:
        return None
    if held.delta is not None:
        return held.delta
    return held.cost.delta if isinstance(held.cost, ApproxDP) else None


def _paid_cost(budget: DatasetBudget, held: Holding, paid: Paid) -> Guarantee:
    """What the releases paid from a reservation cost: their sum under the rule, or, when only the plan
    route holds them, their tight total as a sub-plan."""
    rule = budget.rule
    total = paid.total(rule)
    if rule.fits_within(total, held.charge) or not paid.events:
        return rule.charge_cost(total)
    events = [PrivacyEvent.from_dict(dict(e)) for e in paid.events]
    return pricing.price(budget, events, held.group_size, True, held.delta, rule.empty()).cost


def _ends(records: Sequence[LedgerRecord]) -> dict[int, LedgerRecord]:
    """The record that ended each reservation, by the reservation's seq."""
    return {r.reservation: r for r in records if r.reservation is not None and r.kind in END_KINDS}


def _check_same_request(dataset: str, key: str, found: ReservationRecords, request: str) -> None:
    body = found.reserve.body
    recorded = (body.get("events"), body.get("group_size"), body.get("plan"), body.get("delta"))
    if request_of(*recorded, body.get("partitions", ())) != request:
        raise InvalidParameterError(
            f"the key {key!r} already reserved a different cost on dataset {dataset!r} "
            f"({body.get('cost')}, group size {body.get('group_size')}); use a new key for a different "
            "release",
            "key",
        )
