"""``dp-pipeline budget``: set, show, list a dataset's privacy budget, and the history of its releases."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from dp_pipeline.accounting import partition_reading
from dp_pipeline.cli._app import (
    EXIT_INVALID,
    DatasetArgument,
    JsonOption,
    LedgerOption,
    _accountant,
    _CommandError,
    _console,
    _errors,
    _number,
    _print_json,
    _typer,
)
from dp_pipeline.cli._shapes import _RULES, _amount, _shown, _status, _status_table
from dp_pipeline.exceptions import printable
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee

budget_app = _typer("Set and read per-dataset privacy budgets.")


def _partition_table(status: dict[str, Any]) -> Table | None:
    """What each partition of a partitioned dataset has spent (None for a dataset that is not)."""
    if "partitions" not in status:
        return None
    reading = partition_reading(status["relation"], status["partitions"])
    title = f"partitions of {printable(status['dataset'])!r}: {reading}"
    table = Table(title=title, title_justify="left")
    table.add_column("partition", overflow="fold")
    table.add_column("spent", overflow="fold")
    for name, spent in status["partition_spent"].items():
        table.add_row(printable(name), f"{_shown(spent['guarantee'])} ({_RULES.get(spent['method'])})")
    return table


def _print_status(status: dict[str, Any], title: str) -> None:
    console = _console()
    console.print(_status_table([status], title))
    partitions = _partition_table(status)
    if partitions is not None:
        console.print(partitions)


def _kept_delta(acct: Any, dataset: str) -> float:
    """δ of the dataset's current (ε, δ) budget, kept when only --epsilon changes; 0 for a new budget."""
    if dataset not in acct.datasets():
        return 0.0
    current = acct.budget(dataset).guarantee
    return current.delta if isinstance(current, ApproxDP) else 0.0


@budget_app.command("set")
def budget_set(
    dataset: DatasetArgument,
    epsilon: Annotated[
        str | None,
        typer.Option("--epsilon", metavar="FLOAT", help="ε of an (ε, δ) budget.", show_default=False),
    ] = None,
    delta: Annotated[
        str | None,
        typer.Option(
            "--delta", metavar="FLOAT", help="δ of an (ε, δ) budget (default: the current budget's δ, or 0)."
        ),
    ] = None,
    mu: Annotated[
        str | None, typer.Option("--mu", metavar="FLOAT", help="μ of a μ-GDP budget.", show_default=False)
    ] = None,
    rule: Annotated[
        str,
        typer.Option(
            "--rule",
            help="How spends compose: auto (basic for --epsilon, gdp_filter for --mu); basic (Σε and Σδ); "
            "gdp_filter (Σμ², a --mu budget); pure_or_gdp (an --epsilon budget with --delta > 0 spent by "
            "pure or Gaussian releases: Σε while all are pure, else Σμ² against the largest μ that fits); "
            "zcdp (the same releases chosen one after another, many of them: Σε while all are pure, else "
            "Σρ, ρ = ε²/2 for pure ε and μ²/2 for Gaussian noise, against the largest ρ that fits).",
        ),
    ] = "auto",
    relation: Annotated[
        str | None,
        typer.Option(
            "--relation",
            help="Neighbouring datasets: replace_one (one person's rows replaced by another's; the default "
            "for a new dataset, needed by row-level releases) or add_remove (one person's rows added or "
            "removed; aggregates only). Fixed once spends are recorded.",
            show_default=False,
        ),
    ] = None,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            metavar="L",
            help="Declare the dataset partitioned by a public attribute (a region, the day of a per-day "
            "dataset), with L the most partitions one person's data lie in: releases name the partitions "
            "they read, and the dataset's spent amount composes the L largest partition totals. May grow, "
            "not shrink, once spends are recorded.",
            show_default=False,
        ),
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Recorded with the change.")] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", help="Recorded with the change (default user@host).")
    ] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set or change a dataset's budget: --epsilon E [--delta D], or --mu M."""
    with _errors():
        budget: Guarantee
        if (epsilon is None) == (mu is None):
            raise _CommandError("give either --epsilon (with an optional --delta) or --mu", EXIT_INVALID)
        if mu is not None:
            if delta is not None:
                raise _CommandError(
                    "--delta belongs to an (ε, δ) budget; a μ-GDP budget takes --mu only", EXIT_INVALID
                )
            budget = GaussianDP(_number(mu, "--mu"))
        eps = None if epsilon is None else _number(epsilon, "--epsilon")
        given_delta = None if delta is None else _number(delta, "--delta")
        with _accountant(ledger) as acct:
            if eps is not None:
                budget = ApproxDP(eps, _kept_delta(acct, dataset) if given_delta is None else given_delta)
            acct.set_budget(
                dataset,
                budget,
                rule=rule,
                relation=relation,
                reason=reason,
                actor=actor,
                partitions=partitions,
            )
            status = _status(acct, dataset)
        if as_json:
            _print_json(status)
        else:
            _print_status(status, f"budget of {dataset!r} set")


