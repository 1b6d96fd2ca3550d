"""A run's reservation is split into shares, one per task attempt, on real Airflow 3.3 (SQLite and
PostgreSQL ledgers): every release of a run is paid from the share of the attempt that makes it, each share
capped at the attempt's declared cost, and ``verify()`` checks the per-share sums.

The released ε is counted independently of the library: each task appends the ε of every release it
actually made to a file (after the noisy value exists), and the test sums them (pure-DP Laplace releases
compose by addition)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_plugin._helpers import run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
EPS = 0.25


def _released(marker: Path) -> list[float]:
    return [float(line) for line in marker.read_text().split()] if marker.exists() else []


def _greedy_dag(dag_id: str, marker: Path, *, per_run: bool) -> Any:
    """Two tasks on ``visits``, each declaring ε = 0.25:

    - ``own_noise``: a guarded PythonOperator written the usual way (``def f(**context)``) that adds its
      own Laplace noise (the ledger cannot see that release; its declaration is what pays for it);
    - ``greedy``: a guarded PythonOperator that pays through ``dp`` and releases two counts of ε = 0.25,
      twice its declared cost.
    """
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow import dp_guard, run_budget
    from dp_pipeline.frames import dp_count
    from dp_pipeline.mechanisms import Laplace

    def note(epsilon: float) -> None:
        with marker.open("a") as handle:
            handle.write(f"{epsilon}\n")

    def own_noise(**context: Any) -> float:
        value = Laplace(epsilon=EPS, sensitivity=1.0).randomize(120.0)
        note(EPS)
        return float(value)

    def greedy(dp: Any) -> list[float]:
        import pandas as pd

        frame = pd.DataFrame({"visit": range(120)})
        out = []
        for _ in range(2):
            out.append(float(frame.pipe(dp_count, epsilon=EPS, accountant=dp, dataset="visits")["value"]))
            note(EPS)
        return out

    declared = Laplace(epsilon=EPS, sensitivity=1.0)
    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        first = PythonOperator(
            task_id="own_noise", python_callable=own_noise, pre_execute=dp_guard("visits", declared)
        )
        second = PythonOperator(
            task_id="greedy", python_callable=greedy, pre_execute=dp_guard("visits", declared.event)
        )
        first >> second
    if per_run:
        run_budget(dag)
    return dag


@pytest.mark.parametrize("per_run", [True, False], ids=["run_budget", "per_attempt"])
def test_no_run_releases_more_than_the_ledger_charged(any_ledger, tmp_path, per_run) -> None:
    """The greedy task's second count is refused (its share, ε = 0.25, is used up by the first one), the
    other task's own noise is paid from its share when it starts, and what was released (summed here from
    the tasks' own notes) never exceeds what the ledger charged. Before shares, ``run_budget`` let the
    greedy task spend the other task's share: ε 0.75 released, 0.5 charged, and ``verify()`` passed."""
    from dp_pipeline import PureDP

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0))
    marker = tmp_path / "released.txt"
    dag = _greedy_dag(f"dp_shares_{int(per_run)}", marker, per_run=per_run)

    dag_run = run_dag(dag)

    released, charged = sum(_released(marker)), ledger.spent("visits").epsilon
    assert released <= charged + 1e-12, (released, charged)
    found = states(dag_run)
    assert found["own_noise"] == "success" and found["greedy"] == "failed"
    assert released == pytest.approx(2 * EPS)  # own noise, and the greedy task's first count only
    ledger.verify()


@pytest.mark.parametrize("per_run", [True, False], ids=["run_budget", "per_attempt"])
def test_a_handed_mechanism_draws_once_and_its_copies_never(ledger, tmp_path, per_run) -> None:
    """The operator's and the guard's handed mechanism is one-shot: a second draw, a draw on a deepcopy and
    a draw on a pickled copy raise MechanismSpentError, and the ledger charges each task its declared cost
    once (0.25 + 0.25 summed here; nothing more is charged for the refused draws)."""
    import copy
    import pickle

    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, dp_guard, run_budget
    from dp_pipeline.exceptions import MechanismSpentError
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits", PureDP(1.0))
    marker = tmp_path / "released.txt"

    def draws(mechanism: Any) -> list[str]:
        outcomes = []
        for draw in (
            lambda: mechanism.randomize(1.0),
            lambda: mechanism.randomize(1.0),
            lambda: copy.deepcopy(mechanism).randomize(1.0),
            lambda: pickle.loads(pickle.dumps(mechanism)).randomize(1.0),
        ):
            try:
                draw()
            except MechanismSpentError:
                outcomes.append("refused")
                continue
            outcomes.append("drew")
            with marker.open("a") as handle:
                handle.write(f"{EPS}\n")
        return outcomes

    def guarded(**context: Any) -> list[str]:
        return draws(context["mechanism"])

    declared = Laplace(epsilon=EPS, sensitivity=1.0)
    with DAG(f"dp_one_shot_{int(per_run)}", schedule=None, start_date=START, catchup=False) as dag:
        operator = PrivacyBudgetOperator(
            task_id="operator", dataset="visits", mechanism=declared, python_callable=draws
        )
        guard = PythonOperator(
            task_id="guard", python_callable=guarded, pre_execute=dp_guard("visits", declared)
        )
        operator >> guard
    if per_run:
        run_budget(dag)

    dag_run = run_dag(dag)

    assert states(dag_run)["operator"] == states(dag_run)["guard"] == "success"
    for task_id in ("operator", "guard"):
        outcomes = dag_run.get_task_instance(task_id).xcom_pull(task_ids=task_id)
        assert outcomes == ["drew", "refused", "refused", "refused"]
    released = sum(_released(marker))
    assert released == pytest.approx(2 * EPS)
    assert ledger.spent("visits").epsilon == pytest.approx(2 * EPS)
    ledger.verify()
