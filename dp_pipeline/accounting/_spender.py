"""Who pays for a release: the :class:`Spender` protocol, a dataset's :class:`DatasetHandle`, and
:data:`UNACCOUNTED`.

A *release* is one call that reads private data and returns a noisy result (a ``transform``, a
``dp_count``). Every release is paid the same way, whatever pays for it::

    relation = spender.relation()           # calibrate the noise to the dataset's neighbouring relation
    with spender.hold(event, label=..., group_size=k, partition=names):
        exact = read(data)                  # the data are read inside the hold
    return exact + noise                    # the noise is drawn after the hold has paid

Three spenders implement it:

* :class:`DatasetHandle` (``acct.dataset("visits")``): the release is reserved on the dataset's budget
  **before** the block reads anything (a refusal reads nothing) and committed after it;
* :class:`~dp_pipeline.accounting.Reservation`: the release is paid from what the
  reservation holds when the block ends, before the result exists (the dataset's budget was charged when
  the reservation was made);
* :data:`UNACCOUNTED`: the explicit opt-out, which charges no ledger.

**The guarantee.** Whatever the spender, a release whose hold raised returns nothing, and a result exists
only after the spender accepted the charge: no noisy output leaves a release that nobody paid for. A
block that raises :class:`~dp_pipeline.exceptions.InvalidParameterError` is the data failing the
release's checks: a handle cancels its reservation and a reservation pays nothing, so the refusal is all
that leaves the call. Any other error from the block is paid (the data may have been read).

This module is part of the accounting layer and imports no accountant: a handle talks to its ledger
through the small protocol :class:`Ledger`, which :class:`~dp_pipeline.PrivacyAccountant` satisfies.

References
----------
Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, §3.5 (a privacy budget spent
by composing the releases charged to it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from dp_pipeline.accounting._reports import BudgetReport, ReleaseEntry
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["UNACCOUNTED", "DatasetHandle", "Ledger", "Spender", "Unaccounted"]

CANCELLED_ON_REFUSAL = "the data failed the release's checks; no result was released"
"""The reason recorded when a handle cancels a hold whose block refused the data."""


class Spender(Protocol):
    """What a release is charged to (see the module notes for the one order every release follows).

    Implemented by :class:`DatasetHandle`, :class:`~dp_pipeline.accounting.Reservation` and
    :data:`UNACCOUNTED`; the frame functions and the transformers accept any of them as ``accountant=``.
    """

    def relation(self) -> Relation:
        """The neighbouring relation of the dataset charged (the default relation when none is)."""

    def partitions_limit(self) -> int | None:
        """L, the most partitions one person's data lie in, of the partitioned dataset charged; None for a
        dataset that is not partitioned (or none)."""

    def hold(
        self, event: PrivacyEvent, *, label: str, group_size: int = 1, partition: Sequence[str] = ()
    ) -> AbstractContextManager[None]:
        """A block that reads the data of one release of ``event`` (for groups of ``group_size``, on the
        partitions ``partition`` names: none, the whole dataset); the release is paid when the block
        ends at the latest, before its result exists. A refusal raises and nothing is paid."""


class Unaccounted:
    """The explicit opt-out (:data:`UNACCOUNTED`): releases charge no ledger, under the default relation.

    Nothing then limits how often the data is released. The frame functions and the transformers also
    take the string ``"unaccounted"`` for it.
    """

    _instance: Unaccounted | None = None

    def __new__(cls) -> Unaccounted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def relation(self) -> Relation:
        """The default relation: no dataset declares one."""
        return DEFAULT_RELATION

    def partitions_limit(self) -> None:
        """None: no dataset is charged, so none is partitioned."""
        return None

    def hold(
        self, event: PrivacyEvent, *, label: str, group_size: int = 1, partition: Sequence[str] = ()
    ) -> AbstractContextManager[None]:
        """A block that charges nothing."""
        return nullcontext()

    def __reduce__(self) -> str:
        return "UNACCOUNTED"

    def __repr__(self) -> str:
        return "UNACCOUNTED"


UNACCOUNTED: Final = Unaccounted()
"""The explicit opt-out: ``accountant=UNACCOUNTED`` (or ``"unaccounted"``) releases without charging."""


class _Held(Protocol):
    """A reservation a handle made for one release, settled when the release's block ends."""

    def commit(self) -> Any: ...

    def cancel(self, reason: str) -> Any: ...


