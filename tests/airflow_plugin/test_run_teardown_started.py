"""The teardown of a run budget keeps the share of every attempt that may still release data: a task
instance still running when the teardown runs (e.g. ``[fast, slow] >> join`` with the leaf ``join`` on
``trigger_rule="one_success"``: the teardown follows ``join`` while ``slow`` runs) recorded that its attempt
started, and must stay charged. The teardown is given the states it would read then."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]


class _TaskInstance:
    """What the setup and the teardown read of the run: its task instances' states and the attempts' XComs."""

    def __init__(self, dag_id: str, rows: list[dict[str, Any]], started: dict[str, int]) -> None:
        self.dag_id, self.run_id = dag_id, "manual__1"
        self.rows, self.started = rows, started
        self.pushed: dict[str, Any] = {}

    def get_task_breadcrumbs(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.rows

    def xcom_pull(self, task_ids: str, key: str, map_indexes: int = -1, default: Any = None) -> Any:
        from dp_pipeline.airflow.keys import ATTEMPT_XCOM_KEY

        return self.started.get(task_ids, default) if key == ATTEMPT_XCOM_KEY else default

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.mark.parametrize(
    ("state", "recorded", "kept"),
    [
        ("running", True, 0.75),  # started, still running
        ("queued", False, 0.75),  # not finished: may still start and release
        ("upstream_failed", True, 0.75),  # a recorded start counts whatever the state says
        ("skipped", False, 0.25),  # a branch not taken: its share goes back
    ],
)
def test_a_task_that_may_still_release_at_teardown_keeps_its_share(
    state: str, recorded: bool, kept: float
) -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow import dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0))
    with DAG("dp_run_one_success", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.25, sensitivity=1.0))
        def fast(mechanism: Laplace) -> float:
            return float(mechanism.randomize(1.0))

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
        def slow(mechanism: Laplace) -> float:
            return float(mechanism.randomize(1.0))

        join = EmptyOperator(task_id="join", trigger_rule="one_success")
        [fast(), slow()] >> join
    setup, teardown = run_budget(dag)
    # it waits for every task, not only the leaf "join", which may finish while "slow" runs
    assert teardown.upstream_task_ids == {"dp_reserve_run", "fast", "slow", "join"}
    for operator in (setup, teardown):
        object.__setattr__(operator, "get_accountant", lambda: acct)
    rows = [
        {"task_id": "fast", "map_index": -1, "state": "success", "duration": 1.0},
        {"task_id": "slow", "map_index": -1, "state": state, "duration": None},
        {"task_id": "join", "map_index": -1, "state": "success", "duration": 0.1},
    ]
    ti = _TaskInstance(dag.dag_id, rows, {"fast": 1, "slow": 1} if recorded else {"fast": 1})
    context = {"dag": dag, "run_id": ti.run_id, "ti": ti}

    setup.execute(context)
    assert acct.spent("visits").epsilon == pytest.approx(0.75)
    teardown.execute(context)
    assert acct.spent("visits").epsilon == pytest.approx(kept)
