"""DPCost: the privacy cost a task declares when its DAG is defined.

A cost is plain data (dataset, mechanism/event/guarantee, group size, label), so declaring one never touches
the ledger: DAG files stay free of I/O, and the whole DAG can be planned before anything runs. A cost can
also be written as JSON-ready data (``params={"dp_cost": {...}}`` on any operator, see
:meth:`DPCost.from_spec`).

A task in a DAG that reserves per run may instead leave its noise free: its cost is a
:class:`~dp_pipeline.PlannedRelease` (kind, sensitivity, weight, group size), which the run's
budget share calibrates (see :mod:`dp_pipeline.airflow.allocating`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dp_pipeline import PlannedRelease
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP, format_guarantee
from dp_pipeline.mechanisms import Mechanism

__all__ = ["CostLike", "DPCost", "as_cost"]

CostLike = Mechanism | PrivacyEvent | Guarantee | PlannedRelease
"""What a task may declare as its cost: a mechanism, a privacy event or a bare guarantee, or a planned release
whose noise its run's budget share calibrates."""

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
    cost : Mechanism, PrivacyEvent, Guarantee or PlannedRelease
        What one run releases. A mechanism or an event lets the DAG plan compose tightly; a bare guarantee
        composes by its guarantee only. A :class:`~dp_pipeline.PlannedRelease` leaves the noise
        free: the run-level reservation calibrates it from the run's budget share
        (:mod:`dp_pipeline.airflow.allocating`), and the cost is then that calibrated mechanism.
    group_size : int, default 1
        Group privacy: the number of records one individual may contribute. With a PlannedRelease, give it
        here or as the release's own ``group_size`` (not two different ones).
    label : str or None
        Shown in the ledger history; defaults to ``dag_id.task_id`` (with the map index).
    max_map_length : int or None
        For a mapped task: the most map indexes one run may charge. The DAG check counts the task that many
        times, and a map index at or beyond it is refused before it reads data. Without it, Airflow's
        ``[core] max_map_length`` plays that part (1024 by default), unless the mapped values are literal.
    partition : str or None
        The partition of ``dataset`` the cost is charged to. Not declared: filled in when a rendered name
        such as ``"visits/2026-11-24"`` names a partition of a partitioned dataset on the ledger (see
        :func:`~dp_pipeline.airflow.partition_names.locate_partition`); None charges the dataset whole.

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
    partition: str | None = None

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
        if isinstance(self.cost, PlannedRelease):
            self.cost.check()
            if size > 1 and self.cost.group_size not in (1, size):
                raise InvalidParameterError(
                    f"'group_size' is {size} but the planned release's is {self.cost.group_size}: give the "
                    "group size once",
                    "group_size",
                )
        elif not isinstance(self.cost, (Mechanism, PrivacyEvent, Guarantee)):
            raise InvalidParameterError(
                "a task's cost must be a mechanism (e.g. Laplace(epsilon=0.5, sensitivity=1.0)), a "
                "PrivacyEvent, a guarantee (PureDP, ApproxDP, GaussianDP) or a PlannedRelease (noise left "
                f"free for the run's share); got {type(self.cost).__name__}",
                "mechanism",
            )
        if self.label is not None and not isinstance(self.label, str):
            raise InvalidParameterError(f"'label' must be a string, got {self.label!r}", "label")
        bound = self.max_map_length
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise InvalidParameterError(
                f"'max_map_length' must be a positive integer or None, got {bound!r}", "max_map_length"
            )
        if self.partition is not None and (not isinstance(self.partition, str) or not self.partition):
            raise InvalidParameterError(
                f"'partition' must be a non-empty string or None, got {self.partition!r}", "partition"
            )

    @property
    def free(self) -> PlannedRelease | None:
        """The planned release whose noise the run's share calibrates (with the task's group size), or None
        for a cost fixed when the DAG is defined."""
        if not isinstance(self.cost, PlannedRelease):
            return None
        return dataclasses.replace(self.cost, group_size=max(self.group_size, self.cost.group_size))

    @property
    def hands_mechanism(self) -> bool:
        """Whether the declaration hands the task's code a mechanism, whose one draw is paid before the code
        runs: a :class:`~dp_pipeline.mechanisms.Mechanism`, or a PlannedRelease (the mechanism the run's
        share calibrates). False for an event or a guarantee: nothing that can draw noise is handed, and the
        code pays its releases through ``dp`` from the declared cost."""
        return isinstance(self.cost, (Mechanism, PlannedRelease))

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee of one run for one individual (before group privacy)."""
        if isinstance(self.cost, Guarantee):
            return self.cost
        return self.event.guarantee if isinstance(self.cost, PlannedRelease) else self.cost.guarantee

    @property
    def event(self) -> PrivacyEvent:
        """The cost as a :class:`~dp_pipeline.events.PrivacyEvent` (kind ``"guarantee"`` for a guarantee).

        Raises
        ------
        InvalidParameterError
            The noise is left free: the cost is known once the run's share calibrates it.
        """
        if isinstance(self.cost, PrivacyEvent):
            return self.cost
        if isinstance(self.cost, Guarantee):
            return PrivacyEvent(kind="guarantee", guarantee=self.cost)
        if isinstance(self.cost, PlannedRelease):
            raise InvalidParameterError(
                f"the noise of {self.describe()} is left free: its cost is known once its run's budget share "
                "calibrates it (run_budget(dag, share=...))",
                "mechanism",
            )
        return self.cost.event

    def describe(self) -> str:
        """A short human-readable form, e.g. ``"Laplace ε=0.5 on 'patients'"`` (``"... on 'visits',
        partition '2026-11-24'"``)."""
        where = f"{self.dataset!r}" + ("" if self.partition is None else f", partition {self.partition!r}")
        free = self.free
        if free is not None:
            name = free.mechanism if isinstance(free.mechanism, str) else f"{free.free} free"
            sensitivity = "" if free.sensitivity is None else f"Δ={free.sensitivity:g}, "
            group = f", groups of {free.group_size}" if free.group_size > 1 else ""
            return f"{name} noise left free ({sensitivity}weight {free.weight:g}{group}) on {where}"
        kind = type(self.cost).__name__ if isinstance(self.cost, Mechanism) else self.event.kind
        group = f" (groups of {self.group_size})" if self.group_size > 1 else ""
        return f"{kind} {format_guarantee(self.guarantee, compact=True)}{group} on {where}"

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
