"""A reservation: a charge on a dataset's budget, held open until it is committed or cancelled, and a
budget that the work it covers pays its releases from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Literal, Protocol

from dp_pipeline.accounting._partitions import partition_names
from dp_pipeline.accounting._reports import BudgetReport, ReleaseEntry
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.guarantees import Guarantee

__all__ = ["AttemptShare", "Reservation"]


class _Payments(Protocol):
    """What a reservation asks of the accountant that made it (:class:`~dp_pipeline.PrivacyAccountant`):
    its payments, reports and settlement, all written in the ledger's transactions."""

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
    ) -> ReleaseEntry: ...

    def _reservation_report(
        self, dataset: str, key: str, what: str, share: str | None = None
    ) -> BudgetReport: ...

    def _commit(self, dataset: str, key: str) -> str: ...

    def _cancel(self, dataset: str, key: str, reason: Any, actor: Any, *, by: str) -> str: ...

    def budget(self, dataset: str) -> BudgetReport: ...

    def reservation(self, dataset: str, key: str) -> Reservation: ...


class Reservation:
    """A reserved (and possibly committed) charge on a dataset's budget, and a budget to pay releases from.

    Obtained from :meth:`PrivacyAccountant.reserve` (open), or from :meth:`~PrivacyAccountant.spend` and
    :meth:`~PrivacyAccountant.spend_plan` (committed); :meth:`PrivacyAccountant.reservation` reopens one
    by its key (in another process, say). The one ``spend`` returns is the charge of the release that
    ``spend`` made, and pays for nothing more. As a context manager it commits when the block ends, **also
    when the block raises**: once inside the block the attempt may have read data, and an error afterwards
    does not take back what the data revealed. An attempt that certainly never read data calls
    :meth:`cancel` with a reason; then nothing is committed.

    **Paying from it.** A reservation is a :class:`~dp_pipeline.accounting.Spender`: it is
    accepted wherever an accountant is (``accountant=`` of the transformers and the frame functions, with
    ``dataset=`` omitted or its own dataset), and :meth:`hold` or :meth:`spend` pays a release from the
    reserved amount instead of charging the dataset again. Each payment is a ``pay`` record on the ledger
    under the reservation (label, events, cost), written in a locked transaction, so that processes
    paying from one reservation at once never exceed it; it adds nothing to the dataset's totals, and
    :meth:`~PrivacyAccountant.history` shows it with ``paid_from`` set to the reservation's key. Payments
    fit the reservation when, under the dataset's rule, the exact sum of their charges (each priced as a
    spend of its own) is within the reserved charge, or, for a plan, when they are releases the plan
    declared (its tight total covers any of them; see :mod:`dp_pipeline.accounting._payments`). A payment
    that fits neither way raises :class:`~dp_pipeline.exceptions.BudgetExceededError` naming the
    reservation and pays nothing. A cancelled reservation pays nothing, and one that paid for a release
    cannot be cancelled. Unspent reserved budget stays charged: the work may have released data by other
    means (:meth:`PrivacyAccountant.shrink` hands back the share of declared work that never started).

    **Partitions.** A reservation charged to some partitions pays only for releases that name partitions
    among them (``partition=``): a release that names none would read every partition. A name such as
    ``"visits/2026-11-24"`` is not a partition here: whoever renders such names (the Airflow layer) splits
    them (:func:`~dp_pipeline.airflow.partition_names.split_partition`) and passes ``partition=``.

    **Shares.** A reservation made for several attempts (an Airflow run's plan) pays each attempt from its
    own share: :meth:`claim` pays the attempt's declared cost from the reservation as the share of that
    attempt and returns the share (an :class:`AttemptShare`), from which the attempt's code pays its
    releases, capped at the claim (see :mod:`dp_pipeline.accounting._payments`).

    **Copies.** ``copy.deepcopy`` (and so scikit-learn's ``clone``) returns the same reservation; pickling
    carries the accountant's URL, the dataset and the key, and unpickling reopens it (a memory ledger
    cannot be pickled).

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
        ``"open"``, ``"committed"`` or ``"released"`` (cancelled: returned to the budget; the ledger's name
        for it) as last seen by this object.
    """

    def __init__(
        self,
        accountant: _Payments,
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

    # ------------------------------------------------------------------------------ paying from it

    def spend(
        self,
        dataset: str,
        cost: Any,
        *,
        group_size: int = 1,
        label: str | None = "",
        partition: str | Sequence[str] | None = None,
    ) -> ReleaseEntry:
        """Pay one release from this reservation.

        Parameters
        ----------
        dataset : str
            The reservation's dataset (InvalidParameterError for another one, nothing is paid).
        cost : mechanism, PrivacyEvent or Guarantee
            The release, as for :meth:`PrivacyAccountant.spend`.
        group_size : int, default 1
            Charge for groups of k individuals.
        label : str, optional
            Shown in the history.
        partition : str or list of str, optional
            On a partitioned dataset, the partitions the release reads (recorded). A reservation charged to
            some partitions pays only for releases that name partitions among them (InvalidParameterError
            otherwise, and for a release that names none); one of the whole dataset pays for any.

        Returns
        -------
        ReleaseEntry
            The payment as the history shows it (``paid_from`` is this reservation's key).

        Raises
        ------
        BudgetExceededError
            The payments would exceed what the reservation holds (``reservation`` names it); nothing was
            paid.
        LedgerError
            The reservation was cancelled, or is the charge of a release that
            :meth:`PrivacyAccountant.spend` made (it holds nothing to pay from), or the ledger cannot be
            written.
        """
        named = self._named(dataset, partition)
        return self._accountant._pay(self.dataset, self.key, cost, group_size, label or None, named or None)

    def claim(
        self,
        share: str,
        cost: Any,
        *,
        group_size: int = 1,
        label: str | None = "",
        partition: str | Sequence[str] | None = None,
    ) -> AttemptShare:
        """Pay an attempt's declared cost from this reservation as the attempt's share, and return the share.

        Parameters
        ----------
        share : str
            The share's key (an attempt's idempotency key); a share is claimed once.
        cost, group_size, label, partition
            The attempt's declared release, as for :meth:`spend`.

        Returns
        -------
        AttemptShare
            The share: it pays the attempt's releases, each within the claim.

        Raises
        ------
        BudgetExceededError
            The claim does not fit what the reservation holds; nothing was paid.
        KeyAlreadyUsedError
            The share was already claimed; nothing was paid.
        """
        named = partition_names(partition)
        self._accountant._pay(
            self.dataset, self.key, cost, group_size, label or None, named or None, claim=share
        )
        return AttemptShare(self, share)

    def share(self, share: str) -> AttemptShare:
        """The share ``share`` of this reservation, claimed earlier (by :meth:`claim`, maybe in another
        process); paying from it raises LedgerError if it was never claimed."""
        return AttemptShare(self, share)

    def _named(self, dataset: str, partition: str | Sequence[str] | None) -> tuple[str, ...]:
        """The partitions a release on ``dataset`` names; InvalidParameterError naming ``dataset`` unless it
        is the reservation's."""
        if dataset != self.dataset:
            raise InvalidParameterError(
                f"the reservation {self.key!r} is on dataset {self.dataset!r}; it cannot pay for a release "
                f"on another dataset",
                "dataset",
            )
        return partition_names(partition)

    # ------------------------------------------------------------------------------ the Spender protocol

    def relation(self) -> Relation:
        """The neighbouring relation of the reservation's dataset (one read of the ledger)."""
        return self._accountant.budget(self.dataset).relation

    def partitions_limit(self) -> int | None:
        """L of the reservation's dataset when it is partitioned, else None (one read of the ledger)."""
        return self._accountant.budget(self.dataset).partitions

    @contextmanager
    def hold(
        self, event: PrivacyEvent, *, label: str, group_size: int = 1, partition: Sequence[str] = ()
    ) -> Iterator[None]:
        """Pay one release from this reservation (:meth:`spend`) when the block that reads its data ends,
        before its result exists.

        The dataset's budget was charged when the reservation was made, so the block may read first. A
        block that raises InvalidParameterError (the data failed the release's checks; no result leaves
        the call) pays nothing; any other error from the block is paid (the data may have been read)
        and then raised. A payment the reservation refuses raises BudgetExceededError: the data were read
        but no result is released.
        """
        names = list(partition) or None
        try:
            yield
        except InvalidParameterError:
            raise
        except BaseException:
            self.spend(self.dataset, event, group_size=group_size, label=label, partition=names)
            raise
        self.spend(self.dataset, event, group_size=group_size, label=label, partition=names)

    def spent(self) -> BudgetReport:
        """What was paid from the reservation (``budget`` is what it holds), rounded up."""
        return self._accountant._reservation_report(self.dataset, self.key, "spent")

    def remaining(self) -> BudgetReport:
        """What a release chosen now could still be paid from the reservation, rounded down.

        Releases that a plan declared and that were not paid yet can always be paid, even when this says
        less (they fit by the plan's own tight total).
        """
        return self._accountant._reservation_report(self.dataset, self.key, "remaining")

    # ------------------------------------------------------------------------------ its life

    def commit(self) -> Reservation:
        """Mark the reservation spent (idempotent). LedgerError if it was cancelled."""
        if self.status != "committed":
            self.status = self._accountant._commit(self.dataset, self.key)
        return self

    def cancel(self, reason: str) -> Reservation:
        """Return the reservation to the budget: only for an attempt that never read data.

        Recorded with ``reason``. Cancelling again does nothing; LedgerError if it was already committed.
        """
        if self.status != "released":
            self.status = self._accountant._cancel(self.dataset, self.key, reason, None, by="attempt")
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

    def __copy__(self) -> Reservation:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Reservation:
        # a handle to one charge on one ledger: copies (sklearn clone, GridSearchCV) pay from the same one
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (self._accountant, self.dataset, self.key))

    def __repr__(self) -> str:
        return (
            f"Reservation(dataset={self.dataset!r}, key={self.key!r}, cost={self.cost!r}, "
            f"method={self.method!r}, status={self.status!r})"
        )


