"""The ``dp-pipeline`` command: budgets, the ledger and plan checks from a shell.

::

    dp-pipeline ledger init                          --ledger sqlite:///ledger.db
    dp-pipeline budget set patients --epsilon 3 --delta 1e-6
    dp-pipeline budget set genomes --mu 1
    dp-pipeline budget set visits --epsilon 2 --partitions 2     one person in at most 2 partitions
    dp-pipeline budget show patients [--json]
    dp-pipeline budget list
    dp-pipeline budget history patients [--limit N] [--since DATE]
    dp-pipeline plan check patients plan.json        exit 1 when the plan does not fit
    dp-pipeline plan check visits plan.json --partition 2026-11-24      on a partition of a dataset
    dp-pipeline plan allocate patients releases.json the least noise that fits (JSON in, JSON out)
    dp-pipeline ledger verify [patients]             exit 1 when a record was tampered with
    dp-pipeline ledger cancel patients KEY --reason "worker died before reading data"

The ledger is named by ``--ledger URL`` or the environment variable ``DP_PIPELINE_LEDGER``; there is no
default, and only ``ledger init`` creates a ledger, so a mistyped URL never starts an empty one. Output is
Rich tables, or JSON with ``--json``. Errors print one line to stderr: exit status 1 when the ledger
refuses or fails (budget exceeded, plan does not fit, verification failed, unreadable ledger), 2 for
invalid input (bad numbers, unknown dataset, bad plan file, no ledger URL, usage errors).

A plan file is a JSON list of releases, each one of::

    {"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}
    {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-6, "sensitivity": 1}
    {"mechanism": "gaussian", "mu": 0.5, "sensitivity": 1}
    {"epsilon": 0.5, "delta": 1e-6}          a release known by its guarantee ("delta" optional)
    {"mu": 0.5}                              a μ-GDP release

with optional ``"group_size"`` (k ≥ 1) and ``"label"``. Mechanisms: ``laplace``, ``gaussian``,
``staircase``, ``randomized_response`` (binary, or k-ary with ``"categories"``: a list or a count),
``bounded_laplace`` and ``bounded_staircase``; their other keys are the mechanism's parameters.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

try:
    import typer
    from rich.console import Console
    from rich.table import Table
    from typer.core import TyperGroup
except ImportError as _err:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f'the dp-pipeline command needs Typer and Rich: pip install "dp-pipeline[cli]" ({_err})'
    ) from None

from dp_pipeline.accounting.ledger.urls import redact_text, redact_url
from dp_pipeline.accounting.reports import partition_reading
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    UnknownDatasetError,
    UnsupportedCompositionError,
    printable,
)
from dp_pipeline.guarantees import (
    ApproxDP,
    GaussianDP,
    Guarantee,
    PureDP,
    format_guarantee,
    guarantee_from_dict,
)

__all__ = ["app"]

ENV_LEDGER = "DP_PIPELINE_LEDGER"
EXIT_REFUSED = 1  # the ledger refused or failed
EXIT_INVALID = 2  # invalid input (Click's own usage errors exit with 2 as well)


class _CommandError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _Group(TyperGroup):
    """Prints usage errors as one line (``error: …``) instead of a usage block."""

    def main(self, args: Sequence[str] | None = None, *pos: Any, **kwargs: Any) -> Any:
        standalone = kwargs.pop("standalone_mode", True)
        kwargs["standalone_mode"] = False
        try:
            result = super().main(args, *pos, **kwargs)
        except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            result = 1
        except Exception as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # a group called without a command: its help
                err.show()  # type: ignore[attr-defined]
                result = 2
            elif type(err).__name__ == "Abort" or isinstance(err, typer.Abort):
                typer.echo("error: aborted", err=True)
                result = 1
            elif hasattr(err, "format_message") and isinstance(getattr(err, "exit_code", None), int):
                # a usage error (unknown command or option, missing argument)
                ctx = getattr(err, "ctx", None)
                where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                typer.echo(f"error: {printable(_one_line(err.format_message()))}{where}", err=True)
                result = getattr(err, "exit_code", EXIT_INVALID)
            else:
                raise
        code = result if isinstance(result, int) else 0
        if not standalone:
            return code
        sys.exit(code)


def _typer(help_text: str) -> typer.Typer:
    return typer.Typer(
        cls=_Group, help=help_text, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False
    )


app = _typer("Privacy budgets of datasets on a dp-pipeline ledger: set, show, check plans, verify.")
budget_app = _typer("Set and read per-dataset privacy budgets.")
ledger_app = _typer("Create, verify and repair the ledger.")
plan_app = _typer("Check a plan of releases against a budget before anything runs.")
app.add_typer(budget_app, name="budget")
app.add_typer(ledger_app, name="ledger")
app.add_typer(plan_app, name="plan")

LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        envvar=ENV_LEDGER,
        show_envvar=True,
        metavar="URL",
        help="The ledger's SQLAlchemy URL, e.g. sqlite:///ledger.db or postgresql://user@host/db.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
DatasetArgument = Annotated[str, typer.Argument(metavar="DATASET", help="The dataset.", show_default=False)]


# ------------------------------------------------------------------------------------------------ plumbing


@contextmanager
def _errors() -> Iterator[None]:
    """Turn every error into one line on stderr and an exit status; never a traceback."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException, BrokenPipeError):
        raise
    except _CommandError as err:
        _fail(str(err), err.code)
    except UnknownDatasetError as err:  # the advice names the command, not the Python call
        advice = f"To set one: dp-pipeline budget set {err.dataset} --epsilon E [--delta D] (or --mu M)."
        _fail(str(UnknownDatasetError(err.dataset, err.ledger, err.empty, advice)), EXIT_INVALID)
    except InvalidParameterError as err:  # also a malformed ledger URL
        _fail(str(err), EXIT_INVALID)
    except (BudgetExceededError, UnsupportedCompositionError, LedgerError) as err:
        _fail(str(err), EXIT_REFUSED)
    except ImportError as err:
        _fail(str(err), EXIT_REFUSED)
    except Exception as err:
        if os.environ.get("DP_PIPELINE_DEBUG"):
            raise
        _fail(f"unexpected {type(err).__name__}: {err} (set DP_PIPELINE_DEBUG=1 for the traceback)", 1)


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {printable(_one_line(redact_text(message)))}", err=True)
    raise typer.Exit(code)


