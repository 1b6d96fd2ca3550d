"""Run-level reservation on real Airflow 3.3, with the ledger on SQLite and on PostgreSQL: the setup task
reserves the run's whole plan before any task reads data, every task pays from it, and the teardown hands
back the share of the tasks that never started."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline.accounting import ledger_entries
from tests.airflow_plugin._helpers import run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _run_entries(ledger: Any, dataset: str) -> tuple[list[Any], list[Any]]:
    """The dataset's charges (reservations) and the payments from a run's reservation: the attempts' shares
    (the releases paid within a share, which record its ``cap``, count against the share only)."""
    history = ledger.history(dataset)
    within = {r.seq for r in ledger.store.records(dataset) if r.kind == "pay" and "cap" in r.body}
    charged = [entry for entry in history if entry.paid_from is None]
    paid = [
        entry
        for entry in history
        if entry.paid_from is not None and entry.paid_from.startswith("run/") and entry.seq not in within
    ]
    return charged, paid


def _four_task_dag(dag_id: str, marker: Path) -> Any:
    """Four tasks on ``visits``, each ε = 0.25 (Laplace) and each writing ``marker`` when its code starts:
    a decorated task and a guarded PythonOperator that pay through ``dp`` with a pandas count, an operator
    whose callable adds the noise itself, and a guarded BashOperator."""
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow import PrivacyBudgetOperator, dp_guard, dp_task, run_budget
    from dp_pipeline.frames import dp_count
    from dp_pipeline.mechanisms import Laplace

    def mark(name: str) -> None:
        with marker.open("a") as handle:
            handle.write(name + "\n")

    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:

        def counted(name: str, dp: Any) -> float:
            import pandas as pd

            mark(name)
            frame = pd.DataFrame({"visit": range(120)})
            return float(frame.pipe(dp_count, epsilon=0.25, accountant=dp, dataset="visits")["value"])

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.25, sensitivity=1.0).event)
        def count(dp: Any) -> float:
            return counted("count", dp)

        def noisy(mechanism: Laplace) -> float:
            mark("noisy")
            return float(mechanism.randomize(120.0))

        def export(dp: Any) -> float:
            return counted("export", dp)

        first = count()
        second = PrivacyBudgetOperator(
            task_id="noisy",
            dataset="visits",
            mechanism=Laplace(epsilon=0.25, sensitivity=1.0),
            python_callable=noisy,
        )
        third = PythonOperator(
            task_id="export",
            python_callable=export,
            pre_execute=dp_guard("visits", Laplace(epsilon=0.25, sensitivity=1.0).event),
        )
        fourth = BashOperator(
            task_id="archive",
            bash_command=f"echo archive >> {marker}",
            pre_execute=dp_guard("visits", Laplace(epsilon=0.25, sensitivity=1.0)),
        )
        first >> second >> third >> fourth
    run_budget(dag)
    return dag


def test_a_run_reserves_its_plan_at_start_and_every_task_pays_from_it(any_ledger, tmp_path) -> None:
    """The setup reserves the four releases at their tight total (pure Laplace releases add up: 4 × 0.25),
    the one charge of the run on the dataset. Every attempt claims its share (its declared cost) when it
    starts; the two tasks declared with the event pay their counts within their shares, the two declared
    with a mechanism have its draw paid there. The teardown keeps
    everything (every task started), and the dataset is charged the plan's total once."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0))
    marker = tmp_path / "started.txt"
    dag = _four_task_dag("dp_run_fits", marker)
    (check,) = check_dag(dag, ledger)
    assert check.total.epsilon == pytest.approx(4 * 0.25)

    dag_run = run_dag(dag)

    assert states(dag_run) == {
        "dp_reserve_run": "success",
        "count": "success",
        "noisy": "success",
        "export": "success",
        "archive": "success",
        "dp_settle_run": "success",
    }
    assert marker.read_text().split() == ["count", "noisy", "export", "archive"]
    charged, paid = _run_entries(ledger, "visits")
    (run,) = charged
    assert run.key == f"run/dp_run_fits/{dag_run.run_id}" and run.status == "committed"
    assert run.cost.epsilon == pytest.approx(check.total.epsilon)
    assert sorted(entry.label.split(" ")[0] for entry in paid if "(try 1)" in entry.label) == [
        "dp_run_fits.archive",
        "dp_run_fits.count",
        "dp_run_fits.export",
        "dp_run_fits.noisy",
    ]
    assert len(paid) == 4 and sum(entry.cost.epsilon for entry in paid) == pytest.approx(4 * 0.25)
    assert ledger.spent("visits").epsilon == pytest.approx(4 * 0.25)
    settled = dag_run.get_task_instance("dp_settle_run").xcom_pull(task_ids="dp_settle_run")
    assert settled["visits"]["attempts"] == 4


