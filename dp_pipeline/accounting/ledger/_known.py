"""The ledgers this user has created, so that a ledger that disappears is not silently created again.

``PrivacyAccountant(url)`` creates a ledger at a URL that has never held one (the first run of a pipeline),
and refuses to create one where a ledger existed before: a day-2 job whose ledger file was deleted must
fail, not start over on a fresh, full budget. Which URLs held a ledger is recorded here, one line per
ledger, in ``$DP_PIPELINE_STATE_DIR/known-ledgers`` (default ``$XDG_STATE_HOME/dp-pipeline``, else
``~/.local/state/dp-pipeline``).

This is a safety net for one user on one machine, not a guarantee: another machine, another user or a
removed state directory does not know the ledger. Code that must never create a ledger (the Airflow hook,
the dashboard, the command except ``ledger init``) opens with ``create=False``; anchors (see
:meth:`~dp_pipeline.accounting.anchor`) catch a replaced ledger everywhere.
Recording is best effort: an unwritable state directory only loses the net.

Ledgers are listed, and looked up, by :func:`~dp_pipeline.accounting.ledger._urls.ledger_identity`: a
ledger created at ``postgresql://127.0.0.1/db`` is known at ``postgres://LOCALHOST:5432/db?sslmode=require``
too. Lines written by earlier versions (a URL as given, password hidden) are normalised when read.
"""

from __future__ import annotations

import os
from pathlib import Path

from dp_pipeline.accounting.ledger._urls import ledger_identity

__all__ = ["STATE_ENV", "known", "registry_path", "remember"]

STATE_ENV = "DP_PIPELINE_STATE_DIR"


def registry_path() -> Path:
    """Where the known ledgers are listed."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit) / "known-ledgers"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "dp-pipeline" / "known-ledgers"


def known(identity: str) -> bool:
    """Whether a ledger was created at ``identity`` (a resolved file path, or a URL: compared by
    :func:`~dp_pipeline.accounting.ledger._urls.ledger_identity`)."""
    wanted = ledger_identity(identity)
    try:
        with registry_path().open(encoding="utf-8") as lines:
            return any(ledger_identity(line.rstrip("\n")) == wanted for line in lines)
    except (OSError, UnicodeDecodeError):
        return False


def remember(identity: str) -> None:
    """Record that a ledger was created at ``identity`` (best effort; one short append)."""
    identity = ledger_identity(identity)
    if "\n" in identity or known(identity):
        return
    path = registry_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as lines:
            lines.write(identity + "\n")
    except OSError:
        pass
