"""The charging protocol of a release: where it is charged, under which relation, and the charge itself.

A *release* is one call that reads private data and returns a noisy result (a ``transform``, a
``dp_count``). It is charged to a dataset's budget in a :class:`~dp_pipeline.PrivacyAccountant` exactly once,
with one event (a :class:`~dp_pipeline.mechanisms.Composite` for a release of several parts), before its
result exists; ``accountant="unaccounted"`` is the explicit opt-out. The scikit-learn transformers and the
pandas functions follow this protocol; this module needs neither scikit-learn nor pandas.
"""

from __future__ import annotations

from typing import Any, Protocol

from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting.partitions import partition_names
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import Guarantee

__all__ = [
    "UNACCOUNTED",
    "charge",
    "check_ledger",
    "dataset_partitions",
    "dataset_relation",
    "located",
    "partition_options",
]

UNACCOUNTED = "unaccounted"
"""The explicit opt-out: ``accountant="unaccounted"`` releases without charging any ledger."""


class _Spender(Protocol):
    """What a release is charged to: a PrivacyAccountant, or a Reservation that pays from what it holds."""

    def spend(
        self, dataset: str, cost: Any, *, group_size: int = 1, label: str = "", partition: Any = None
    ) -> Any: ...


def check_ledger(accountant: Any, dataset: Any) -> None:
    """Check that a release knows where to be charged, or was explicitly told not to be.

    Raises
    ------
    InvalidParameterError
        Naming ``accountant`` when it is None or not an accountant, naming ``dataset`` when it is missing.
    """
    if isinstance(accountant, str) and accountant == UNACCOUNTED:
        return
    if accountant is None:
        raise InvalidParameterError(
            "no accountant: every release is charged to a privacy ledger. Pass "
            "accountant=PrivacyAccountant('sqlite:///ledger.db') and dataset='<name>', or "
            f"accountant={UNACCOUNTED!r} to release without charging any ledger (nothing then limits how "
            "often the data is released)",
            "accountant",
        )
    if not callable(getattr(accountant, "spend", None)):
        raise InvalidParameterError(
            f"'accountant' must be a PrivacyAccountant, a Reservation to pay from or {UNACCOUNTED!r}, got "
            f"{type(accountant).__name__}",
            "accountant",
        )
    if not isinstance(dataset, str) or not dataset:
        raise InvalidParameterError(
            f"'dataset' must name the dataset whose budget the releases are charged to, got {dataset!r}",
            "dataset",
        )


def located(accountant: Any, dataset: Any, partition: Any) -> tuple[Any, tuple[str, ...]]:
    """The dataset a release is charged to and the partitions it names (``partition``: a name, a list or
    None). A reservation maps a name such as ``"visits/2026-11-24"`` to its dataset's partition
    (:meth:`~dp_pipeline.accounting.reservation.Reservation.locate`: code inside an Airflow task passes the
    name the task rendered); an accountant takes names as given.

    Raises
    ------
    InvalidParameterError
        A bad partition name, or a name the reservation cannot pay for.
    """
    locate = getattr(accountant, "locate", None)
    if isinstance(accountant, str) or not callable(locate):
        return dataset, partition_names(partition)
    where: tuple[Any, tuple[str, ...]] = locate(dataset, partition)
    return where


def dataset_relation(accountant: Any, dataset: Any) -> Relation:
    """The neighbouring relation of the dataset a release is charged to (one read of the ledger).

    ``"unaccounted"``, or an accountant that cannot tell, gives the default relation.
    """
    read = getattr(accountant, "relation", None)
    if isinstance(accountant, str) or not callable(read):
        return DEFAULT_RELATION
    relation: Relation = read(dataset)
    return relation


def dataset_partitions(accountant: Any, dataset: Any) -> int | None:
    """L, the most partitions one person's data lie in, of the partitioned dataset a release is charged to
    (one read of the ledger); None for a dataset that is not partitioned, or ``"unaccounted"``."""
    read = getattr(accountant, "budget", None)
    if isinstance(accountant, str) or not callable(read):
        return None
    limit: int | None = getattr(read(dataset), "partitions", None)
    return limit


def partition_options(partition: tuple[str, ...]) -> dict[str, Any]:
    """The keyword a spend or reservation takes for the partitions a release names (none: no keyword, so
    that an accountant without partitions is called as before)."""
    return {"partition": list(partition)} if partition else {}


def charge(
    accountant: Any,
    dataset: Any,
    cost: PrivacyEvent | Guarantee,
    label: str,
    group_size: Any = 1,
    partition: tuple[str, ...] = (),
) -> None:
    """Charge one release (for groups of ``group_size`` rows, on the partitions it names, if any) to the
    ledger before its result exists; BudgetExceededError charges nothing."""
    k = check_positive_int(group_size, "group_size")
    if isinstance(accountant, str) and accountant == UNACCOUNTED:
        return
    spender: _Spender = accountant
    spender.spend(dataset, cost, group_size=k, label=label, **partition_options(partition))
