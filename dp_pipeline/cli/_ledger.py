"""``dp-pipeline ledger``: create, verify, anchor, grant and cancel on the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dp_pipeline.accounting.ledger import redact_url
from dp_pipeline.cli._app import (
    EXIT_INVALID,
    DatasetArgument,
    JsonOption,
    LedgerOption,
    _accountant,
    _CommandError,
    _errors,
    _print_json,
    _typer,
)
from dp_pipeline.cli._shapes import _amount, _report_json
from dp_pipeline.exceptions import printable

ledger_app = _typer("Create, verify and repair the ledger.")


@ledger_app.command("init")
def ledger_init(ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """Create the ledger (or check that an existing one is readable); nothing else is written."""
    with _errors(), _accountant(ledger, create=True) as acct:
        store = acct.store
        revision = store.schema_revision() if hasattr(store, "schema_revision") else None
        shown = printable(redact_url(store.url))
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
    from dp_pipeline.accounting import anchor

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
    from dp_pipeline.accounting.ledger._privileges import grant_statements

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

    Only for an attempt that certainly read no data.
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