def _reopen(accountant: _Payments, dataset: str, key: str) -> Reservation:
    """A pickled reservation, reopened from its ledger."""
    return accountant.reservation(dataset, key)


class AttemptShare(Reservation):
    """One attempt's share of a reservation (see :meth:`Reservation.claim`): it pays the attempt's releases
    within the share, so that their sum fits what the attempt claimed, never another attempt's share.

    Releases paid within the share fit it when the exact sum of their charges is within the claim's
    charge, or when they are parts of the release the attempt declared (its tight total covers them); see
    :mod:`dp_pipeline.accounting._payments`. The reservation it belongs to is settled as a whole (its
    owner commits or shrinks it): a share cannot be committed or cancelled on its own.

    Attributes
    ----------
    share : str
        The share's key.
    """

    def __init__(self, reservation: Reservation, share: str) -> None:
        r = reservation
        super().__init__(
            r._accountant, r.dataset, r.key, r.seq, r.cost, r.method, r.status, r.label, r.group_size
        )
        self.share_key = share

    def spend(
        self,
        dataset: str,
        cost: Any,
        *,
        group_size: int = 1,
        label: str | None = "",
        partition: str | Sequence[str] | None = None,
    ) -> ReleaseEntry:
        """Pay one release within the share (as :meth:`Reservation.spend`; BudgetExceededError when the
        share's releases would exceed its claim, LedgerError when the share was never claimed)."""
        named = self._named(dataset, partition)
        return self._accountant._pay(
            self.dataset, self.key, cost, group_size, label or None, named or None, within=self.share_key
        )

    def spent(self) -> BudgetReport:
        """What was paid within the share (``budget`` is its claim), rounded up."""
        return self._accountant._reservation_report(self.dataset, self.key, "spent", self.share_key)

    def remaining(self) -> BudgetReport:
        """What a release chosen now could still be paid within the share, rounded down."""
        return self._accountant._reservation_report(self.dataset, self.key, "remaining", self.share_key)

    def claim(
        self,
        share: str,
        cost: Any,
        *,
        group_size: int = 1,
        label: str | None = "",
        partition: str | Sequence[str] | None = None,
    ) -> AttemptShare:
        """A share holds no shares of its own: LedgerError (code paying within a share cannot claim
        another)."""
        raise LedgerError(f"the share {self.share_key!r} cannot be split into shares")

    def share(self, share: str) -> AttemptShare:
        """A share reaches no other share: LedgerError."""
        raise LedgerError(f"the share {self.share_key!r} cannot reach another share")

    def commit(self) -> Reservation:
        """A share is settled with its reservation: LedgerError."""
        raise LedgerError(f"the share {self.share_key!r} is settled with its reservation {self.key!r}")

    def cancel(self, reason: str) -> Reservation:
        """A share is settled with its reservation: LedgerError."""
        raise LedgerError(f"the share {self.share_key!r} is settled with its reservation {self.key!r}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        return False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen_share, (self._accountant, self.dataset, self.key, self.share_key))

    def __repr__(self) -> str:
        return f"AttemptShare(dataset={self.dataset!r}, key={self.key!r}, share={self.share_key!r})"


def _reopen_share(accountant: _Payments, dataset: str, key: str, share: str) -> AttemptShare:
    """A pickled share, reopened from its ledger."""
    return AttemptShare(accountant.reservation(dataset, key), share)
