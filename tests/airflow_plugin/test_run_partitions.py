"""Partitions in Airflow 3.3, with the ledger on SQLite and on PostgreSQL: a templated dataset name such as
``visits/{{ ds }}`` charges partition ``{{ ds }}`` of a dataset ``visits`` declared partitioned, in a task's
own reservation, in a run-level reservation (one per dataset and partition) and in the scoped spender; a name
whose dataset is not partitioned is refused with nothing charged."""

from __future__ import annotations

import datetime as dt
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline.accounting import ledger_entries, partition_spending
from tests.airflow_plugin._helpers import FailureLog, run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
MONDAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
TUESDAY = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
WEDNESDAY = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)


def _visits() -> Any:
    import pandas as pd

    return pd.DataFrame({"minutes": [float(m % 60) for m in range(150)]})


def _daily(dag_id: str, dataset: str, marker: Path, failures: FailureLog) -> Any:
    """A daily DAG whose one task declares Laplace ε = 0.6 on ``dataset`` and writes the name it was given
    to ``marker`` when its code starts."""
    from airflow.sdk import DAG

    from dp_pipeline.airflow import dp_task
    from dp_pipeline.mechanisms import Laplace

    with DAG(dag_id, schedule="@daily", start_date=START, catchup=False) as dag:

        @dp_task(
            dataset=dataset, mechanism=Laplace(epsilon=0.6, sensitivity=1.0), on_failure_callback=failures
        )
        def count(mechanism: Laplace, dataset: str, partition: str | None) -> float:
            with marker.open("a") as handle:
                handle.write((dataset if partition is None else f"{dataset}/{partition}") + "\n")
            return float(mechanism.randomize(10.0))

        count()
    return dag


def _epsilons(reports: dict[str, Any]) -> dict[str, float]:
    return {name: report.epsilon for name, report in reports.items()}


