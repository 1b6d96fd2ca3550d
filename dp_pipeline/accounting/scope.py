"""The scope guard: inside code that pays from a reservation, the dataset's plain accountant refuses.

A task that reserved its cost hands its code the reservation to pay from (the Airflow provider passes it
as the callable's argument ``dp``). Code written for a plain accountant then runs unchanged with
``accountant=reservation``. What the guard stops is the other path: the same code reaching for the plain
accountant (a module-level ``acct``, an ``accountant=acct`` left in place) would charge the dataset a
second time for work the reservation already covers. Inside :func:`paying_from`, every
:meth:`~dp_pipeline.accounting.accountant.PrivacyAccountant.spend`,
:meth:`~dp_pipeline.accounting.accountant.PrivacyAccountant.reserve` and
:meth:`~dp_pipeline.accounting.accountant.PrivacyAccountant.spend_plan` on that dataset (by name, on any
ledger) raises :class:`~dp_pipeline.exceptions.ScopedSpendError` and charges nothing;
:meth:`Reservation.spend <dp_pipeline.accounting.reservation.Reservation.spend>` pays as usual, and other
datasets are not affected.

The scope is a :class:`contextvars.ContextVar`: it follows the code into ``asyncio`` tasks and into
``contextvars.copy_context().run``, and each thread has its own. A thread started inside the block does
not inherit it (``threading`` starts threads in an empty context); neither does another process.

Example
-------
>>> from dp_pipeline import PrivacyAccountant, PureDP
>>> from dp_pipeline.accounting.scope import paying_from
>>> from dp_pipeline.exceptions import ScopedSpendError
>>> acct = PrivacyAccountant("memory://")
>>> acct.set_budget("visits", PureDP(1.0))
>>> task = acct.reserve("visits", PureDP(0.5), key="report/2026-01-05")
>>> with paying_from(task) as dp:
...     _ = dp.spend("visits", PureDP(0.25), label="count")       # paid from the reservation
...     try:
...         acct.spend("visits", PureDP(0.25), label="count again")  # would be a second charge
...     except ScopedSpendError:
...         print("refused")
refused
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from dp_pipeline.exceptions import InvalidParameterError, ScopedSpendError

if TYPE_CHECKING:
    from dp_pipeline.accounting.reservation import Reservation

__all__ = ["ScopedSpendError", "check_plain_spend", "paying_from", "paying_reservations"]

_PAYING: ContextVar[tuple[Reservation, ...]] = ContextVar("dp_pipeline_paying_from", default=())


@contextmanager
def paying_from(reservation: Reservation) -> Iterator[Reservation]:
    """Run the block as code that pays from ``reservation``; yields the reservation.

    Inside it, charging the reservation's dataset through a plain accountant raises
    :class:`~dp_pipeline.exceptions.ScopedSpendError` and charges nothing (see the module notes). Blocks
    nest: each adds its reservation's dataset to the guarded ones.
    """
    from dp_pipeline.accounting.reservation import Reservation

    if not isinstance(reservation, Reservation):
        raise InvalidParameterError(
            f"'reservation' must be a Reservation (from acct.reserve, acct.spend_plan or acct.reservation), "
            f"got {type(reservation).__name__}",
            "reservation",
        )
    token = _PAYING.set((*_PAYING.get(), reservation))
    try:
        yield reservation
    finally:
        _PAYING.reset(token)


def paying_reservations() -> tuple[Reservation, ...]:
    """The reservations the current code pays from, outermost first (empty outside :func:`paying_from`)."""
    return _PAYING.get()


def check_plain_spend(dataset: str) -> None:
    """ScopedSpendError if the current code pays from a reservation of ``dataset``."""
    for reservation in _PAYING.get():
        if reservation.dataset == dataset:
            raise ScopedSpendError(dataset, reservation.key)
