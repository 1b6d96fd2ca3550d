"""The partitions a release names: ``partition=`` of the accountant, a reservation, a dataset handle and
the frame functions (one name, a list of names, or None for the whole dataset).

The core never splits dataset names: a templated name such as Airflow's ``visits/{{ ds }}`` is mapped to a
dataset and a partition once, at the Airflow edge (:mod:`dp_pipeline.airflow.partition_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["partition_names"]


def partition_names(partition: Any) -> tuple[str, ...]:
    """The partitions a release names (``partition=`` of ``spend`` and of the frame functions): one name or
    a list of distinct names; None names none (the release reads the whole dataset).

    Raises
    ------
    InvalidParameterError
        For anything else: not strings, an empty list, or a name given twice.
    """
    if partition is None:
        return ()
    names = [partition] if isinstance(partition, str) else partition
    if isinstance(names, (bytes, Mapping)) or not isinstance(names, Iterable):
        raise InvalidParameterError(
            f"'partition' must be a partition name or a list of names, got {type(partition).__name__}",
            "partition",
        )
    listed = tuple(names)
    if not listed or not all(isinstance(name, str) and name for name in listed):
        raise InvalidParameterError(
            "'partition' must name at least one partition, by non-empty strings", "partition"
        )
    if len(set(listed)) != len(listed):
        raise InvalidParameterError("'partition' names a partition twice", "partition")
    return listed