def test_a_daily_dag_charges_each_day_on_its_own_partition(any_ledger, tmp_path) -> None:
    """ε = 1 on ``visits`` with one partition per person (L = 1), a daily task of ε = 0.6 on
    ``visits/{{ ds }}``: the runs of two days both succeed, each day's partition holds 0.6, and the dataset
    has spent 0.6 (L = 1: the largest day). A second run on the second day is refused before its code runs
    and charges nothing. On an unpartitioned twin (the task on the whole dataset) the second day is refused:
    0.6 + 0.6 > 1."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    ledger.set_budget("visits_whole", PureDP(1.0))
    marker, failures = tmp_path / "started.txt", FailureLog()

    for day in (MONDAY, TUESDAY):
        dag_run = run_dag(_daily("dp_daily", "visits/{{ ds }}", marker, failures), logical_date=day)
        assert states(dag_run) == {"count": "success"}
    assert marker.read_text().split() == ["visits/2026-11-23", "visits/2026-11-24"]
    declared = {"2026-11-23": 0.6, "2026-11-24": 0.6}  # each day: one release of ε = 0.6
    assert _epsilons(partition_spending(ledger.store, "visits")) == pytest.approx(declared)
    assert ledger.spent("visits").epsilon == pytest.approx(max(declared.values()))  # L = 1: the largest
    # each day: its attempt's charge, and the handed mechanism's draw paid from it
    assert [(e.partitions, e.status) for e in ledger.history("visits")] == [
        (("2026-11-23",), "committed"),
        (("2026-11-23",), "paid"),
        (("2026-11-24",), "committed"),
        (("2026-11-24",), "paid"),
    ]

    before = ledger_entries(ledger.store, "visits")
    again = run_dag(_daily("dp_daily", "visits/{{ ds }}", marker, failures), logical_date=TUESDAY)
    assert states(again) == {"count": "failed"}
    assert isinstance(failures.errors["count"], PrivacyBudgetExhausted)
    assert "'visits'" in str(failures.errors["count"]) and "2026-11-24" in str(failures.errors["count"])
    assert marker.read_text().split() == ["visits/2026-11-23", "visits/2026-11-24"]  # its code never ran
    assert [(r.seq, r.kind) for r in ledger_entries(ledger.store, "visits")] == [
        (r.seq, r.kind) for r in before
    ]

    whole, failures = tmp_path / "whole.txt", FailureLog()
    verdicts = [
        states(run_dag(_daily("dp_daily_whole", "visits_whole", whole, failures), logical_date=day))["count"]
        for day in (MONDAY, TUESDAY)
    ]
    assert verdicts == ["success", "failed"]
    assert isinstance(failures.errors["count"], PrivacyBudgetExhausted)
    assert whole.read_text().split() == ["visits_whole"]
    assert ledger.spent("visits_whole").epsilon == pytest.approx(0.6)


def test_a_rendered_name_on_a_dataset_that_is_not_partitioned_is_refused_and_charges_nothing(
    any_ledger, tmp_path
) -> None:
    """``flat/{{ ds }}`` where ``flat`` has a budget that is not partitioned: the task fails with a clear
    error before its code runs, nothing is charged, and no dataset ``flat/2026-11-23`` appears; under a
    run-level reservation the setup fails the same way and no task starts."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import run_budget
    from dp_pipeline.airflow.exceptions import PrivacyCostError

    ledger = any_ledger
    ledger.set_budget("flat", PureDP(1.0))
    before = ledger_entries(ledger.store, "flat")
    marker, failures = tmp_path / "started.txt", FailureLog()

    dag_run = run_dag(_daily("dp_flat", "flat/{{ ds }}", marker, failures), logical_date=MONDAY)

    assert states(dag_run) == {"count": "failed"}
    error = failures.errors["count"]
    assert isinstance(error, PrivacyCostError)
    assert (
        "'flat/2026-11-23' names partition '2026-11-23' of dataset 'flat', which is not partitioned"
        in str(error)
    )
    assert "partitions=L" in str(error)

    dag = _daily("dp_flat_run", "flat/{{ ds }}", marker, failures)
    run_budget(dag)
    dag.get_task("dp_reserve_run").on_failure_callback = [failures]
    dag_run = run_dag(dag, logical_date=MONDAY)

    assert (states(dag_run)["dp_reserve_run"], states(dag_run)["count"]) == ("failed", "upstream_failed")
    assert isinstance(failures.errors["dp_reserve_run"], PrivacyCostError)
    assert "not partitioned" in str(failures.errors["dp_reserve_run"])
    assert not marker.exists()
    assert ledger.datasets() == ["flat"]
    assert [(r.seq, r.kind) for r in ledger_entries(ledger.store, "flat")] == [
        (r.seq, r.kind) for r in before
    ]


def _two_days(dag_id: str, today: float, skipped: float, yesterday: float, marker: Path) -> Any:
    """A run-budgeted daily DAG on ``visits``: ``today`` (pays a DP count through ``dp`` on the day's
    partition) and ``skipped`` (a branch not taken) on ``visits/{{ ds }}``, and a guarded ``yesterday`` on
    the day before, whose callable does not take ``dp`` (it pays its declared cost when it starts)."""
    from airflow.providers.standard.operators.python import BranchPythonOperator, PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow import dp_guard, dp_task, run_budget
    from dp_pipeline.frames import dp_count
    from dp_pipeline.mechanisms import Laplace

    def mark(name: str) -> None:
        with marker.open("a") as handle:
            handle.write(name + "\n")

    with DAG(dag_id, schedule="@daily", start_date=START, catchup=False) as dag:
        branch = BranchPythonOperator(task_id="which", python_callable=lambda: "today")

        @dp_task(dataset="visits/{{ ds }}", mechanism=Laplace(epsilon=today, sensitivity=1.0).event)
        def today_count(dp: Any, dataset: str, partition: str) -> float:
            mark(f"{dataset}/{partition}")
            released = _visits().pipe(
                dp_count, epsilon=today, accountant=dp, dataset=dataset, partition=partition
            )
            return float(released["value"])

        @dp_task(dataset="visits/{{ ds }}", mechanism=Laplace(epsilon=skipped, sensitivity=1.0))
        def not_today(mechanism: Laplace) -> float:
            mark("not_today")
            return float(mechanism.randomize(1.0))

        PythonOperator(
            task_id="yesterday",
            python_callable=lambda: mark("yesterday"),
            pre_execute=dp_guard(
                "visits/{{ macros.ds_add(ds, -1) }}", Laplace(epsilon=yesterday, sensitivity=1.0)
            ),
        )
        branch >> [today_count.override(task_id="today")(), not_today.override(task_id="skipped")()]
    run_budget(dag)
    return dag


