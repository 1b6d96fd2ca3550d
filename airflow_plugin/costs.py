"""DPCost: the privacy cost a task declares when its DAG is defined.

A cost is plain data (dataset, mechanism/event/guarantee, group size, label), so declaring one never touches
the ledger: DAG files stay free of I/O, and the whole DAG can be planned before anything runs. A cost can
also be written as JSON-ready data (``params={"dp_cost": {...}}`` on any operator, see
:meth:`DPCost.from_spec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP, format_guarantee
from dp_pipeline.mechanisms import Mechanism

__all__ = ["CostLike", "DPCost", "as_cost"]

CostLike = Mechanism | PrivacyEvent | Guarantee
"""What a task may declare as its cost: a mechanism, a privacy event or a bare guarantee."""

_SPEC_KEYS = frozenset(
    {"dataset", "epsilon", "delta", "mu", "event", "group_size", "label", "max_map_length"}
)


@dataclass(frozen=True)
class DPCost:
    """The privacy cost of one attempt of a task, declared at DAG-definition time.

    Parameters
    ----------
    dataset : str
        The ledger dataset the cost is charged to. It may be a Jinja template (``"visits/{{ ds }}"``): each
        run charges the name rendered in its own context, and the DAG check renders it for a logical date.
    cost : Mechanism, PrivacyEvent or Guarantee
        What one run releases. A mechanism or an event lets the DAG plan compose tightly; a bare guarantee
        composes by its guarantee only.
    group_size : int, default 1
        Group privacy: the number of records one individual may contribute.
    label : str or None
        Shown in the ledger history; defaults to ``dag_id.task_id`` (with the map index).
    max_map_length : int or None
        For a mapped task: the most map indexes one run may charge. The DAG check counts the task that many
        times, and a map index at or beyond it is refused before it reads data. Without it, Airflow's
        ``[core] max_map_length`` plays that part (1024 by default), unless the mapped values are literal.

    Raises
    ------
    InvalidParameterError
        For an empty dataset name, a group size or map length below 1 or a cost that is none of the
        accepted types.
    """

    dataset: str
    cost: CostLike
    group_size: int = 1
    label: str | None = None
    max_map_length: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise InvalidParameterError(
                f"'dataset' must be a non-empty string, got {self.dataset!r}", "dataset"
            )
        size = self.group_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidParameterError(
                f"'group_size' must be a positive integer, got {self.group_size!r}", "group_size"
            )
        if not isinstance(self.cost, (Mechanism, PrivacyEvent, Guarantee)):
            raise InvalidParameterError(
                "a task's cost must be a mechanism (e.g. Laplace(epsilon=0.5, sensitivity=1.0)), a "
                f"PrivacyEvent or a guarantee (PureDP, ApproxDP, GaussianDP); got {type(self.cost).__name__}",
                "mechanism",
            )
        if self.label is not None and not isinstance(self.label, str):
            raise InvalidParameterError(f"'label' must be a string, got {self.label!r}", "label")
        bound = self.max_map_length
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise InvalidParameterError(
                f"'max_map_length' must be a positive integer or None, got {bound!r}", "max_map_length"
            )

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee of one run for one individual (before group privacy)."""
        if isinstance(self.cost, Guarantee):
            return self.cost
        return self.cost.guarantee

    @property
    def event(self) -> PrivacyEvent:
        """The cost as a :class:`~dp_pipeline.events.PrivacyEvent` (kind ``"guarantee"`` for a guarantee)."""
        if isinstance(self.cost, PrivacyEvent):
            return self.cost
        if isinstance(self.cost, Guarantee):
            return PrivacyEvent(kind="guarantee", guarantee=self.cost)
        return self.cost.event

    def describe(self) -> str:
        """A short human-readable form, e.g. ``"Laplace ε=0.5 on 'patients'"``."""
        kind = type(self.cost).__name__ if isinstance(self.cost, Mechanism) else self.event.kind
        group = f" (groups of {self.group_size})" if self.group_size > 1 else ""
        return f"{kind} {format_guarantee(self.guarantee, compact=True)}{group} on {self.dataset!r}"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> DPCost:
        """Build a cost from JSON-ready data, as declared in an operator's ``params``.

        Parameters
        ----------
        spec : mapping
            ``dataset`` and exactly one of: ``epsilon`` (with an optional ``delta``: ε-DP or (ε, δ)-DP),
            ``mu`` (μ-GDP) or ``event`` (a :meth:`PrivacyEvent.to_dict` mapping). Optional ``group_size``
            and ``label``, and ``max_map_length`` for a mapped task.

        Returns
        -------
        DPCost

        Raises
        ------
        InvalidParameterError
            For unknown keys, a missing dataset, or not exactly one cost.

        Examples
        --------
        >>> DPCost.from_spec({"dataset": "patients", "epsilon": 0.5}).describe()
        "guarantee ε=0.5 on 'patients'"
        """
        if not isinstance(spec, Mapping):
            raise InvalidParameterError(f"a dp_cost spec must be a mapping, got {spec!r}", "dp_cost")
        unknown = set(spec) - _SPEC_KEYS
        if unknown:
            raise InvalidParameterError(
                f"unknown keys in dp_cost spec: {sorted(unknown)}; allowed: {sorted(_SPEC_KEYS)}", "dp_cost"
            )
        given = [key for key in ("epsilon", "mu", "event") if key in spec]
        if len(given) != 1:
            raise InvalidParameterError(
                "a dp_cost spec needs exactly one of 'epsilon' (with optional 'delta'), 'mu' or 'event'",
                "dp_cost",
            )
        if "delta" in spec and given != ["epsilon"]:
            raise InvalidParameterError("'delta' only goes with 'epsilon' in a dp_cost spec", "dp_cost")
        cost: CostLike
        if given == ["epsilon"]:
            delta = float(spec.get("delta", 0.0))
            cost = ApproxDP(float(spec["epsilon"]), delta) if delta > 0 else PureDP(float(spec["epsilon"]))
        elif given == ["mu"]:
            cost = GaussianDP(float(spec["mu"]))
        else:
            cost = PrivacyEvent.from_dict(dict(spec["event"]))
        return cls(
            dataset=spec.get("dataset", ""),
            cost=cost,
            group_size=spec.get("group_size", 1),
            label=spec.get("label"),
            max_map_length=spec.get("max_map_length"),
        )


def as_cost(
    dataset: str,
    cost: CostLike | DPCost,
    group_size: int = 1,
    label: str | None = None,
    max_map_length: int | None = None,
) -> DPCost:
    """A :class:`DPCost` from its parts (a DPCost passes through unchanged)."""
    if isinstance(cost, DPCost):
        return cost
    return DPCost(
        dataset=dataset, cost=cost, group_size=group_size, label=label, max_map_length=max_map_length
    )
