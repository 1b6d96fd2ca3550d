"""Read-only summaries of a ledger (budget, spent, remaining, method, history, run reservations), for the
dashboard and demo."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dp_pipeline import guarantees
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.airflow.keys import RUN_KEY_PREFIX
from dp_pipeline.events import sampler_of
from dp_pipeline.guarantees import GaussianDP, Guarantee

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant

__all__ = [
    "DatasetSummary",
    "HistoryRow",
    "RunReservation",
    "amount",
    "dataset_budget",
    "format_guarantee",
    "summarize",
    "summarize_all",
]


def amount(guarantee: Guarantee | None) -> float | None:
    """The headline number of a guarantee: ε, or μ for μ-GDP."""
    if guarantee is None:
        return None
    if isinstance(guarantee, GaussianDP):
        return guarantee.mu
    return float(getattr(guarantee, "epsilon", float("nan")))


def format_number(value: float | None) -> str:
    """Six significant digits, ``-`` for nothing."""
    return "-" if value is None else f"{value:.6g}"


def format_guarantee(guarantee: Guarantee | None) -> str:
    """``ε=0.5``, ``ε=1, δ=1e-06`` or ``μ=0.8`` (:func:`dp_pipeline.guarantees.format_guarantee`), ``-`` for
    nothing."""
    return "-" if guarantee is None else guarantees.format_guarantee(guarantee, compact=True, delta_digits=3)


@dataclass(frozen=True)
class HistoryRow:
    """One ledger record as shown: when, what, which attempt, and how it ended.

    Reservations (kind ``"reserve"``, status ``"open"``, ``"committed"`` or ``"released"``), releases paid
    from a reservation (kind ``"pay"``, status ``"paid"``, the reservation's key), reservations lowered to
    the part of their plan that ran (kind ``"shrink"``, the cost kept) and budget changes (kind
    ``"budget"``) are shown; the commit and release records that end a reservation are folded into its
    status. ``partitions`` are those a reservation or a payment named on a partitioned dataset (none: the
    whole dataset). ``sampler`` is ``"fast"`` for a charge whose noise the library drew with ``fast_rng``
    (not floating-point safe; see :data:`dp_pipeline.events.Sampler`), else None.
    """

    time: str
    kind: str
    label: str
    key: str
    group_size: int | None
    cost: Guarantee | None
    status: str
    partitions: tuple[str, ...] = ()
    sampler: str | None = None

    @property
    def is_charge(self) -> bool:
        """True for a reservation (open, committed or released); False for a budget record."""
        return self.kind == "reserve"


@dataclass(frozen=True)
class RunReservation:
    """A DAG run's reservation on a dataset (see :mod:`dp_pipeline.airflow.runs`).

    Attributes
    ----------
    key : str
        ``run/<dag_id>/<run_id>`` (``run/<dag_id>/<run_id>/<partition>`` for the run's part on a partition).
    reserved : Guarantee
        The run's whole plan, reserved by its setup task.
    held : Guarantee
        What it holds now: after the teardown, the declared costs of the attempts that started.
    paid : Guarantee or None
        What the run's tasks paid from it (None before any payment).
    payments : int
        How many releases were paid from it.
    status : str
        The reservation's status (``"committed"`` once reserved).
    label : str
        The reservation's label: the run, and with a budget share the share and each calibrated task's
        noise (see :mod:`dp_pipeline.airflow.allocating`).
    partitions : tuple of str
        The partitions the run's part was reserved on (none: the whole dataset).
    """

    key: str
    reserved: Guarantee
    held: Guarantee
    paid: Guarantee | None
    payments: int
    status: str
    label: str = ""
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSummary:
    """A dataset's budget, spent and remaining amounts (in the budget's currency), its history and its
    run reservations."""

    dataset: str
    budget: Guarantee
    spent: Guarantee
    remaining: Guarantee
    method: str
    history: list[HistoryRow] = field(default_factory=list)
    runs: list[RunReservation] = field(default_factory=list)

    @property
    def unit(self) -> str:
        """``"μ"`` for a μ-GDP budget, else ``"ε"``."""
        return "μ" if isinstance(self.budget, GaussianDP) else "ε"


def dataset_budget(accountant: PrivacyAccountant, dataset: str) -> Guarantee | None:
    """The budget of ``dataset``, or None when it has none."""
    if dataset not in set(accountant.datasets()):
        return None
    return _budget(accountant, dataset)


def _budget(accountant: PrivacyAccountant, dataset: str) -> Guarantee:
    return accountant.budget(dataset).guarantee


def _history_rows(records: Iterable[Any]) -> list[HistoryRow]:
    rows = []
    for record in records:
        kind = str(getattr(record, "kind", "reserve"))
        if kind not in ("reserve", "budget", "pay", "shrink"):
            continue
        time = getattr(record, "time", "")
        rows.append(
            HistoryRow(
                time=time.isoformat(sep=" ", timespec="seconds") if hasattr(time, "isoformat") else str(time),
                kind=kind,
                label=str(getattr(record, "label", "") or ""),
                key=str(getattr(record, "key", "") or ""),
                group_size=getattr(record, "group_size", None),
                cost=getattr(record, "guarantee", None),
                status="paid" if kind == "pay" else str(getattr(record, "status", "")),
                partitions=tuple(getattr(record, "partitions", ())),
                sampler=sampler_of(tuple(getattr(record, "events", ()))),
            )
        )
    return rows


def _runs(accountant: PrivacyAccountant, dataset: str, records: list[Any]) -> list[RunReservation]:
    runs = []
    for record in records:
        key = str(getattr(record, "key", "") or "")
        if record.kind != "reserve" or not key.startswith(RUN_KEY_PREFIX):
            continue
        after = [r for r in records if r.reservation == record.seq]
        shrinks = [r.guarantee for r in after if r.kind == "shrink"]
        payments = sum(1 for r in after if r.kind == "pay")
        paid = accountant.reservation(dataset, key).spent().guarantee if payments else None
        held = shrinks[-1] if shrinks else record.guarantee
        label = str(getattr(record, "label", "") or "")
        status = str(record.status)
        runs.append(
            RunReservation(key, record.guarantee, held, paid, payments, status, label, record.partitions)
        )
    return runs


def summarize(accountant: PrivacyAccountant, dataset: str) -> DatasetSummary:
    """The summary of one dataset."""
    spent = accountant.spent(dataset)
    remaining = accountant.remaining(dataset)
    records = ledger_entries(accountant.store, dataset)
    return DatasetSummary(
        dataset=dataset,
        budget=_budget(accountant, dataset),
        spent=spent.guarantee,
        remaining=remaining.guarantee,
        method=str(getattr(spent, "method", "")),
        history=_history_rows(records),
        runs=_runs(accountant, dataset, records),
    )


def summarize_all(accountant: PrivacyAccountant) -> list[DatasetSummary]:
    """Summaries of every dataset with a budget, sorted by name."""
    return [summarize(accountant, dataset) for dataset in sorted(accountant.datasets())]