@budget_app.command("show")
def budget_show(dataset: DatasetArgument, ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """A dataset's budget, its rule, what is spent and what remains (and per partition, if partitioned)."""
    with _errors(), _accountant(ledger) as acct:
        status = _status(acct, dataset)
        if as_json:
            _print_json(status)
        else:
            _print_status(status, f"budget of {dataset!r}")


@budget_app.command("list")
def budget_list(ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """Every dataset with a budget on the ledger."""
    with _errors(), _accountant(ledger) as acct:
        rows = [_status(acct, name) for name in acct.datasets()]
        if as_json:
            _print_json(rows)
        elif rows:
            _console().print(_status_table(rows, f"{len(rows)} dataset(s)"))
        else:
            typer.echo("no datasets have a budget on this ledger")


_FAST_NOTE = (
    "sampler 'fast': noise drawn with fast_rng, whose floating-point samplers are not floating-point safe; "
    "the cost charged does not bound what those releases reveal"
)


def _release_json(entry: Any) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "time": entry.time.isoformat(),
        "label": entry.label,
        "key": entry.key,
        "group_size": entry.group_size,
        "cost": entry.cost.to_dict(),
        "method": entry.method,
        "status": entry.status,
        "ended": None if entry.ended is None else entry.ended.isoformat(),
        "reason": entry.reason,
        "actor": entry.actor,
        "paid_from": entry.paid_from,
        "partitions": list(entry.partitions),
        "sampler": entry.sampler,
        "relation": entry.relation,
        "events": [e.to_dict() for e in entry.events],
    }


def _since(text: str | None) -> Any:
    if text is None:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise _CommandError(
            f"--since must be an ISO date or time, e.g. 2026-01-31 or 2026-01-31T12:00, got {text!r}",
            EXIT_INVALID,
        ) from None


@budget_app.command("history")
def budget_history(
    dataset: DatasetArgument,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, metavar="N", help="Only the latest N releases.", show_default=False),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="DATE",
            help="Only releases from this ISO date or time (UTC) on.",
            show_default=False,
        ),
    ] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """One row per release of a dataset: time, label, group size k, cost, status (and on a partitioned
    dataset the partitions each release named; none: it read the whole dataset). A release whose noise was
    drawn with fast_rng (not floating-point safe: its cost does not bound what its floats reveal) shows
    'fast' in a 'sampler' column, and a note under the table.

    The raw ledger records (budget changes, commits, releases, hashes) are read with
    'dp-pipeline ledger verify' and the Python function dp_pipeline.accounting._reports.ledger_entries.
    """
    with _errors():
        start = _since(since)
        with _accountant(ledger) as acct:
            entries = acct.history(dataset, limit=limit, since=start)
        if as_json:
            _print_json([_release_json(e) for e in entries])
            return
        if not entries:
            typer.echo(f"no releases on {dataset!r}" + (" in that period" if limit or since else ""))
            return
        table = Table(title=f"releases on {dataset!r}", title_justify="left")
        table.add_column("seq", justify="right", no_wrap=True)
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("label", overflow="fold", ratio=1)
        table.add_column("k", justify="right", no_wrap=True)
        table.add_column("cost", overflow="fold")
        table.add_column("status", no_wrap=True)
        named = any(e.partitions for e in entries)
        if named:
            table.add_column("partitions", overflow="fold")
            table.add_column("relation", no_wrap=True)
        fast = any(e.sampler for e in entries)
        if fast:
            table.add_column("sampler", no_wrap=True)
        for e in entries:
            row = [
                str(e.seq),
                e.time.strftime("%Y-%m-%d %H:%M"),
                printable(e.label or ""),
                str(e.group_size),
                _amount(e.cost),
                e.status,
            ]
            if named:
                row += [printable(", ".join(e.partitions)) or "(whole dataset)", e.relation or ""]
            if fast:
                row.append(e.sampler or "")
            table.add_row(*row)
        _console().print(table)
        if fast:
            typer.echo(_FAST_NOTE)