def test_a_run_whose_plan_does_not_fit_is_refused_before_any_task_reads_data(any_ledger, tmp_path) -> None:
    """ε = 0.7 left for a plan of 1.0: the setup fails, no task's code starts (every task ends
    ``upstream_failed``), and the ledger holds nothing but the budget and the earlier spend."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0))
    ledger.spend("visits", PureDP(0.3), label="an earlier report")
    before = ledger_entries(ledger.store, "visits")
    marker = tmp_path / "started.txt"
    dag = _four_task_dag("dp_run_refused", marker)
    errors: dict[str, BaseException] = {}
    dag.get_task("dp_reserve_run").on_failure_callback = [lambda ctx: errors.update(setup=ctx["exception"])]

    dag_run = run_dag(dag)

    assert states(dag_run)["dp_reserve_run"] == "failed"
    assert {states(dag_run)[t] for t in ("count", "noisy", "export", "archive")} == {"upstream_failed"}
    assert not marker.exists()
    assert isinstance(errors["setup"], PrivacyBudgetExhausted)
    assert "'visits'" in str(errors["setup"]) and "requested ε = 1" in str(errors["setup"])
    assert [(r.kind, r.key) for r in ledger_entries(ledger.store, "visits")] == [
        (r.kind, r.key) for r in before
    ]
    assert ledger.spent("visits").epsilon == pytest.approx(0.3)


def test_the_share_of_a_skipped_branch_goes_back_to_the_budget(any_ledger, tmp_path) -> None:
    """A branch runs ``weekday`` (ε = 0.25) and skips ``weekend`` (ε = 0.5); an upstream failure stops
    ``after_failure`` (ε = 0.125). The setup reserved all three (ε = 0.875); the teardown keeps the one
    that started: the dataset ends charged ε = 0.25, and the dashboard shows the run's reservation."""
    from airflow.providers.standard.operators.python import BranchPythonOperator, PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0))

    def fail() -> None:
        raise RuntimeError("the export step broke")

    with DAG("dp_run_branch", schedule=None, start_date=START, catchup=False) as dag:
        branch = BranchPythonOperator(task_id="which_day", python_callable=lambda: "weekday")

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.25, sensitivity=1.0))
        def weekday(mechanism: Laplace) -> float:
            return float(mechanism.randomize(10.0))

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
        def weekend(mechanism: Laplace) -> float:
            return float(mechanism.randomize(10.0))

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.125, sensitivity=1.0))
        def after_failure(mechanism: Laplace) -> float:
            return float(mechanism.randomize(10.0))

        branch >> [weekday(), weekend()]
        PythonOperator(task_id="broken", python_callable=fail) >> after_failure()
    run_budget(dag)

    dag_run = run_dag(dag)

    assert states(dag_run) == {
        "dp_reserve_run": "success",
        "which_day": "success",
        "weekday": "success",
        "weekend": "skipped",
        "broken": "failed",
        "after_failure": "upstream_failed",
        "dp_settle_run": "success",
    }
    charged, paid = _run_entries(ledger, "visits")
    (run,) = charged
    assert run.cost.epsilon == pytest.approx(0.25)  # shrunk from 0.25 + 0.5 + 0.125
    assert [entry.cost.epsilon for entry in paid] == pytest.approx([0.25])
    assert ledger.spent("visits").epsilon == pytest.approx(0.25)
    assert ledger.remaining("visits").epsilon == pytest.approx(0.75)
    shrinks = [r for r in ledger_entries(ledger.store, "visits") if r.kind == "shrink"]
    assert len(shrinks) == 1 and "1 of 3 planned task attempts started" in shrinks[0].reason

    # the dashboard shows the run's reservation: what the setup reserved, what it holds, what was paid
    from fastapi.testclient import TestClient

    from dp_pipeline.airflow.dashboard import create_app

    client = TestClient(create_app(lambda: ledger))
    (shown,) = client.get("/api/datasets/visits").json()["runs"]
    # two pay records: the task's share, and its handed mechanism's draw paid within that share
    assert shown["key"] == run.key and shown["payments"] == 2
    assert shown["reserved"]["epsilon"] == pytest.approx(0.25 + 0.5 + 0.125)
    assert shown["held"]["epsilon"] == shown["paid"]["epsilon"] == pytest.approx(0.25)
    page = client.get("/").text
    assert "Run reservations" in page and run.key in page


def test_in_a_run_each_attempt_that_started_keeps_its_share(any_ledger, tmp_path) -> None:
    """``retries=1``: the run reserves two attempts of each task. ``steady`` succeeds at once and keeps one
    share; ``flaky`` fails after its code started and succeeds on its retry, and keeps two."""
    ledger = any_ledger
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits", PureDP(2.0))
    tries = tmp_path / "tries.txt"

    with DAG("dp_run_retries", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.25, sensitivity=1.0), retries=1)
        def steady(mechanism: Laplace) -> float:
            return float(mechanism.randomize(10.0))

        @dp_task(
            dataset="visits",
            mechanism=Laplace(epsilon=0.25, sensitivity=1.0),
            retries=1,
            retry_delay=dt.timedelta(0),
        )
        def flaky(mechanism: Laplace) -> float:
            with tries.open("a") as handle:
                handle.write("x")
            if len(tries.read_text()) == 1:
                raise RuntimeError("lost the connection after reading")
            return float(mechanism.randomize(10.0))

        steady() >> flaky()
    run_budget(dag)

    dag_run = run_dag(dag)

    assert states(dag_run)["flaky"] == "success" and states(dag_run)["dp_settle_run"] == "success"
    (run,) = [entry for entry in ledger.history("visits") if entry.paid_from is None]
    assert run.cost.epsilon == pytest.approx(3 * 0.25)  # reserved 4 × 0.25, kept steady once, flaky twice
    assert ledger.spent("visits").epsilon == pytest.approx(3 * 0.25)


