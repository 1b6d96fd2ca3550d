"""Templated dataset names: ``"visits/2026-11-24"`` is partition ``"2026-11-24"`` of dataset ``"visits"``.

A templated dataset name (``dataset="visits/{{ ds }}"``, one per run) names one partition of a partitioned
dataset (:meth:`~dp_pipeline.PrivacyAccountant.set_budget`, ``relation="add_remove", partitions=L``). The
core never splits names: the accountant, a reservation, a dataset handle and the frame functions take
``partition=``. The Airflow layer maps a rendered name once, here, with :func:`locate_partition` (or
:func:`split_partition`, which reads no ledger), and passes ``partition=`` on. This module imports nothing
of Airflow.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol

from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["PARTITION_SEPARATOR", "locate_partition", "split_partition"]

PARTITION_SEPARATOR = "/"
"""What separates a dataset from its partition in a templated name."""


def split_partition(name: str, datasets: Collection[str] | None = None) -> tuple[str, str | None]:
    """The dataset and the partition a name stands for.

    ``"visits/2026-11-24"`` → ``("visits", "2026-11-24")``; ``"visits"`` → ``("visits", None)``. The name is
    split at its last ``/``, so the dataset may itself contain ``/`` (``"clinic/visits/2026-11-24"`` →
    ``("clinic/visits", "2026-11-24")``) and the partition may not.

    Parameters
    ----------
    name : str
        A dataset name, or a dataset name, ``/`` and a partition name.
    datasets : collection of str, optional
        The datasets the ledger holds (``acct.datasets()``): a name that is itself one of them is that
        dataset, not a partition (so ``"clinic/visits"`` stays whole when it is a dataset).

    Raises
    ------
    InvalidParameterError
        For a name that is not a string, or whose dataset or partition part is empty (``"/x"``, ``"x/"``).

    Examples
    --------
    >>> split_partition("visits/2026-11-24")
    ('visits', '2026-11-24')
    >>> split_partition("clinic/visits", datasets=["clinic/visits"])
    ('clinic/visits', None)
    """
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(f"a dataset name must be a non-empty string, got {name!r}", "dataset")
    if PARTITION_SEPARATOR not in name or (datasets is not None and name in datasets):
        return name, None
    dataset, _, partition = name.rpartition(PARTITION_SEPARATOR)
    if not dataset or not partition:
        raise InvalidParameterError(
            f"{name!r} has an empty dataset or partition around its last {PARTITION_SEPARATOR!r}; write "
            "'<dataset>/<partition>' (e.g. 'visits/2026-11-24') or a dataset name alone",
            "dataset",
        )
    return dataset, partition


class _Budgets(Protocol):
    """What :func:`locate_partition` reads: a ledger's datasets and their budgets (a PrivacyAccountant)."""

    def datasets(self) -> list[str]: ...

    def budget(self, dataset: str) -> Any: ...


def locate_partition(name: str, ledger: _Budgets) -> tuple[str, str | None]:
    """The dataset and the partition a name charges on a ledger.

    The name is split as :func:`split_partition` splits it, with the ledger's datasets: a name that is itself
    a dataset is that dataset, whole; ``"visits/2026-11-24"`` is partition ``"2026-11-24"`` of ``"visits"``
    when ``visits`` was declared partitioned (``set_budget(..., relation="add_remove", partitions=L)``). A
    name that neither is a
    dataset nor names one is returned whole, so that charging it fails naming it (no budget). The ledger is
    read only for a name with a ``/``.

    Parameters
    ----------
    name : str
        A dataset name, or ``<dataset>/<partition>`` (e.g. Airflow's ``visits/{{ ds }}`` once rendered).
    ledger : PrivacyAccountant
        The ledger holding the budgets (only read).

    Raises
    ------
    InvalidParameterError
        The name's dataset part has a budget that is not partitioned: it is never taken as a new dataset
        of its own (nothing is charged). Also for an empty dataset or partition part (``"visits/"``).

    Examples
    --------
    >>> from dp_pipeline import PrivacyAccountant, PureDP
    >>> acct = PrivacyAccountant("memory://")
    >>> acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    >>> locate_partition("visits/2026-11-24", acct)
    ('visits', '2026-11-24')
    >>> locate_partition("visits", acct)
    ('visits', None)
    """
    if not isinstance(name, str) or PARTITION_SEPARATOR not in name:
        return split_partition(name)
    datasets = ledger.datasets()
    dataset, partition = split_partition(name, datasets)
    if partition is None or dataset not in datasets:
        return name, None
    if ledger.budget(dataset).partitions is None:
        raise InvalidParameterError(
            f"{name!r} names partition {partition!r} of dataset {dataset!r}, which is not partitioned, so "
            f"nothing was charged: declare it partitioned (set_budget({dataset!r}, ..., "
            f"relation='add_remove', partitions=L); 'dp-pipeline budget set {dataset} ... --relation "
            f"add_remove --partitions L') or give {name!r} a budget of its own",
            "dataset",
        )
    return dataset, partition