class Ledger(Protocol):
    """What a :class:`DatasetHandle` asks of its accountant (:class:`~dp_pipeline.PrivacyAccountant`)."""

    def reserve(
        self,
        dataset: str,
        cost: Any,
        *,
        key: str | None = None,
        group_size: int = 1,
        label: str | None = None,
        partition: str | Sequence[str] | None = None,
    ) -> _Held: ...

    def spend(
        self,
        dataset: str,
        cost: Any,
        group_size: int = 1,
        label: str | None = None,
        key: str | None = None,
        *,
        partition: str | Sequence[str] | None = None,
    ) -> Any: ...

    def budget(self, dataset: str) -> BudgetReport: ...

    def spent(self, dataset: str, *, partition: str | None = None) -> BudgetReport: ...

    def remaining(self, dataset: str, *, partition: str | None = None) -> BudgetReport: ...

    def history(
        self, dataset: str, *, limit: int | None = None, since: datetime | None = None
    ) -> list[ReleaseEntry]: ...


@dataclass(frozen=True)
class DatasetHandle:
    """One dataset of a ledger, as a :class:`Spender`: ``visits = acct.dataset("visits")``.

    ``df.pipe(dp_count, epsilon=0.5, accountant=visits)`` charges ``visits`` (no ``dataset=``). The handle
    holds no state of its own: every report and charge is the accountant's, on this dataset, so two
    handles of one dataset are the same budget. It is frozen; ``copy.deepcopy`` (and so scikit-learn's
    ``clone``) returns it unchanged, and pickling carries the accountant (its URL: unpickling opens the
    same ledger; a memory ledger cannot be pickled), so copies charge the one budget.

    **Holding a release.** :meth:`hold` reserves the release on the dataset's budget before its block
    reads the data (BudgetExceededError there: nothing read, nothing charged), commits it when the block
    ends, and cancels it when the block raises InvalidParameterError (the data failed the release's
    checks; no result leaves the call). Any other error commits: the data may have been read.

    Attributes
    ----------
    accountant : PrivacyAccountant
        The ledger.
    name : str
        The dataset.
    """

    accountant: Ledger
    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError(
                f"a dataset must be named by a non-empty string, got {type(self.name).__name__}", "dataset"
            )

    # ------------------------------------------------------------------------------ the Spender protocol

    def relation(self) -> Relation:
        """The dataset's neighbouring relation (one read of the ledger)."""
        return self.accountant.budget(self.name).relation

    def partitions_limit(self) -> int | None:
        """L of the partitioned dataset (one read of the ledger); None when it is not partitioned."""
        return self.accountant.budget(self.name).partitions

    @contextmanager
    def hold(
        self, event: PrivacyEvent, *, label: str, group_size: int = 1, partition: Sequence[str] = ()
    ) -> Iterator[None]:
        """Reserve one release before the block, commit it after (see the class notes)."""
        names = list(partition) or None
        held = self.accountant.reserve(self.name, event, group_size=group_size, label=label, partition=names)
        try:
            yield
        except InvalidParameterError:
            held.cancel(reason=CANCELLED_ON_REFUSAL)
            raise
        except BaseException:
            held.commit()
            raise
        held.commit()

    # ------------------------------------------------------------------------------ the dataset's reports

    def budget(self) -> BudgetReport:
        """The dataset's budget, rule, relation and partitions (:meth:`PrivacyAccountant.budget`)."""
        return self.accountant.budget(self.name)

    def spent(self, *, partition: str | None = None) -> BudgetReport:
        """What the dataset (or one of its partitions) has spent, rounded up
        (:meth:`PrivacyAccountant.spent`)."""
        return self.accountant.spent(self.name, partition=partition)

    def remaining(self, *, partition: str | None = None) -> BudgetReport:
        """What is left of the dataset's budget (for a release on one of its partitions), rounded down
        (:meth:`PrivacyAccountant.remaining`)."""
        return self.accountant.remaining(self.name, partition=partition)

    def history(self, *, limit: int | None = None, since: datetime | None = None) -> list[ReleaseEntry]:
        """The dataset's releases, oldest first (:meth:`PrivacyAccountant.history`)."""
        return self.accountant.history(self.name, limit=limit, since=since)

    # ------------------------------------------------------------------------------ charging it directly

    def spend(
        self,
        cost: Any,
        *,
        group_size: int = 1,
        label: str | None = None,
        key: str | None = None,
        partition: str | Sequence[str] | None = None,
    ) -> Any:
        """Check and charge one release of the dataset now (:meth:`PrivacyAccountant.spend`)."""
        return self.accountant.spend(self.name, cost, group_size, label, key, partition=partition)

    def reserve(
        self,
        cost: Any,
        *,
        key: str | None = None,
        group_size: int = 1,
        label: str | None = None,
        partition: str | Sequence[str] | None = None,
    ) -> Any:
        """Reserve one release of the dataset, to commit later (:meth:`PrivacyAccountant.reserve`)."""
        return self.accountant.reserve(
            self.name, cost, key=key, group_size=group_size, label=label, partition=partition
        )

    def __copy__(self) -> DatasetHandle:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> DatasetHandle:
        # a name for one budget on one ledger: copies (sklearn clone, GridSearchCV) charge the same one
        return self

    def __repr__(self) -> str:
        return f"DatasetHandle({self.accountant!r}, {self.name!r})"
