"""Releases drawn with ``fast_rng`` (not floating-point safe) on the Airflow side: a task's release paid
through ``dp`` is recorded with ``sampler="fast"``, and the dashboard's history (page and JSON) shows it."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from tests.airflow_plugin._helpers import run_dag, states

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::dp_pipeline.exceptions.FastSamplerWarning"),
]


def _frame() -> Any:
    import pandas as pd

    return pd.DataFrame({"age": [float(a) for a in range(18, 78)]})


def _filled() -> Any:
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.frames import dp_count
    from dp_pipeline.mechanisms import fast_rng

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(2.0))
    _frame().pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d", random_state=fast_rng(1))
    _frame().pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d")
    return acct


def test_the_dashboard_history_shows_fast_releases() -> None:
    from fastapi.testclient import TestClient

    from dp_pipeline.airflow.dashboard import create_app

    client = TestClient(create_app(_filled))
    page = client.get("/").text
    rows = re.findall(r"<tr><td>[^<]*</td><td>reserve</td><td>dp_count[^<]*</td>.*?</tr>", page)
    assert len(rows) == 2
    assert '<td class="sampler-fast"' in rows[0] and "sampler-fast" not in rows[1]
    assert "not floating-point safe" in page
    history = client.get("/api/datasets/d").json()["history"]
    assert [row["sampler"] for row in history if row["kind"] == "reserve"] == ["fast", None]


def test_the_dashboard_has_no_fast_note_without_fast_releases() -> None:
    from fastapi.testclient import TestClient

    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow.dashboard import create_app

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(2.0))
    acct.spend("d", PureDP(0.5))
    page = TestClient(create_app(lambda: acct)).get("/").text
    assert "fast-sampler" not in page and 'class="sampler-fast"' not in page


def test_a_tasks_release_drawn_with_fast_rng_is_paid_marked(ledger) -> None:
    """An operator's callable releases a count through ``dp`` with ``random_state=fast_rng(...)``: the
    payment under the attempt's reservation carries the marker, at the price of the secure release."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.frames import dp_count
    from dp_pipeline.mechanisms import fast_rng

    ledger.set_budget("d", PureDP(2.0))

    def fast(dp: Any) -> float:
        frame = _frame().pipe(dp_count, epsilon=0.25, accountant=dp, dataset="d", random_state=fast_rng(5))
        return float(frame["value"])

    def secure(dp: Any) -> float:
        return float(_frame().pipe(dp_count, epsilon=0.25, accountant=dp, dataset="d")["value"])

    with DAG("dp_fast_marker", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
        for name, fn in (("fast", fast), ("secure", secure)):
            PrivacyBudgetOperator(task_id=name, dataset="d", mechanism=PureDP(0.5), python_callable=fn)

    assert states(run_dag(dag)) == {"fast": "success", "secure": "success"}
    paid = {e.paid_from.split("/")[1]: e for e in ledger.history("d") if e.paid_from is not None}
    assert paid["fast"].sampler == "fast" and paid["secure"].sampler is None
    assert paid["fast"].cost == paid["secure"].cost
    assert ledger.spent("d").epsilon == pytest.approx(1.0)
    ledger.verify()