def test_a_run_reserves_each_day_it_reads_and_the_teardown_shrinks_each(any_ledger, tmp_path) -> None:
    """L = 2, ε = 1. The run of 2026-11-24 reads its day (``today`` 0.3 and ``skipped`` 0.2) and the day
    before (``yesterday`` 0.4): the DAG check and the setup price each day's part on its partition, one
    reservation per day; the teardown gives back the skipped task's share on the 24th only. The dataset then
    holds the two days' sums (L = 2). The next day's run fits on each part alone but not together (its two
    days would hold 0.6 and 0.5 beside 0.4): the setup refuses it and nothing is charged."""
    from fastapi.testclient import TestClient

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted, check_dag
    from dp_pipeline.airflow.dashboard import create_app

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=2)
    marker = tmp_path / "started.txt"
    dag = _two_days("dp_two_days", 0.3, 0.2, 0.4, marker)

    checks = {c.partition: c for c in check_dag(dag, ledger, logical_date=TUESDAY)}
    assert set(checks) == {"2026-11-24", "2026-11-23"} and all(c.dataset == "visits" for c in checks.values())
    assert checks["2026-11-24"].total.epsilon == pytest.approx(0.3 + 0.2)
    assert checks["2026-11-23"].total.epsilon == pytest.approx(0.4)
    assert all(c.ok and c.fits_remaining for c in checks.values())

    dag_run = run_dag(dag, logical_date=TUESDAY)

    assert states(dag_run) == {
        "dp_reserve_run": "success",
        "which": "success",
        "today": "success",
        "skipped": "skipped",
        "yesterday": "success",
        "dp_settle_run": "success",
    }
    assert sorted(marker.read_text().split()) == ["visits/2026-11-24", "yesterday"]
    reserved = dag_run.get_task_instance("dp_reserve_run").xcom_pull(task_ids="dp_reserve_run")
    assert {name: total["epsilon"] for name, total in reserved.items()} == pytest.approx(
        {"visits/2026-11-24": 0.5, "visits/2026-11-23": 0.4}
    )
    settled = dag_run.get_task_instance("dp_settle_run").xcom_pull(task_ids="dp_settle_run")
    assert {name: part["kept"]["epsilon"] for name, part in settled.items()} == pytest.approx(
        {"visits/2026-11-24": 0.3, "visits/2026-11-23": 0.4}
    )
    runs = {e.key: e for e in ledger.history("visits") if e.paid_from is None}
    key = f"run/dp_two_days/{dag_run.run_id}"
    assert set(runs) == {f"{key}/2026-11-24", f"{key}/2026-11-23"}
    assert runs[f"{key}/2026-11-24"].partitions == ("2026-11-24",)
    assert runs[f"{key}/2026-11-24"].cost.epsilon == pytest.approx(0.3)  # shrunk from 0.5
    paid = {
        (e.paid_from, e.partitions, round(e.cost.epsilon, 9)) for e in ledger.history("visits") if e.paid_from
    }
    assert paid == {(f"{key}/2026-11-24", ("2026-11-24",), 0.3), (f"{key}/2026-11-23", ("2026-11-23",), 0.4)}
    days = _epsilons(partition_spending(ledger.store, "visits"))
    assert days == pytest.approx({"2026-11-24": 0.3, "2026-11-23": 0.4})
    assert ledger.spent("visits").epsilon == pytest.approx(sum(sorted(days.values())[-2:]))  # L = 2

    shown = TestClient(create_app(lambda: ledger)).get("/api/datasets/visits").json()["runs"]
    assert {(run["key"], tuple(run["partitions"])) for run in shown} == {
        (f"{key}/2026-11-24", ("2026-11-24",)),
        (f"{key}/2026-11-23", ("2026-11-23",)),
    }
    page = TestClient(create_app(lambda: ledger)).get("/").text
    assert '<td class="partition">2026-11-23</td>' in page

    before = ledger_entries(ledger.store, "visits")
    refused = _two_days("dp_two_days_next", 0.4, 0.2, 0.2, marker)
    checks = check_dag(refused, ledger, logical_date=WEDNESDAY)
    assert sorted(c.partition for c in checks) == ["2026-11-24", "2026-11-25"]
    for check in checks:  # each part alone fits what remains ({0.6, 0.4} or {0.5, 0.4}), not both
        assert check.ok and not check.fits_remaining
        assert any("together they exceed what remains" in w for w in check.warnings)
    errors: dict[str, BaseException] = {}
    refused.get_task("dp_reserve_run").on_failure_callback = [
        lambda ctx: errors.update(setup=ctx["exception"])
    ]

    dag_run = run_dag(refused, logical_date=WEDNESDAY)

    assert states(dag_run)["dp_reserve_run"] == "failed"
    assert {states(dag_run)[t] for t in ("which", "yesterday")} == {"upstream_failed"}
    assert isinstance(errors["setup"], PrivacyBudgetExhausted) and "together" in str(errors["setup"])
    assert [(r.seq, r.kind) for r in ledger_entries(ledger.store, "visits")] == [
        (r.seq, r.kind) for r in before
    ]
    assert sorted(marker.read_text().split()) == ["visits/2026-11-24", "yesterday"]


