"""The reservation members of :class:`~dp_pipeline.accounting.PrivacyAccountant`: reopen a
reservation by key, shrink it to a sub-plan, cancel it, and what :class:`~dp_pipeline.accounting._reservation.
Reservation` asks of the accountant (pay from it, report on it, commit, cancel).

Each write runs in one locked transaction of :mod:`~dp_pipeline.accounting._transactions`, where the
dataset's :class:`~dp_pipeline.accounting.BudgetPolicy` decides it, and every record it appends is
applied by the ledger's reducer before it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from dp_pipeline.accounting._checks import (
    MAX_KEY,
    check_name,
    check_optional_text,
    check_reason,
    default_actor,
    to_events,
)
from dp_pipeline.accounting._payments import read_reservation, read_shares
from dp_pipeline.accounting._records import DatasetBudget
from dp_pipeline.accounting._reports import BudgetReport, ReleaseEntry, paid_entry
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting._reservation import Reservation
from dp_pipeline.accounting._transactions import Dataset, paid_cost
from dp_pipeline.accounting.ledger import DatasetHead, LedgerStore, LedgerTransaction, ReservationRecords
from dp_pipeline.accounting.rules import Totals
from dp_pipeline.exceptions import LedgerError, UnknownDatasetError
from dp_pipeline.guarantees import guarantee_from_dict

__all__ = ["ReservationMembers"]

T = TypeVar("T")


class ReservationMembers:
    """The accountant's members that act on one reservation (a part of
    :class:`~dp_pipeline.accounting.PrivacyAccountant`, which provides the ledger)."""

    if TYPE_CHECKING:  # provided by PrivacyAccountant
        _store: LedgerStore

        def _atomic(self, dataset: str, fn: Callable[[LedgerTransaction], T]) -> T: ...
        def _dataset(self, dataset: str) -> Dataset: ...
        def _read(self, dataset: str) -> tuple[DatasetHead, DatasetBudget, Totals]: ...
        def _unknown(self, dataset: str) -> UnknownDatasetError: ...

    def cancel(self, dataset: str, key: str, reason: str, *, actor: str | None = None) -> Reservation:
        """Operator cancellation: return an open reservation (e.g. of a process that died) to the budget.

        Only for attempts that never read data. Recorded (as a ``release`` record) with ``reason`` and
        ``actor`` (default user@host). Cancelling a cancelled reservation again does nothing; a committed
        one cannot be cancelled (LedgerError). The reservations still open are listed by
        :func:`~dp_pipeline.accounting.open_reservations`.
        """
        dataset = check_name(dataset, "dataset")
        key = check_name(key, "key", MAX_KEY)
        self._cancel(dataset, key, reason, actor, by="operator")
        found = self._store.reservation(dataset, key=key)
        assert found is not None
        return self._reservation(dataset, found)

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
        dataset = check_name(dataset, "dataset")
        key = check_name(key, "key", MAX_KEY)
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
        dataset = check_name(dataset, "dataset")
        key = check_name(key, "key", MAX_KEY)
        why = check_reason(reason, "shrink")
        who = check_optional_text(actor, "actor", 255) or default_actor()
        events = [] if isinstance(costs, (list, tuple)) and not costs else to_events(costs)
        at = self._dataset(dataset)
        return self._reservation(
            dataset, self._atomic(dataset, lambda tx: at.shrink(tx, key, events, why, who))
        )

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
        the share ``claim``, within the share ``within`` (see :mod:`~dp_pipeline.accounting._payments`), or
        from the reservation alone."""
        if claim is not None:
            claim = check_name(claim, "share", MAX_KEY)
        if within is not None:
            within = check_name(within, "share", MAX_KEY)
        request = Request.one(cost, group_size, partition=partition, label=label)
        at = self._dataset(dataset)
        return paid_entry(self._atomic(dataset, lambda tx: at.pay(tx, key, request, claim, within)))

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
            amount = paid_cost(budget, held, paid)
            method = budget.rule.method_of(paid.total(budget.rule))
        else:
            amount, method = budget.rule.left(held.charge, paid.total(budget.rule))
        return BudgetReport(
            dataset, f"{what} of reservation {key!r}", amount, method, held.cost, 0, budget.relation
        )

    def _reservation(self, dataset: str, found: ReservationRecords) -> Reservation:
        body = found.reserve.body
        shrunk = [r for r in found.after if r.kind == "shrink"]
        now = shrunk[-1].body if shrunk else body  # what the reservation holds: its last shrink's
        assert found.reserve.key is not None
        return Reservation(
            cast(Any, self),  # the accountant this class is a part of
            dataset,
            found.reserve.key,
            found.reserve.seq,
            guarantee_from_dict(dict(now["cost"])),
            str(now.get("composition")),
            found.status,
            body.get("label"),
            int(body.get("group_size", 1)),
        )

    def _commit(self, dataset: str, key: str) -> str:
        return self._atomic(dataset, lambda tx: self._dataset(dataset).commit(tx, key))

    def _cancel(self, dataset: str, key: str, reason: Any, actor: Any, *, by: str) -> str:
        why = check_reason(reason, "cancellation")
        who = check_optional_text(actor, "actor", 255) or default_actor()
        return self._atomic(dataset, lambda tx: self._dataset(dataset).cancel(tx, key, why, who, by))