def test_a_run_reserves_templated_names_and_map_bounds_and_keeps_the_map_indexes_that_ran(any_ledger) -> None:
    """The setup renders ``visits/{{ ds }}`` in the run's context and reserves a task mapped over an
    upstream result at its declared bound (3 × 0.2); the upstream returns two values, so the teardown keeps
    two map indexes (2 × 0.2) on the rendered dataset."""
    ledger = any_ledger
    from airflow.sdk import DAG, task

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, run_budget
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits/2026-03-02", PureDP(1.0))

    with DAG("dp_run_mapped", schedule=None, start_date=START, catchup=False) as dag:

        @task
        def wards() -> list[list[int]]:
            return [[1], [2]]

        PrivacyBudgetOperator.partial(
            task_id="per_ward",
            dataset="visits/{{ ds }}",
            mechanism=Laplace(epsilon=0.2, sensitivity=1.0),
            python_callable=lambda ward, mechanism: float(mechanism.randomize(float(ward))),
            max_map_length=3,
        ).expand(op_args=wards())
    run_budget(dag)

    dag_run = run_dag(dag, logical_date=dt.datetime(2026, 3, 2, tzinfo=dt.UTC))

    assert states(dag_run) == {
        "dp_reserve_run": "success",
        "wards": "success",
        "per_ward[0]": "success",
        "per_ward[1]": "success",
        "dp_settle_run": "success",
    }
    reserved = dag_run.get_task_instance("dp_reserve_run").xcom_pull(task_ids="dp_reserve_run")
    assert reserved["visits/2026-03-02"]["epsilon"] == pytest.approx(3 * 0.2)
    (run,) = [e for e in ledger.history("visits/2026-03-02") if e.paid_from is None]
    assert run.cost.epsilon == pytest.approx(2 * 0.2)
    assert ledger.spent("visits/2026-03-02").epsilon == pytest.approx(2 * 0.2)


def test_an_attempt_outside_what_its_run_reserved_does_not_run(ledger) -> None:
    """A task cleared by hand after its run (an attempt beyond ``retries + 1``) and any attempt after the
    teardown settled the run are refused before anything is paid; outside a run-budgeted DAG nothing of
    this applies."""
    from types import SimpleNamespace

    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, run_budget
    from dp_pipeline.airflow.attempt import run_reservation
    from dp_pipeline.airflow.costs import DPCost
    from dp_pipeline.airflow.exceptions import PrivacyCostError
    from dp_pipeline.exceptions import InvalidParameterError

    ledger.set_budget("visits", PureDP(1.0))
    with DAG("dp_run_cleared", schedule=None, start_date=START, catchup=False) as dag:
        op = PrivacyBudgetOperator(
            task_id="count", dataset="visits", mechanism=PureDP(0.5), python_callable=len
        )
    cost = DPCost("visits", PureDP(0.5))

    def context(try_number: int, settled: bool) -> dict[str, Any]:
        def xcom_pull(**kwargs: Any) -> Any:
            return True if settled and kwargs["task_ids"] == "dp_settle_run" else None

        ti = SimpleNamespace(
            dag_id=dag.dag_id,
            task_id="count",
            run_id="r1",
            map_index=-1,
            try_number=try_number,
            xcom_pull=xcom_pull,
        )
        return {"dag": dag, "task": op, "ti": ti}

    assert (
        run_reservation(ledger, cost, context(2, settled=False), "dp_ledger_default") is None
    )  # no run budget
    setup, teardown = run_budget(dag)
    assert setup.is_setup and teardown.is_teardown
    assert setup.downstream_task_ids == {"count", "dp_settle_run"} and op.downstream_task_ids == {
        "dp_settle_run"
    }
    with pytest.raises(InvalidParameterError, match="already reserves its plan per run"):
        run_budget(dag)
    with pytest.raises(PrivacyCostError, match="attempt 2 is beyond the 1 attempt"):
        run_reservation(ledger, cost, context(2, settled=False), "dp_ledger_default")
    with pytest.raises(PrivacyCostError, match="settled by 'dp_settle_run'"):
        run_reservation(ledger, cost, context(1, settled=True), "dp_ledger_default")
    with pytest.raises(PrivacyCostError, match="uses the run's ledger"):
        run_reservation(ledger, cost, context(1, settled=False), "another_ledger")
    with pytest.raises(PrivacyCostError, match="holds no reservation on 'visits'"):
        run_reservation(ledger, cost, context(1, settled=False), "dp_ledger_default")
    assert [r.kind for r in ledger_entries(ledger.store, "visits")] == ["budget"]