def test_code_inside_a_task_pays_from_its_partition_named_explicitly(any_ledger) -> None:
    """A task on ``visits/{{ ds }}`` (ε = 0.5) releases a DP mean with the ``dataset`` and ``partition`` it is
    handed (the rendered name, split once by the operator) and a DP count with ``dataset="visits",
    partition=ds`` through ``dp``: both are paid from the task's reservation on the day, which is the only
    charge. A release through ``dp`` on another day, or on the
    whole dataset (it would read every day), is refused and pays nothing."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_task
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.frames import dp_count, dp_mean

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)

    with DAG("dp_scoped_day", schedule="@daily", start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits/{{ ds }}", mechanism=PureDP(0.5))
        def report(dp: Any, dataset: str, partition: str, ds: str) -> dict[str, Any]:
            frame = _visits()
            mean = frame.pipe(
                dp_mean,
                "minutes",
                lower=0,
                upper=60,
                epsilon=0.25,
                accountant=dp,
                dataset=dataset,
                partition=partition,
            )
            count = frame.pipe(dp_count, epsilon=0.25, accountant=dp, dataset="visits", partition=ds)
            refused = {}
            for name, where in {
                "other day": {"dataset": "visits", "partition": "2026-11-22"},
                "whole": {"dataset": "visits"},
            }.items():
                try:
                    frame.pipe(dp_count, epsilon=0.0625, accountant=dp, **where)
                except InvalidParameterError as exc:
                    refused[name] = str(exc)
            return {"mean": float(mean["value"]), "count": float(count["value"]), "refused": refused}

        report()

    dag_run = run_dag(dag, logical_date=MONDAY)

    assert states(dag_run) == {"report": "success"}
    result = dag_run.get_task_instance("report").xcom_pull(task_ids="report")
    assert "among those" in result["refused"]["other day"]
    assert "reads every partition of 'visits'" in result["refused"]["whole"]
    history = ledger.history("visits")
    (task,) = [e for e in history if e.paid_from is None]
    assert task.partitions == ("2026-11-23",) and task.cost.epsilon == pytest.approx(0.5)
    paid = [e for e in history if e.paid_from == task.key]
    assert [(e.partitions, e.cost.epsilon) for e in paid] == [
        (("2026-11-23",), 0.25),
        (("2026-11-23",), 0.25),
    ]
    assert ledger.spent("visits").epsilon == pytest.approx(0.5)  # charged once
    assert _epsilons(partition_spending(ledger.store, "visits")) == pytest.approx({"2026-11-23": 0.5})
    assert Fraction(ledger.reservation("visits", task.key).spent().epsilon) == Fraction(1, 2)


def test_a_run_share_calibrates_a_free_task_on_its_day_partition(any_ledger, tmp_path) -> None:
    """``run_budget(dag, share=PureDP(0.5))`` and a task on ``visits/{{ ds }}`` whose Laplace noise is left
    free: the setup calibrates it to the share on the day's part and reserves it on that partition; the task
    receives Laplace noise of scale b = Δ/ε = 2 (computed here: ε = 0.5 is the whole share of one pure
    release), pays it from the day's reservation, and the day holds what the share allows, not more."""
    from airflow.sdk import DAG

    from dp_pipeline import PlannedRelease, PureDP
    from dp_pipeline.airflow import dp_task, run_budget

    ledger = any_ledger
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    seen = tmp_path / "scale.txt"

    with DAG("dp_share_day", schedule="@daily", start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits/{{ ds }}", mechanism=PlannedRelease("laplace", sensitivity=1.0))
        def count(mechanism: Any) -> float:
            seen.write_text(repr(mechanism.scale))
            return float(mechanism.randomize(10.0))

        count()
    run_budget(dag, share=PureDP(0.5))

    dag_run = run_dag(dag, logical_date=MONDAY)

    assert states(dag_run) == {"dp_reserve_run": "success", "count": "success", "dp_settle_run": "success"}
    scale = float(seen.read_text())
    assert 2.0 <= scale <= 2.0 * 1.0001  # never less noise than the share allows
    (run,) = [e for e in ledger.history("visits") if e.paid_from is None]
    assert run.key == f"run/dp_share_day/{dag_run.run_id}/2026-11-23" and run.partitions == ("2026-11-23",)
    assert "share ε=0.5" in run.label
    # the attempt's share, and its calibrated mechanism's draw paid within it
    share, draw = [e for e in ledger.history("visits") if e.paid_from == run.key]
    for paid in (share, draw):
        assert paid.partitions == ("2026-11-23",) and paid.cost.epsilon == pytest.approx(1.0 / scale)
    assert partition_spending(ledger.store, "visits")["2026-11-23"].epsilon <= 0.5
    assert ledger.spent("visits").epsilon == pytest.approx(0.5, rel=1e-3)


def test_a_setup_that_cannot_reserve_a_later_part_gives_back_the_parts_it_reserved(ledger, tmp_path) -> None:
    """A run whose second part cannot be reserved at all (its key, ``run/<dag>/<run>/<partition>``, is longer
    than the ledger's 512 characters: a long DAG id and a long partition name) fails in its setup before any
    task reads data, and the part it had already reserved on another dataset goes back whole: nothing stays
    charged."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyCostError, dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("counts", PureDP(1.0))
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    marker = tmp_path / "started.txt"
    failures = FailureLog()
    with DAG("d" * 240, schedule=None, start_date=START) as dag:

        @dp_task(dataset="counts", mechanism=Laplace(epsilon=0.4, sensitivity=1.0))
        def first(mechanism: Laplace) -> float:
            marker.write_text("started")
            return float(mechanism.randomize(1.0))

        @dp_task(dataset="visits/" + "p" * 250, mechanism=Laplace(epsilon=0.4, sensitivity=1.0))
        def second(mechanism: Laplace) -> float:
            marker.write_text("started")
            return float(mechanism.randomize(1.0))

        first() >> second()
    run_budget(dag)
    dag.get_task("dp_reserve_run").on_failure_callback = [failures]

    dag_run = run_dag(dag)

    assert states(dag_run)["dp_reserve_run"] == "failed"
    assert {states(dag_run)[t] for t in ("first", "second")} == {"upstream_failed"}
    error = failures.errors["dp_reserve_run"]
    assert isinstance(error, PrivacyCostError) and "nothing was charged" in str(error)
    assert not marker.exists()
    assert ledger.spent("counts").epsilon == 0.0
    assert ledger.spent("visits").epsilon == 0.0