def _console() -> Console:
    # markup off: dataset names, labels and keys are shown as written, never read as Rich markup
    return Console(markup=False, highlight=False, emoji=False)


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _open(url: str | None, *, create: bool = False, read_only: bool = False) -> Any:
    """The accountant of the ledger a URL names; only ``ledger init`` creates one."""
    from dp_pipeline.accounting.accountant import PrivacyAccountant

    if not url:
        raise _CommandError(f"no ledger given: pass --ledger URL or set {ENV_LEDGER}", EXIT_INVALID)
    if url == "memory://":
        raise _CommandError(
            "an in-memory ledger lives inside one process; give a database URL, e.g. sqlite:///ledger.db",
            EXIT_INVALID,
        )
    given = url
    if "://" not in url:  # a plain path: the SQLite file it names
        if ":" in url.rpartition("@")[0]:
            raise _CommandError(
                f"--ledger {redact_url(url)} looks like a database URL without its scheme; write it as "
                "postgresql+psycopg://… (or sqlite:///path for a SQLite file)",
                EXIT_INVALID,
            )
        url = f"sqlite:///{Path(url).expanduser().resolve()}"
    if _sqlite_path(url) is None and not url.startswith(("sqlite", "postgresql")):
        raise _CommandError(
            f"--ledger must be a SQLAlchemy URL such as sqlite:///ledger.db or postgresql://user@host/db "
            f"(or a path to a SQLite file), got {redact_url(url)}",
            EXIT_INVALID,
        )
    if not create:
        path = _sqlite_path(url)
        if path is not None and not path.exists():
            raise _CommandError(
                f"no ledger at {path}: create it with 'dp-pipeline ledger init --ledger {redact_url(url)}'",
                EXIT_INVALID,
            )
    if given != url:
        note = f"note: --ledger {printable(given)} is a path, not a URL; using {printable(url)}"
        typer.echo(note, err=True)
    return PrivacyAccountant(url, create=create, read_only=read_only)


def _sqlite_path(url: str) -> Path | None:
    try:
        import sqlalchemy as sa

        parsed = sa.engine.make_url(url)
    except Exception:
        return None  # the accountant explains what is wrong with it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextmanager
def _accountant(url: str | None, *, create: bool = False, read_only: bool = False) -> Iterator[Any]:
    acct = _open(url, create=create, read_only=read_only)
    try:
        yield acct
    finally:
        acct.close()


