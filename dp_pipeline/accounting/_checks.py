"""Input checks of the accounting core: names every ledger backend stores alike, costs as events, budgets,
partitions and plan δ. Each raises :class:`~dp_pipeline.exceptions.InvalidParameterError` naming the
parameter, before anything is read or written."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterable, Mapping
from typing import Any, cast

from dp_pipeline._validation import check_real
from dp_pipeline.accounting._partitions import partition_names
from dp_pipeline.accounting._records import DatasetBudget
from dp_pipeline.events import RELATIONS, PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

MAX_NAME = 255
MAX_KEY = 512


def check_name(value: Any, name: str, limit: int = MAX_NAME) -> str:
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
    if not encodes(value):
        raise InvalidParameterError(
            f"{name!r} must be valid Unicode text, got {value!r} with a lone surrogate (often a file name or "
            "bytes decoded with errors='surrogateescape')",
            name,
        )
    return value


def encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_optional_text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    return check_name(value, name, limit)


def to_event(cost: Any, name: str = "cost") -> PrivacyEvent:
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


def to_events(costs: Any) -> list[PrivacyEvent]:
    if isinstance(costs, (str, bytes, Mapping)) or not isinstance(costs, Iterable):
        raise InvalidParameterError(
            f"'costs' must be a list of mechanisms, events or guarantees, got {type(costs).__name__}", "costs"
        )
    items = list(costs)
    if not items:
        raise InvalidParameterError("'costs' is empty: a plan needs at least one release", "costs")
    return [to_event(item, f"costs[{i}]") for i, item in enumerate(items)]


def check_budget(budget: Any) -> Guarantee:
    if isinstance(budget, PureDP):
        return budget.to_approx_dp()
    if isinstance(budget, (ApproxDP, GaussianDP)):
        return budget
    raise InvalidParameterError(
        f"'budget' must be ApproxDP(epsilon, delta), PureDP(epsilon) or GaussianDP(mu), got "
        f"{type(budget).__name__}",
        "budget",
    )


def check_partitions(partition: Any) -> tuple[str, ...]:
    """The partitions a release names, each a name every backend stores (see :func:`_check_name`)."""
    return tuple(check_name(name, "partition") for name in partition_names(partition))


def check_partitioned(dataset: str, budget: DatasetBudget, partitions: tuple[str, ...]) -> None:
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


def check_parallel(dataset: str, previous: DatasetBudget | None, new: DatasetBudget) -> None:
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


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover - no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def check_relation(relation: Any) -> Relation | None:
    """A neighbouring relation, ``"replace_one"`` or ``"add_remove"``, or None (keep the dataset's)."""
    if relation is not None and relation not in RELATIONS:
        raise InvalidParameterError(
            f"'relation' must be 'replace_one' or 'add_remove', got {relation!r}", "relation"
        )
    return cast(Relation | None, relation)


def check_delta(delta: Any) -> float | None:
    """The δ a plan is read at: None (the rule's default) or a real in [0, 1)."""
    if delta is None:
        return None
    value = check_real(delta, "delta")
    if not 0.0 <= value < 1.0:
        raise InvalidParameterError(f"'delta' must lie in [0, 1), got {value}", "delta")
    return value


def check_reason(reason: Any, what: str) -> str:
    """A non-empty reason, recorded with a cancellation or a shrink."""
    if isinstance(reason, str) and reason.strip():
        return check_name(reason, "reason", 2000)
    raise InvalidParameterError(f"a {what} needs a non-empty 'reason' (it is recorded)", "reason")
