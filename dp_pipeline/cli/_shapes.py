"""How the commands show budgets, spends and what remains: as JSON-ready dicts and as Rich tables. Private to
:mod:`dp_pipeline.cli`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from dp_pipeline.accounting import partition_spending
from dp_pipeline.exceptions import printable
from dp_pipeline.guarantees import Guarantee, format_guarantee, guarantee_from_dict


def _amount(g: Guarantee | None) -> str:
    return "" if g is None else format_guarantee(g)


def _report_json(report: Any) -> dict[str, Any]:
    shown = {"guarantee": report.guarantee.to_dict(), "method": report.method}
    if report.unbounded is not None:  # no amount bounds the loss: why (absent otherwise, as before)
        shown["unbounded"] = report.unbounded
    return shown


def _spent_cell(spent: dict[str, Any]) -> str:
    if "unbounded" in spent:
        return "unbounded: the data are spent (see 'dp-pipeline ledger verify')"
    return f"{_shown(spent['guarantee'])} ({_RULES.get(spent['method'])})"


def _status(acct: Any, dataset: str) -> dict[str, Any]:
    """A dataset's budget, rule, spent and remaining; for a partitioned dataset also L (``partitions``) and
    what each partition has spent (``partition_spent``, by name)."""
    budget = acct.budget(dataset)
    spent, remaining = acct.spent(dataset), acct.remaining(dataset)
    status = {
        "dataset": dataset,
        "budget": budget.guarantee.to_dict(),
        "rule": budget.method,
        "relation": budget.relation,
        "spent": _report_json(spent),
        "remaining": _report_json(remaining),
        "open_reservations": spent.open_reservations,
    }
    if budget.partitions is not None:
        status["partitions"] = budget.partitions
        status["partition_spent"] = {
            name: _report_json(report) for name, report in partition_spending(acct.store, dataset).items()
        }
    return status


_RULES = {
    "basic": "basic composition",
    "gdp": "μ-GDP filter",
    "pld": "tight PLD",
    "bounded_range": "bounded-range composition",
    "zcdp": "zCDP filter",
}


def _rule(budget: dict[str, Any], method: str) -> str:
    """The budget's rule in a few words, from the rule's class (its stored name and the budget's type)."""
    from dp_pipeline.accounting.rules import stored_rule

    return stored_rule(method, guarantee_from_dict(dict(budget)), "the ledger").title


def _shown(data: dict[str, Any]) -> str:
    return _amount(guarantee_from_dict(dict(data)))


def _status_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("dataset", "budget", "rule", "relation", "spent", "remaining", "open"):
        table.add_column(name, justify="right" if name == "open" else "left", overflow="fold")
    for row in rows:
        table.add_row(
            printable(row["dataset"]),
            _shown(row["budget"]),
            _rule(row["budget"], row["rule"]),
            row["relation"],
            _spent_cell(row["spent"]),
            _shown(row["remaining"]["guarantee"]),
            str(row["open_reservations"]),
        )
    return table