def _number(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _CommandError(f"{option} must be a number, got {text!r}", EXIT_INVALID) from None
    if not math.isfinite(value):
        raise _CommandError(f"{option} must be a finite number, got {text!r}", EXIT_INVALID)
    return value


# ------------------------------------------------------------------------------------------------ shapes


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
            name: _report_json(report) for name, report in acct.partitions(dataset).items()
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


# ------------------------------------------------------------------------------------------------ budget


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
            "--method",
            help="How spends compose: auto (basic for --epsilon, gdp_filter for --mu); basic (Σε and Σδ); "
            "gdp_filter (Σμ², a --mu budget); pure_or_gdp (an --epsilon budget with --delta > 0 spent by "
            "pure or Gaussian releases: Σε while all are pure, else Σμ² against the largest μ that fits); "
            "zcdp (the same releases chosen one after another, many of them: Σε while all are pure, else "
            "Σρ, ρ = ε²/2 for pure ε and μ²/2 for Gaussian noise, against the largest ρ that fits). "
            "--method is the older name of this option.",
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
    'dp-pipeline ledger verify' and the Python method PrivacyAccountant.records.
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


# ------------------------------------------------------------------------------------------------ ledger


@ledger_app.command("init")
def ledger_init(ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """Create the ledger (or check that an existing one is readable); nothing else is written."""
    with _errors(), _accountant(ledger, create=True) as acct:
        store = acct.store
        revision = store.schema_revision() if hasattr(store, "schema_revision") else None
        shown = printable(redact_url(acct.url))
        if as_json:
            _print_json({"ledger": shown, "schema_revision": revision, "datasets": acct.datasets()})
        else:
            typer.echo(f"ledger ready: {shown} (schema {revision}, {len(acct.datasets())} dataset(s))")


@ledger_app.command("verify")
def ledger_verify(
    dataset: Annotated[str | None, typer.Argument(metavar="[DATASET]", help="Only this dataset.")] = None,
    anchor: Annotated[
        Path | None,
        typer.Option(
            "--anchor", metavar="FILE", help="A checkpoint from 'ledger anchor': the chains must extend it."
        ),
    ] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute every hash chain, total and budget check (read-only); exit 1 naming the first problem.

    Signatures are checked when DP_PIPELINE_LEDGER_KEY holds the ledger key; the output says how many
    records are signed (none: the key checked nothing). An anchor with a MAC is checked only with the key.
    """
    with _errors(), _accountant(ledger, read_only=True) as acct:
        report = acct.verify(dataset, anchor=anchor)
        if as_json:
            _print_json(
                {
                    "verified": True,
                    "datasets": list(report.datasets),
                    "records": report.records,
                    "signatures": report.signatures,
                    "signed_records": report.signed,
                    "anchored": report.anchored,
                    "findings": list(report.findings),
                }
            )
        else:
            typer.echo(str(report))


@ledger_app.command("anchor")
def ledger_anchor(
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Where to write the checkpoint (JSON).", show_default=False
        ),
    ],
    ledger: LedgerOption = None,
) -> None:
    """Verify the ledger and write a checkpoint of every dataset's head, to keep outside the database.

    A later 'ledger verify --anchor FILE' fails if records were removed, rewritten or rolled back since.
    """
    from dp_pipeline.accounting.verify import anchor

    with _errors(), _accountant(ledger, read_only=True) as acct:
        checkpoint = anchor(acct.store)
        try:
            output.write_text(json.dumps(checkpoint, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as err:
            raise _CommandError(f"cannot write {output}: {err.strerror}", EXIT_INVALID) from None
        typer.echo(f"anchor written to {output}: {len(checkpoint['datasets'])} dataset(s)")


@ledger_app.command("grant")
def ledger_grant(
    role: Annotated[
        str, typer.Option("--role", metavar="ROLE", help="The writing role.", show_default=False)
    ],
    apply: Annotated[
        bool, typer.Option("--apply", help="Run the statements (as the tables' owner).")
    ] = False,
    ledger: LedgerOption = None,
) -> None:
    """PostgreSQL: print (or --apply) the grants of a least-privilege writing role.

    The role may read, insert records and move a dataset's head as the accountant does; it does not own
    the tables, so it cannot disable their triggers. See the README, "Tamper evidence".
    """
    from dp_pipeline.accounting.ledger.privileges import grant_statements

    with _errors():
        statements = grant_statements(role)
        if not apply:
            typer.echo(";\n".join(statements) + ";")
            return
        with _accountant(ledger) as acct:
            if getattr(acct.store, "dialect", None) != "postgresql":
                raise _CommandError("'ledger grant --apply' needs a PostgreSQL ledger", EXIT_INVALID)
            acct.store.grant_writer(role)
        typer.echo(f"granted the ledger's writer privileges to {role}")


@ledger_app.command("cancel")
def ledger_cancel(
    dataset: DatasetArgument,
    key: Annotated[str, typer.Argument(metavar="KEY", help="The reservation's idempotency key.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded); required.", show_default=False)],
    actor: Annotated[str | None, typer.Option("--actor", help="Who (recorded; default user@host).")] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Return an open reservation to the budget, e.g. of a worker that died before reading data.

    Only for an attempt that certainly read no data ('ledger release' is the older name of this command).
    """
    with _errors(), _accountant(ledger) as acct:
        r = acct.cancel(dataset, key, reason, actor=actor)
        remaining = acct.remaining(dataset)
        if as_json:
            _print_json(
                {
                    "dataset": r.dataset,
                    "key": r.key,
                    "seq": r.seq,
                    "status": r.status,
                    "cost": r.cost.to_dict(),
                    "remaining": _report_json(remaining),
                }
            )
        else:
            status = "cancelled" if r.status == "released" else r.status
            typer.echo(
                f"reservation {r.key!r} (seq {r.seq}, {_amount(r.cost)}) on {r.dataset!r} is {status}; "
                f"remaining {_amount(remaining.guarantee)}"
            )


ledger_app.command("release", hidden=True, help="Older name of 'ledger cancel'.")(ledger_cancel)


# ------------------------------------------------------------------------------------------------ plans

_MECHANISMS = (
    "laplace",
    "gaussian",
    "staircase",
    "randomized_response",
    "bounded_laplace",
    "bounded_staircase",
)
_ITEM_KEYS = {"group_size", "label"}


def _mechanism(name: str, params: dict[str, Any]) -> Callable[[], Any]:
    from dp_pipeline import mechanisms as m

    if name == "randomized_response":
        if "categories" not in params:
            return lambda: m.BinaryRandomizedResponse(**params)
        categories = params["categories"]
        if isinstance(categories, int) and not isinstance(categories, bool):
            params = {**params, "categories": list(range(categories))}
        return lambda: m.KRandomizedResponse(**params)
    if name == "gaussian" and "mu" in params:
        return lambda: m.Gaussian.from_mu(**params)
    classes: dict[str, Any] = {
        "laplace": m.Laplace,
        "gaussian": m.Gaussian,
        "staircase": m.Staircase,
        "bounded_laplace": m.BoundedLaplace,
        "bounded_staircase": m.BoundedStaircase,
    }
    return lambda: classes[name](**params)


def _plan_item(item: Any, where: str) -> tuple[PrivacyEvent, int, str | None]:
    """One plan entry as (event, group size, label)."""
    if not isinstance(item, dict):
        raise _CommandError(f"{where} must be a JSON object, got a JSON {_json_kind(item)}", EXIT_INVALID)
    params = {k: v for k, v in item.items() if k not in _ITEM_KEYS and k != "mechanism"}
    k = item.get("group_size", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise _CommandError(
            f"{where}: 'group_size' must be a positive integer, got {json.dumps(k)}", EXIT_INVALID
        )
    label = item.get("label")
    if label is not None and not isinstance(label, str):
        raise _CommandError(f"{where}: 'label' must be a string", EXIT_INVALID)
    try:
        if "mechanism" in item:
            name = item["mechanism"]
            if name not in _MECHANISMS:
                raise _CommandError(
                    f"{where}: unknown mechanism {json.dumps(name)}; one of {', '.join(_MECHANISMS)}",
                    EXIT_INVALID,
                )
            return _mechanism(name, params)().event, k, label
        if set(params) == {"mu"}:
            return PrivacyEvent(kind="guarantee", guarantee=GaussianDP(params["mu"])), k, label
        if "epsilon" in params and set(params) <= {"epsilon", "delta"}:
            g: Guarantee = (
                PureDP(params["epsilon"])
                if "delta" not in params
                else ApproxDP(params["epsilon"], params["delta"])
            )
            return PrivacyEvent(kind="guarantee", guarantee=g), k, label
    except InvalidParameterError as err:
        raise _CommandError(f"{where}: {err}", EXIT_INVALID) from None
    raise _CommandError(
        f"{where}: expected a 'mechanism' with its parameters, 'epsilon' (and 'delta'), or 'mu'; got keys "
        f"{sorted(item)}",
        EXIT_INVALID,
    )


def _json_kind(value: Any) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number")


def _read_plan(source: str) -> list[Any]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as err:
        raise _CommandError(f"cannot read the plan {source}: {err.strerror or err}", EXIT_INVALID) from None
    except UnicodeDecodeError as err:
        raise _CommandError(
            f"the plan {source} is not UTF-8 text (byte {err.start} cannot be decoded)", EXIT_INVALID
        ) from None

    def no_constants(name: str) -> NoReturn:
        raise ValueError(f"{name} is not a number")

    try:
        data = json.loads(text, parse_constant=no_constants)
    except ValueError as err:
        raise _CommandError(f"the plan {source} is not valid JSON: {err}", EXIT_INVALID) from None
    except RecursionError:
        raise _CommandError(f"the plan {source} is nested too deeply to be a plan", EXIT_INVALID) from None
    if not isinstance(data, list) or not data:
        raise _CommandError(f"the plan {source} must be a non-empty JSON list of releases", EXIT_INVALID)
    return data


@plan_app.command("check")
def plan_check(
    dataset: DatasetArgument,
    plan_file: Annotated[
        str, typer.Argument(metavar="PLAN.json", help="A JSON list of releases ('-': standard input).")
    ],
    delta: Annotated[
        str | None,
        typer.Option(
            "--delta",
            metavar="FLOAT",
            help="Read the plan's ε at this δ ((ε, δ) budgets; default 0 for a pure plan, else the δ left).",
            show_default=False,
        ),
    ] = None,
    partition: Annotated[
        list[str] | None,
        typer.Option(
            "--partition",
            metavar="NAME",
            help="On a partitioned dataset, a partition the plan reads (repeat for several; none: the "
            "whole dataset).",
            show_default=False,
        ),
    ] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Whether a plan fits what remains of a dataset's budget, at its tight total; exit 1 if not.

    PLAN.json is a JSON list of releases (not a DAG folder: for DAGs use the DAG check,
    'airflow dp-pipeline check-dags'). Each item is one of:

      {"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}
      {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-6, "sensitivity": 1}
      {"mechanism": "gaussian", "mu": 0.5, "sensitivity": 1}
      {"mechanism": "randomized_response", "epsilon": 1, "categories": 3}
      {"epsilon": 0.5, "delta": 1e-6}    a release known by its guarantee
      {"mu": 0.5}                        a μ-GDP release

    Mechanisms: laplace, gaussian, staircase, randomized_response, bounded_laplace, bounded_staircase.
    Their other keys are the mechanism's parameters ("categories": a list or a count, for k-ary RR).
    Every item may add "group_size" (k ≥ 1) and "label".

    On a partitioned dataset, --partition names the partitions the plan reads (each is charged the plan;
    the check composes the largest partition totals as spending it would).
    """
    from dp_pipeline.accounting.composition import group_plan
    from dp_pipeline.accounting.request import Request

    with _errors():
        items = [_plan_item(item, f"plan item {i}") for i, item in enumerate(_read_plan(plan_file), start=1)]
        plan_delta = None if delta is None else _number(delta, "--delta")
        events, k = group_plan([(e, size) for e, size, _ in items])
        partitions = partition or None
        with _accountant(ledger) as acct:
            cost = acct.plan_cost(dataset, events, k, delta=plan_delta, partition=partitions)
            fits = acct.quote(dataset, Request.plan(events, k, delta=plan_delta, partition=partitions)).fits
            remaining = acct.remaining(dataset)
            spent = acct.partitions(dataset) if partitions else {}
        result = {
            "dataset": dataset,
            "partitions": list(partition or ()),
            "partition_spent": {
                name: _report_json(spent[name]) if name in spent else None for name in partition or ()
            },
            "fits": fits,
            "cost": _report_json(cost),
            "remaining": _report_json(remaining),
            "budget": cost.budget.to_dict(),
            "relation": cost.relation,
            "releases": [
                {"index": i, "label": label, "group_size": size, "event": e.to_dict()}
                for i, (e, size, label) in enumerate(items, start=1)
            ],
        }
        if as_json:
            _print_json(result)
        else:
            table = Table(title=f"plan for {dataset!r}", title_justify="left")
            for name in ("#", "release", "label", "k", "guarantee", "relation"):
                table.add_column(name, overflow="fold")
            for i, (e, size, label) in enumerate(items, start=1):
                shown = e.relation or f"{cost.relation} (dataset's)"
                table.add_row(str(i), e.kind, printable(label or ""), str(size), _amount(e.guarantee), shown)
            console = _console()
            console.print(table)
            console.print(f"plan total: {_amount(cost.guarantee)} ({_RULES.get(cost.method, cost.method)})")
            console.print(f"relation:   {cost.relation} (the dataset's neighbouring relation)")
            for name in partitions or ():
                before = _amount(spent[name].guarantee) if name in spent else "nothing (a new partition)"
                console.print(f"partition:  {printable(name)}, spent so far {before}")
            console.print(f"remaining:  {_amount(remaining.guarantee)}")
            console.print("fits: yes" if fits else "fits: no")
        if not fits:
            where = f" on the partitions {partitions}" if partitions else ""
            typer.echo(
                printable(
                    f"error: the plan ({_amount(cost.guarantee)}){where} does not fit what remains of "
                    f"{dataset!r} ({_amount(remaining.guarantee)})"
                ),
                err=True,
            )
            raise typer.Exit(EXIT_REFUSED)


# ------------------------------------------------------------------------------------------------ allocation


def _allocated_plan_item(allocated: Any) -> dict[str, Any]:
    """An allocated release as an item of a plan file, which ``plan check`` reads back."""
    release, m = allocated.release, allocated.mechanism
    item: dict[str, Any] = {"mechanism": release.mechanism}
    if release.mechanism == "gaussian":
        item.update(mu=m.mu, sensitivity=m.sensitivity)
    elif release.mechanism == "laplace":
        item.update(epsilon=m.epsilon, sensitivity=m.sensitivity)
    else:
        item["epsilon"] = m.epsilon
        if hasattr(m, "categories"):
            item["categories"] = list(m.categories)
    item["group_size"] = release.group_size
    if release.label is not None:
        item["label"] = release.label
    return item


@plan_app.command("allocate")
def plan_allocate(
    dataset: DatasetArgument,
    plan_file: Annotated[
        str,
        typer.Argument(metavar="PLAN.json", help="A JSON list of planned releases ('-': standard input)."),
    ],
    against: Annotated[
        str,
        typer.Option(
            "--against",
            metavar="remaining|budget",
            help="Fit what remains of the budget (default) or the whole budget.",
        ),
    ] = "remaining",
    ledger: LedgerOption = None,
) -> None:
    """Calibrate the noise of planned releases to a dataset's budget; JSON in, JSON out.

    Finds the least noise whose composition as one plan fits what remains of the budget (the accountant's
    plan check, as 'spend_plan' charges it). PLAN.json is a JSON list of releases, each one of:

      {"mechanism": "gaussian", "sensitivity": 1}
      {"mechanism": "laplace", "sensitivity": 1, "weight": 2, "label": "sum"}
      {"mechanism": "randomized_response", "categories": 3, "group_size": 2}

    "weight" w (default 1): the release gets w times the noise precision (1/variance) of the others.
    "categories" (randomized response only): 2 (binary, the default), a count or a list. Optional:
    "group_size" (k ≥ 1) and "label". The output lists each release's calibrated noise ("std", "event")
    and, under "plan", the calibrated releases as a plan file that 'plan check' reads. Nothing is charged.
    """
    from dp_pipeline.allocation import PlannedRelease, allocate

    with _errors():
        if against not in ("remaining", "budget"):
            raise _CommandError(f"--against must be 'remaining' or 'budget', got {against!r}", EXIT_INVALID)
        side: Literal["remaining", "budget"] = "budget" if against == "budget" else "remaining"
        releases = []
        for i, item in enumerate(_read_plan(plan_file), start=1):
            try:
                releases.append(PlannedRelease.from_dict(item))
            except InvalidParameterError as err:
                raise _CommandError(f"plan item {i}: {err}", EXIT_INVALID) from None
        with _accountant(ledger) as acct:
            allocation = allocate(releases, accountant=acct, dataset=dataset, against=side)
        _print_json(
            {
                "dataset": dataset,
                "against": against,
                "target": allocation.target.to_dict(),
                "cost": {"guarantee": allocation.cost.to_dict(), "method": allocation.method},
                "scale": allocation.scale,
                "releases": [
                    {
                        "index": i,
                        "label": a.release.label,
                        "mechanism": a.release.mechanism,
                        "weight": float(a.release.weight),
                        "group_size": a.release.group_size,
                        "std": a.std,
                        "event": a.event.to_dict(),
                    }
                    for i, a in enumerate(allocation, start=1)
                ],
                "plan": [_allocated_plan_item(a) for a in allocation],
            }
        )


if __name__ == "__main__":  # python -m dp_pipeline.cli
    app()
