"""The budget dashboard: a small read-only FastAPI app (HTML page with inline SVG charts, and JSON).

Routes (all ``GET``; the app has no route that writes to the ledger):

- ``/``: per dataset the budget, spent, remaining, the composition method, the history (with releases paid
  from a reservation, the partitions each record named, and ``fast`` for a release whose noise was drawn
  with ``fast_rng``, not floating-point safe), with charts, each DAG run's reservation
  (its partition, reserved, held, paid, and its label: with a budget share, the share and each task's
  calibrated noise), and for a partitioned dataset what each partition has spent;
- ``/api/datasets``: the same numbers as JSON; ``/api/datasets/{dataset}`` adds the history and the runs.

The page loads nothing from elsewhere (no CDN, no script): the charts are SVG drawn on the server.

The app reads the ledger through :func:`ledger_accountant`, which keeps one read-only accountant per process,
ledger URL and signing key, so that requests do not open the ledger again; a connection whose URL or
signing key changes gets an accountant of its own.
"""

from __future__ import annotations

import hashlib
import html
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting import partition_reading, partition_spending
from dp_pipeline.accounting.ledger import redact_text
from dp_pipeline.airflow.hooks import PrivacyLedgerHook
from dp_pipeline.airflow.reports import (
    DatasetSummary,
    HistoryRow,
    RunReservation,
    amount,
    format_guarantee,
    format_number,
    summarize,
    summarize_all,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from dp_pipeline.accounting import BudgetReport, PrivacyAccountant

__all__ = ["create_app", "ledger_accountant", "render_page"]

_ACCOUNTANTS: dict[tuple[int, str, str | None], PrivacyAccountant] = {}
_ACCOUNTANTS_LOCK = threading.Lock()


def ledger_accountant(ledger_conn_id: str) -> PrivacyAccountant:
    """The dashboard's read-only accountant of a ledger Connection, opened once per process, ledger URL and
    signing key.

    The Connection is read on every call, so an edited Connection takes effect at the next request: two
    Connections (or two versions of one) with the same URL but different signing keys never share an
    accountant, since each verifies the ledger's signatures with its own key. The key is held only by the
    accountant; the cache is keyed by its SHA-256 digest. Each process (the API server's workers) opens its
    own.
    """
    hook = PrivacyLedgerHook(ledger_conn_id, read_only=True)
    url, key = hook.ledger_settings()
    digest = None if key is None else hashlib.sha256(key.encode()).hexdigest()
    cache_key = (os.getpid(), url, digest)
    with _ACCOUNTANTS_LOCK:
        if cache_key not in _ACCOUNTANTS:
            _ACCOUNTANTS[cache_key] = hook.get_accountant()
        return _ACCOUNTANTS[cache_key]

_STATUS_COLOURS = {"committed": "#6f42c1", "open": "#f0ad4e", "released": "#adb5bd"}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem;color:#212529}
h1{font-size:1.4rem;margin:0 0 .25rem} h2{font-size:1.1rem;margin:1.8rem 0 .4rem}
h3{font-size:1rem;margin:1rem 0 .3rem}
p.note{color:#6c757d;margin:.2rem 0 1rem;font-size:.9rem}
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.9rem}
th,td{border-bottom:1px solid #dee2e6;padding:.3rem .7rem;text-align:left}
th{background:#f8f9fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
.status-committed{color:#6f42c1}.status-released{color:#6c757d}.status-open{color:#b7791f}
.empty{color:#6c757d;font-style:italic}
.sampler-fast{color:#b02a37;font-weight:600}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _overview_svg(summaries: Sequence[DatasetSummary]) -> str:
    """One horizontal bar per dataset: the spent share of its budget, and what remains."""
    width, bar_h, gap, left = 640, 22, 12, 150
    height = max(1, len(summaries)) * (bar_h + gap) + 20
    parts = [
        f'<svg id="budget-overview" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="Spent share of each budget">'
    ]
    span = width - left - 90
    for index, summary in enumerate(summaries):
        y = 10 + index * (bar_h + gap)
        total = amount(summary.budget) or 0.0
        spent = amount(summary.spent) or 0.0
        share = 0.0 if total <= 0 else min(1.0, spent / total)
        parts.append(
            f'<text x="0" y="{y + 15}" font-size="13">{_e(summary.dataset)}</text>'
            f'<rect x="{left}" y="{y}" width="{span}" height="{bar_h}" fill="#e9ecef"/>'
            f'<rect class="spent-bar" x="{left}" y="{y}" width="{span * share:.1f}" height="{bar_h}" '
            f'fill="#6f42c1"><title>{_e(summary.dataset)}: spent {summary.unit}='
            f"{format_number(spent)} of {format_number(total)}</title></rect>"
            f'<text x="{left + span + 6}" y="{y + 15}" font-size="12">{share * 100:.0f}% spent</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _history_svg(summary: DatasetSummary) -> str:
    """One bar per ledger record, its height the record's cost, coloured by how the record ended."""
    rows = [row for row in summary.history if row.is_charge and row.cost is not None]
    width, height, pad = 640, 150, 24
    parts = [
        f'<svg class="history-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="Cost of each ledger record of {_e(summary.dataset)}">'
    ]
    if not rows:
        parts.append(f'<text x="{pad}" y="{height / 2}" font-size="13" fill="#6c757d">no records yet</text>')
    else:
        peak = max(amount(row.cost) or 0.0 for row in rows) or 1.0
        slot = (width - 2 * pad) / len(rows)
        bar_w = max(2.0, min(40.0, slot * 0.7))
        base = height - pad
        parts.append(f'<line x1="{pad}" y1="{base}" x2="{width - pad}" y2="{base}" stroke="#adb5bd"/>')
        for index, row in enumerate(rows):
            value = amount(row.cost) or 0.0
            bar_h = (base - pad) * value / peak
            x = pad + index * slot + (slot - bar_w) / 2
            colour = _STATUS_COLOURS.get(row.status, "#495057")
            parts.append(
                f'<rect x="{x:.1f}" y="{base - bar_h:.1f}" width="{bar_w:.1f}" height="{bar_h:.1f}" '
                f'fill="{colour}"><title>{_e(row.label)} ({_e(row.status)}): '
                f"{_e(format_guarantee(row.cost))}</title></rect>"
            )
        parts.append(
            f'<text x="{pad}" y="{pad - 8}" font-size="11" fill="#6c757d">cost per record, peak '
            f"{summary.unit}={format_number(peak)}; purple committed, amber open, grey released</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _history_table(rows: Sequence[HistoryRow]) -> str:
    if not rows:
        return '<p class="empty">No records.</p>'
    body = "".join(
        f'<tr><td>{_e(row.time)}</td><td>{_e(row.kind)}</td><td>{_e(row.label)}</td>'
        f'<td><code>{_e(row.key)}</code></td>'
        f'<td class="num">{"" if row.group_size is None else row.group_size}</td>'
        f"<td>{_e(format_guarantee(row.cost))}</td><td>{_e(_partitions(row.partitions))}</td>"
        f'<td class="status-{_e(row.status)}">{_e(row.status)}</td>{_sampler_cell(row.sampler)}</tr>'
        for row in rows
    )
    note = _FAST_NOTE if any(row.sampler for row in rows) else ""
    return (
        "<table><thead><tr><th>time</th><th>record</th><th>label</th><th>key</th><th>group size</th>"
        "<th>cost</th><th>partitions</th>"
        f"<th>status</th><th>sampler</th></tr></thead><tbody>{body}</tbody></table>{note}"
    )


_FAST_NOTE = (
    '<p class="note fast-sampler">sampler <strong>fast</strong>: noise drawn with <code>fast_rng</code>, '
    "whose floating-point samplers are not floating-point safe; the cost charged does not bound what those "
    "releases reveal.</p>"
)


def _sampler_cell(sampler: str | None) -> str:
    """The sampler marker of a history row: ``fast`` (highlighted) or empty."""
    if sampler is None:
        return "<td></td>"
    return f'<td class="sampler-{_e(sampler)}" title="not floating-point safe">{_e(sampler)}</td>'



def _runs_table(runs: Sequence[RunReservation]) -> str:
    """Each DAG run's reservation: what its setup reserved, what it holds, what its tasks paid from it, and
    its plan (with a budget share: the share and each task's calibrated noise)."""
    if not runs:
        return ""
    body = "".join(
        f'<tr><td><code>{_e(run.key)}</code></td><td class="partition">{_e(_partitions(run.partitions))}</td>'
        f'<td class="num">{_e(format_guarantee(run.reserved))}</td>'
        f'<td class="num">{_e(format_guarantee(run.held))}</td>'
        f'<td class="num">{_e(format_guarantee(run.paid))}</td><td class="num">{run.payments}</td>'
        f'<td>{_e(run.status)}</td><td class="plan">{_e(run.label)}</td></tr>'
        for run in runs
    )
    return (
        '<h3>Run reservations</h3><table class="runs"><thead><tr><th>run</th><th>partition</th>'
        "<th>reserved</th><th>held</th><th>paid</th><th>payments</th><th>status</th>"
        "<th>plan (share, calibrated noise)</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _partitions(names: Sequence[str]) -> str:
    """The partitions a record named, or ``-`` for the whole dataset."""
    return ", ".join(names) if names else "-"


def _partition_table(spent: Mapping[str, BudgetReport]) -> str:
    """What each partition of a partitioned dataset has spent (empty for a dataset that is not)."""
    if not spent:
        return ""
    rows = "".join(
        f'<tr data-partition="{_e(name)}"><td>{_e(name)}</td>'
        f'<td class="num">{_e(format_guarantee(report.guarantee))}</td><td>{_e(report.method)}</td></tr>'
        for name, report in spent.items()
    )
    first = next(iter(spent.values()))
    reading = partition_reading(first.relation, first.partitions)
    return (
        f'<table class="partitions"><caption>per partition ({_e(reading)})</caption><thead><tr>'
        f"<th>partition</th><th>spent</th><th>method</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _commits(summary: DatasetSummary) -> int:
    return sum(1 for row in summary.history if row.is_charge and row.status == "committed")


def render_page(
    summaries: Sequence[DatasetSummary],
    *,
    error: str | None = None,
    partitions: Mapping[str, Mapping[str, BudgetReport]] | None = None,
) -> str:
    """The dashboard HTML for these summaries (a complete, self-contained document); ``partitions`` maps a
    partitioned dataset to what each of its partitions has spent
    (:func:`~dp_pipeline.accounting.partition_spending`)."""
    spent_by_partition = partitions or {}
    if error:
        content = f'<p class="empty">The ledger cannot be read: {_e(error)}</p>'
    elif not summaries:
        content = '<p class="empty">No dataset has a budget on this ledger yet.</p>'
    else:
        rows = "".join(
            f'<tr data-dataset="{_e(s.dataset)}"><td>{_e(s.dataset)}</td><td>{s.unit}</td>'
            f'<td class="num budget">{_e(format_guarantee(s.budget))}</td>'
            f'<td class="num spent">{_e(format_guarantee(s.spent))}</td>'
            f'<td class="num remaining">{_e(format_guarantee(s.remaining))}</td>'
            f"<td>{_e(s.method)}</td>"
            f'<td class="num">{_commits(s)}</td></tr>'
            for s in summaries
        )
        sections = "".join(
            f'<section id="dataset-{_e(s.dataset)}"><h2>{_e(s.dataset)}</h2>'
            f"<p>budget {_e(format_guarantee(s.budget))} · spent {_e(format_guarantee(s.spent))} "
            f"({_e(s.method)}) · remaining {_e(format_guarantee(s.remaining))}</p>"
            f"{_partition_table(spent_by_partition.get(s.dataset, {}))}"
            f"{_history_svg(s)}{_runs_table(s.runs)}{_history_table(s.history)}</section>"
            for s in summaries
        )
        content = (
            '<table id="budgets"><thead><tr><th>dataset</th><th>unit</th><th>budget</th><th>spent</th>'
            "<th>remaining</th><th>method</th><th>commits</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{_overview_svg(summaries)}{sections}"
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Privacy budgets</title><style>{_CSS}</style></head><body>"
        "<h1>Privacy budgets</h1>"
        '<p class="note">Read-only view of the dp-pipeline ledger. Budgets are changed with the '
        "<code>dp-pipeline</code> command, never from this page.</p>"
        f"{content}</body></html>"
    )


def _summary_json(summary: DatasetSummary, *, history: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "dataset": summary.dataset,
        "unit": summary.unit,
        "budget": summary.budget.to_dict(),
        "spent": summary.spent.to_dict(),
        "remaining": summary.remaining.to_dict(),
        "method": summary.method,
    }
    if history:
        data["runs"] = [
            {
                "key": run.key,
                "reserved": run.reserved.to_dict(),
                "held": run.held.to_dict(),
                "paid": None if run.paid is None else run.paid.to_dict(),
                "payments": run.payments,
                "status": run.status,
                "label": run.label,
                "partitions": list(run.partitions),
            }
            for run in summary.runs
        ]
        data["history"] = [
            {
                "time": row.time,
                "kind": row.kind,
                "label": row.label,
                "key": row.key,
                "group_size": row.group_size,
                "cost": None if row.cost is None else row.cost.to_dict(),
                "status": row.status,
                "partitions": list(row.partitions),
                "sampler": row.sampler,
            }
            for row in summary.history
        ]
    return data


def create_app(
    get_accountant: Callable[[], PrivacyAccountant], *, require_auth: bool = False
) -> FastAPI:
    """The dashboard app.

    Parameters
    ----------
    get_accountant : callable
        Returns the ledger's accountant; called on every request (so a ledger that is down shows as an
        error on the page instead of breaking the app).
    require_auth : bool, default False
        Require an authenticated Airflow user (Airflow's JWT, as the Airflow UI sends it) for every route.
        Only possible inside the Airflow API server, where the auth manager exists.

    Returns
    -------
    FastAPI
        Every route is ``GET``; there is no route that writes to the ledger.
    """
    from fastapi import Depends, FastAPI, HTTPException
    from fastapi.responses import HTMLResponse

    dependencies = []
    if require_auth:
        from airflow.api_fastapi.core_api.security import requires_authenticated

        dependencies.append(Depends(requires_authenticated()))
    app = FastAPI(
        title="dp-pipeline privacy budgets",
        description="Read-only view of the privacy ledger.",
        dependencies=dependencies,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        try:
            accountant = get_accountant()
            summaries = summarize_all(accountant)
            partitions = {s.dataset: partition_spending(accountant.store, s.dataset) for s in summaries}
        except Exception as exc:
            error = redact_text(f"{type(exc).__name__}: {exc}")  # a driver's message may quote the URL
            return HTMLResponse(render_page([], error=error), status_code=503)
        return HTMLResponse(render_page(summaries, partitions=partitions))

    @app.get("/api/datasets")
    def datasets() -> list[dict[str, Any]]:
        return [_summary_json(s, history=False) for s in summarize_all(get_accountant())]

    @app.get("/api/datasets/{dataset}")
    def dataset(dataset: str) -> dict[str, Any]:
        accountant = get_accountant()
        if dataset not in set(accountant.datasets()):
            raise HTTPException(status_code=404, detail=f"no budget for dataset {dataset!r}")
        return _summary_json(summarize(accountant, dataset), history=True)

    return app
