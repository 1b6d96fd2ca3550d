"""A reservation: a charge on a dataset's budget, held open until it is committed or cancelled."""

from __future__ import annotations

import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from dp_pipeline.guarantees import Guarantee

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = ["Reservation", "warn_renamed"]


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """A DeprecationWarning that ``old`` is now called ``new``, pointing at the code ``stacklevel`` frames up
    (3: the caller of the function that calls this)."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next version; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class Reservation:
    """A reserved (and possibly committed) charge on a dataset's budget.

    Obtained from :meth:`PrivacyAccountant.reserve` (open), or from :meth:`~PrivacyAccountant.spend` and
    :meth:`~PrivacyAccountant.spend_plan` (committed). As a context manager it commits when the block
    ends, **also when the block raises**: once inside the block the attempt may have read data, and an
    error afterwards does not take back what the data revealed. An attempt that certainly never read
    data calls :meth:`cancel` with a reason; then nothing is committed.

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

    def release(self, reason: str) -> Reservation:
        """Deprecated name of :meth:`cancel` (a "release" is a DP output)."""
        warn_renamed("Reservation.release(reason)", "Reservation.cancel(reason)")
        return self.cancel(reason)

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
