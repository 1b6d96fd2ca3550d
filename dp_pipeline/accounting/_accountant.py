"""PrivacyAccountant: per-dataset privacy budgets over a persistent, hash-chained ledger.

The accountant is a transactional shell. It turns each call into a
:class:`~dp_pipeline.accounting.Request` (input checks in :mod:`~dp_pipeline.accounting._checks`),
runs the write in one locked transaction (:mod:`~dp_pipeline.accounting._transactions`) where the
dataset's :class:`~dp_pipeline.accounting.BudgetPolicy` prices and admits it (a refusal writes
nothing), and every record written is applied by the ledger's one reducer
(:func:`~dp_pipeline.accounting._policy.apply`) before it commits; ``verify()`` folds the same reducer
(:mod:`~dp_pipeline.accounting._verify`). What is written is in :mod:`~dp_pipeline.accounting._records`,
what is shown in :mod:`~dp_pipeline.accounting._reports`. A
:class:`~dp_pipeline.accounting.ledger.LedgerStore` keeps the records and provides the lock.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting import _pricing as pricing
from dp_pipeline.accounting._checks import (
    check_budget,
    check_name,
    check_optional_text,
    check_partitioned,
    check_relation,
    default_actor,
)
from dp_pipeline.accounting._incremental import IncrementalVerifier
from dp_pipeline.accounting._policy import BudgetPolicy
from dp_pipeline.accounting._records import DatasetBudget, budget_of
from dp_pipeline.accounting._reports import (
    BudgetReport,
    LedgerEntry,
    Quote,
    ReleaseEntry,
    VerifyReport,
    budget_report,
    history,
    partition_report,
    quote_report,
    read_chain,
    read_head,
    unknown_dataset,
)
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting._reservation import Reservation
from dp_pipeline.accounting._reservations import ReservationMembers
from dp_pipeline.accounting._spender import DatasetHandle
from dp_pipeline.accounting._transactions import Dataset
from dp_pipeline.accounting._verify import Readings, verify_ledger
from dp_pipeline.accounting.ledger import LedgerStore, MemoryLedger, open_ledger
from dp_pipeline.accounting.ledger._base import (
    DatasetHead,
    LedgerTransaction,
    canonical_json,
)
from dp_pipeline.accounting.rules import Totals, user_rule
from dp_pipeline.exceptions import InvalidParameterError, UnknownDatasetError, printable
from dp_pipeline.guarantees import ApproxDP, GaussianDP, PureDP

__all__ = [
    "BudgetReport",
    "LedgerEntry",
    "PrivacyAccountant",
    "Quote",
    "ReleaseEntry",
    "Reservation",
    "UnknownDatasetError",
    "VerifyReport",
]

Against = Literal["remaining", "budget"]

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------------
# the accountant


class PrivacyAccountant(ReservationMembers):
    """Per-dataset privacy budgets over a persistent ledger: check, reserve, commit, refuse.

    Parameters
    ----------
    ledger : str or LedgerStore
        Where the ledger lives. A SQLAlchemy URL: ``"sqlite:///ledger.db"`` (an SQLite file, the embedded
        choice) or ``"postgresql+psycopg://user:pw@host/db"`` (many workers); ``"memory://"`` for an
        in-memory ledger (notebooks, tests); or a store object such as
        :class:`~dp_pipeline.accounting.ledger.MemoryLedger`. There is no default: a ledger silently
        created in the working directory would give every directory its own budget.
    create : bool or None, default None
        ``None``: create a ledger (the SQLite file, or the schema in an empty database) only at a URL where
        none was ever created by this user on this machine (the first run); a ledger that existed and is
        gone, or an empty (0-byte) file, raises LedgerError naming it, so a day-2 job cannot start over on a
        fresh, full budget (see :mod:`~dp_pipeline.accounting.ledger._known` for what this can and cannot
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
    adaptively under add/remove only: see :class:`~dp_pipeline.accounting._records.DatasetBudget`).
    ``spent(dataset, partition=...)`` and ``remaining(dataset, partition=...)`` report one partition.

    **Neighbouring relation.** Each dataset also declares which datasets are neighbours (``relation=`` of
    :meth:`set_budget`): one person's rows replaced by another's (``"replace_one"``, the default) or added or
    removed (``"add_remove"``). Every spend is read under it before group sizes and composition
    (:func:`~dp_pipeline.accounting._relations.to_relation`): an event that states no relation costs what it
    says; an add/remove event on a replace-one dataset is re-priced for a removal plus an addition (exactly
    from its noise when it gives its replace-one sensitivity, by group privacy of size 2 otherwise); a
    replace-one event on an add/remove dataset is refused. The recorded events state the relation they were
    charged under. A ``"composite"`` event (a release of several columns) is charged as the sum of its parts'
    charges under the budget's rule, and plans compose its parts.

    **Plans** (:meth:`plan_cost`, :meth:`quote`, :meth:`spend_plan`) are releases declared before any of
    them runs, charged as one record at the total the budget's rule gives them: under basic composition
    their tight total from :func:`~dp_pipeline.accounting.compose_plan` (read at the δ you give,
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
        self._readings = Readings()  # per legacy dataset, its unbounded reading at the chain tip read
        self._store: LedgerStore = open_ledger(ledger, create, read_only, key, timeout)
        self._verifier = IncrementalVerifier(self._store)

    @property
    def store(self) -> LedgerStore:
        """The ledger store (its ``url``; what the audit views of :mod:`~dp_pipeline.accounting._reports`
        read: :func:`~dp_pipeline.accounting.ledger_entries`,
        :func:`~dp_pipeline.accounting.open_reservations`,
        :func:`~dp_pipeline.accounting.partition_spending`)."""
        return self._store

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
            budgets, ``"gdp_filter"`` for GaussianDP.
        relation : {"replace_one", "add_remove"}, optional
            Which datasets are neighbours: one person's rows replaced by another's (``"replace_one"``, the
            default for a new dataset) or one person's rows added or removed (``"add_remove"``). Every spend
            is read under it (see :func:`~dp_pipeline.accounting._relations.to_relation`): row-level releases
            are private only under replace-one and are refused on an add/remove dataset. None keeps the
            relation of an existing dataset. It cannot change once spends are recorded.
        reason, actor : str, optional
            Recorded with the change (actor defaults to user@host).
        partitions : int, optional
            Declare the dataset partitioned by a public attribute (a region, a cohort, the day of a per-day
            dataset), with L = ``partitions`` the most partitions one person's data lie in. Requires
            ``relation="add_remove"`` (parallel composition does not hold under replace-one). Releases then
            name the partitions they read (``spend(..., partition=...)``), each partition keeps its own
            total, and a release is accepted while every person's loss, the releases that named no
            partition plus those of the partitions holding the person's data, fits (exactly for L = 1,
            through the L largest partition totals for L ≥ 2); the dataset's spent amount composes the L
            largest partition totals (parallel composition; the validity argument is in
            :class:`~dp_pipeline.accounting._records.DatasetBudget`). None keeps the declaration of an
            existing dataset (a new one is not partitioned). While spends are recorded L may grow, not
            shrink.

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
        dataset = check_name(dataset, "dataset")
        guarantee = check_budget(budget)
        reason = check_optional_text(reason, "reason", 2000)
        actor = check_optional_text(actor, "actor", 255)
        asked = check_relation(relation)
        declared = None if partitions is None else check_positive_int(partitions, "partitions")
        chosen = user_rule("auto" if rule is None else rule, guarantee).create(guarantee)
        at, who = self._dataset(dataset), actor or default_actor()
        self._atomic(dataset, lambda tx: at.set_budget(tx, chosen, asked, declared, reason, who))

    def budget(self, dataset: str) -> BudgetReport:
        """The dataset's budget, its rule (``method``: the rule's stored name), its neighbouring relation
        (``relation``: ``"replace_one"`` or ``"add_remove"``) and, for a partitioned dataset, L
        (``partitions``)."""
        _, budget, totals = self._read(dataset)
        return budget_report(dataset, "budget", budget, totals)

    def datasets(self) -> list[str]:
        """The datasets with a budget in this ledger, sorted."""
        return [name for name in self._store.datasets() if self._store.head(name) is not None]

    # ------------------------------------------------------------------------------------- reports

    def spent(self, dataset: str, *, partition: str | None = None) -> BudgetReport:
        """What the dataset has spent (open reservations included), rounded up, with the method.

        With ``partition`` (a partitioned dataset): the loss of a person whose data lie in that partition
        alone, its releases and those that named no partition
        (:func:`~dp_pipeline.accounting._reports.partition_report`); the dataset's amount composes the L
        largest. Every partition's at once: :func:`~dp_pipeline.accounting.partition_spending`.

        A dataset declared partitioned under replace-one by an earlier version whose records hold a
        row-level release on a partition has an unbounded loss: the report says so (``unbounded``, ε or μ
        ``inf``; see :func:`~dp_pipeline.accounting._verify.unbounded_reading`).
        """
        return self._report(dataset, "spent", partition)

    def remaining(self, dataset: str, *, partition: str | None = None) -> BudgetReport:
        """What is left of the dataset's budget, rounded down, with the method (nothing, and why, for a
        dataset whose loss is unbounded: see :meth:`spent`). With ``partition``: what a release on that
        partition may still spend (exactly for L = 1, the dataset's remaining amount, a lower bound, for
        L ≥ 2; see :func:`~dp_pipeline.accounting._reports.partition_report`)."""
        return self._report(dataset, "remaining", partition)

    def _report(self, dataset: str, what: str, partition: str | None) -> BudgetReport:
        head, budget, totals = self._read(dataset)
        if partition is None:
            return budget_report(dataset, what, budget, totals, self._unbounded(dataset, head, budget))
        name = check_name(partition, "partition")
        check_partitioned(dataset, budget, (name,))
        return partition_report(dataset, what, budget, totals, name)

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

        Budget changes and the commit/release records are in
        :func:`~dp_pipeline.accounting.ledger_entries` (the raw hash chain).
        """
        return history(dataset, read_chain(self._store, dataset), since=since, limit=limit)

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
        request = Request.one(cost, group_size, partition=partition, key=key, label=label)
        return self._reserve(dataset, request, commit=True)

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
        request = Request.one(cost, group_size, partition=partition, key=key, label=label)
        return self._reserve(dataset, request, commit=False)

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
        request = Request.plan(costs, group_size, delta=delta, partition=partition)
        quoted = self._quote(dataset, [request], against, check_unbounded=False)
        return quoted.costs[0]

    def quote(
        self, dataset: str, requests: Request | Sequence[Any], *, against: Against = "remaining"
    ) -> Quote:
        """Whether requests on one dataset would all be accepted, each as :meth:`spend` (one release) or
        :meth:`spend_plan` (a plan) of it, one after the other in the order given, would be now; and what
        each costs. Nothing is charged.

        This is the one check before a charge: the ``dp-pipeline plan check`` command, the Airflow DAG
        check, the DAG policy and :func:`~dp_pipeline.allocate` all ask it. Another process may spend in
        between, so requests that fit now can still be refused later.

        Parameters
        ----------
        dataset : str
        requests : Request or list of Request or of (costs, group_size, partition[, delta])
            What is asked: :meth:`Request.one(cost, group_size, partition=...)
            <dp_pipeline.accounting._request.Request.one>` for one release,
            ``Request.plan(costs, group_size, delta=..., partition=...)`` for a plan, or several, e.g. the
            parts of an Airflow run that reads two days of a per-day dataset (one reservation per partition,
            and one for the whole dataset): each part may fit on its own and not all together. A tuple is a
            plan.
        against : {"remaining", "budget"}, default "remaining"
            After everything spent so far (open reservations included), or on the whole budget as if nothing
            had been spent (whether the requests could ever be accepted).

        Returns
        -------
        Quote
            ``fits`` and each request's cost (see :class:`Quote`); ``bool(quote)`` is ``fits``.

        Raises
        ------
        InvalidParameterError
            A malformed request; a partition named on a dataset that is not partitioned.
        UnsupportedCompositionError
            A request cannot be charged to the budget at all (e.g. (ε, δ > 0) releases on a μ-GDP budget).

        Notes
        -----
        Each request is priced by the dataset's :class:`~dp_pipeline.accounting.BudgetPolicy`
        against the totals the requests before it leave, and admitted by the budget's rule, exactly as the
        charge would be: the same code decides both.
        """
        if isinstance(requests, Request):
            requests = [requests]
        return self._quote(dataset, Request.plans(requests), against, check_unbounded=True)

    def _quote(self, dataset: str, requests: list[Request], against: Any, *, check_unbounded: bool) -> Quote:
        if against not in ("remaining", "budget"):
            raise InvalidParameterError(
                f"'against' must be 'remaining' or 'budget', got {printable(against)!r}", "against"
            )
        head, budget, totals = self._read(dataset)
        for request in requests:
            check_partitioned(dataset, budget, request.partitions)
        if check_unbounded and self._unbounded(dataset, head, budget):
            return Quote(False, ())
        start = budget.rule.empty() if against == "budget" else totals
        prices, fits = BudgetPolicy(budget).quote(requests, start)
        return Quote(
            fits,
            tuple(quote_report(dataset, budget, start, r, p) for r, p in zip(requests, prices, strict=False)),
        )

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
        request = Request.plan(costs, group_size, delta=delta, partition=partition, key=key, label=label)
        return self._reserve(dataset, request, commit=True)

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
        :class:`~dp_pipeline.accounting._records.DatasetBudget`).

        Parameters
        ----------
        dataset : str, optional
            Check only this dataset (UnknownDatasetError if the ledger has no such dataset).
        anchor : mapping or path, optional
            A checkpoint from :func:`~dp_pipeline.accounting.anchor` (the mapping, or the path of its
            JSON file). Every dataset it
            names must still exist and extend the chain it recorded: a rollback, a truncation, a rewritten
            chain, a re-created dataset or an older copy of the ledger fails.

        Raises
        ------
        LedgerError
            Naming the first problem.
        """
        if dataset is not None:
            dataset = check_name(dataset, "dataset")
        return verify_ledger(self._store, dataset, anchor)

    def _dataset(self, dataset: str) -> Dataset:
        return Dataset(dataset, lambda head, budget: self._unbounded(dataset, head, budget))

    def _atomic(self, dataset: str, fn: Callable[[LedgerTransaction], T]) -> T:
        """``store.atomic`` after checking the records appended since this process last checked (see
        :mod:`~dp_pipeline.accounting._incremental`); an UnknownDatasetError raised inside names the ledger
        (read after the lock)."""
        try:
            return self._verifier.atomic(dataset, fn)
        except UnknownDatasetError as err:
            if err.ledger is not None:
                raise
            raise self._unknown(dataset) from None

    def _unknown(self, dataset: str) -> UnknownDatasetError:
        return unknown_dataset(self._store, dataset)

    def _read(self, dataset: str) -> tuple[DatasetHead, DatasetBudget, Totals]:
        return read_head(self._store, dataset)

    def _unbounded(self, dataset: str, head: DatasetHead, budget: DatasetBudget) -> str | None:
        """Why the dataset's loss is unbounded at ``head`` (see :class:`~dp_pipeline.accounting._verify.
        Readings`), or None."""
        return self._readings.at(self._store, dataset, head, budget)

    def _reserve(self, dataset: str, request: Request, *, commit: bool) -> Reservation:
        """Check and reserve ``request`` in one transaction (and commit it with ``commit``)."""
        dataset = check_name(dataset, "dataset")
        key = request.key or f"auto-{uuid.uuid4().hex}"
        # Price outside the lock, so that the lock is held only for the check and the writes: a plan
        # (its PLD can take a while) from a fresh read, one release from the budget last seen. Inside,
        # the price is recomputed only if the budget, or what of the totals a plan was priced from, changed.
        priced: pricing.Price | None = None
        if request.is_plan:
            _, budget, totals = self._read(dataset)
            if request.key is None or self._store.reservation(dataset, key=request.key) is None:
                priced = BudgetPolicy(budget).price(request, totals)  # a used key is refused unpriced
        elif dataset in self._budgets:
            event = canonical_json(request.events[0].to_dict())
            priced = pricing.price_one(self._budgets[dataset], event, request.group_size)
        at = self._dataset(dataset)
        found = self._atomic(dataset, lambda tx: at.reserve(tx, request, key, commit, priced))
        if dataset not in self._budgets:
            head = self._store.head(dataset)
            if head is not None:
                self._budgets[dataset] = budget_of(head.state, at.where)
        return self._reservation(dataset, found)

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

    def dataset(self, name: str) -> DatasetHandle:
        """The dataset ``name`` of this ledger as a spender: ``visits = acct.dataset("visits")``, then
        ``df.pipe(dp_count, epsilon=0.5, accountant=visits)`` (see
        :class:`~dp_pipeline.accounting.DatasetHandle`). Nothing is read or written."""
        return DatasetHandle(self, check_name(name, "dataset"))
