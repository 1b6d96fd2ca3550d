"""What every ``dp-pipeline`` command shares: the root Typer app, the ``--ledger`` and ``--json`` options,
opening the ledger, and turning every error into one line on stderr and an exit status (1: the ledger refused
or failed; 2: invalid input). Private to :mod:`dp_pipeline.cli`."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

try:
    import typer
    from rich.console import Console
    from typer.core import TyperGroup
except ImportError as _err:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f'the dp-pipeline command needs Typer and Rich: pip install "dp-pipeline[cli]" ({_err})'
    ) from None

from dp_pipeline import __version__
from dp_pipeline.accounting.ledger import redact_text, redact_url
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    UnknownDatasetError,
    UnsupportedCompositionError,
    printable,
)

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


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"dp-pipeline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """The root command's own options; ``--version`` is handled by its eager callback."""


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
    from dp_pipeline.accounting import PrivacyAccountant

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
