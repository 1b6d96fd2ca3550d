"""One budget for a task's code, on real Airflow 3.3 with the ledger on SQLite and on PostgreSQL: the callable
of every DP task receives the attempt's reservation as ``dp``, its pandas functions and transformers pay
from it, and the task is charged once; the accountant a task is handed is read-only."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest

from tests.airflow_plugin._helpers import FailureLog, charges, run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _patients() -> Any:
    import pandas as pd

    rng = np.random.default_rng(7)
    return pd.DataFrame({"age": rng.integers(18, 90, 200), "bmi": rng.normal(27.0, 4.0, 200).clip(15, 45)})


def _paid(ledger: Any, dataset: str, key: str) -> list[Any]:
    return [entry for entry in ledger.history(dataset) if entry.paid_from == key]


def test_each_kind_of_dp_task_hands_its_callable_the_reservation_and_is_charged_once(any_ledger) -> None:
    """A decorated task, an operator and a guarded PythonOperator each declare ε = 0.5 and release a DP mean
    (ε = 0.3, pandas) and a noisy column (ε = 0.2, a transformer) through ``dp``. Before, the ledger charged
    the declared 0.5 and then each release again (0.5 + 0.3 + 0.2 = 1.0 per task); now each task is charged
    its reservation alone, and the two releases are recorded as paid from it."""
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, dp_guard, dp_task
    from dp_pipeline.frames import dp_mean
    from dp_pipeline.transformers import LaplaceNoise

    ledger = any_ledger
    ledger.set_budget("patients", PureDP(1.5))

    def report(dp: Any) -> dict[str, float]:
        frame = _patients()
        mean = frame.pipe(dp_mean, "age", lower=0, upper=100, epsilon=0.3, accountant=dp, dataset="patients")
        noisy = LaplaceNoise(epsilon=0.2, sensitivity=1.0, accountant=dp, dataset="patients")
        column = noisy.fit_transform(frame[["bmi"]].clip(0, 1))
        return {"mean_age": float(mean["value"]), "rows": float(len(column))}

    with DAG("dp_scoped", schedule=None, start_date=START, catchup=False) as dag:
        dp_task(dataset="patients", mechanism=PureDP(0.5), task_id="decorated")(report)()
        PrivacyBudgetOperator(
            task_id="operator", dataset="patients", mechanism=PureDP(0.5), python_callable=report
        )
        PythonOperator(
            task_id="guarded", python_callable=report, pre_execute=dp_guard("patients", PureDP(0.5))
        )

    dag_run = run_dag(dag)

    assert states(dag_run) == {"decorated": "success", "operator": "success", "guarded": "success"}
    recorded = charges(ledger, "patients")
    assert sorted(key.split("/")[1] for key, _ in recorded) == ["decorated", "guarded", "operator"]
    assert {status for _, status in recorded} == {"committed"}
    assert ledger.spent("patients").epsilon == pytest.approx(3 * 0.5)  # not 3 × (0.5 + 0.3 + 0.2)
    for key, _ in recorded:
        paid = _paid(ledger, "patients", key)
        assert sum(entry.cost.epsilon for entry in paid) == pytest.approx(0.3 + 0.2)
        assert ledger.reservation("patients", key).spent().epsilon == pytest.approx(0.3 + 0.2)


def test_the_accountant_a_task_is_handed_is_read_only_and_the_reservation_caps_its_releases(
    any_ledger,
) -> None:
    """Inside the task, the ``accountant`` the callable is handed reads the ledger but refuses every charge
    (``LedgerError``, nothing written), so the task cannot charge its dataset a second time through it; a
    release beyond what the task reserved is refused with ``BudgetExceededError`` naming the reservation.
    Either way the attempt had started, so it stays charged its declared cost, once. An accountant the code
    holds on its own is its own: a release through it is charged as well, which counts the task's releases
    twice (more loss, never less)."""
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import BudgetExceededError, PureDP
    from dp_pipeline.airflow import dp_guard, dp_task
    from dp_pipeline.exceptions import LedgerError
    from dp_pipeline.frames import dp_count

    ledger = any_ledger
    ledger.set_budget("patients", PureDP(2.0))
    failures = FailureLog()

    with DAG("dp_refusals", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="patients", mechanism=PureDP(0.25), on_failure_callback=failures)
        def plain(accountant: Any) -> float:
            assert accountant.spent("patients").epsilon >= 0.25  # it reads: its own attempt is counted
            frame = _patients()
            return float(
                frame.pipe(dp_count, epsilon=0.1, accountant=accountant, dataset="patients")["value"]
            )

        @dp_task(dataset="patients", mechanism=PureDP(0.25), on_failure_callback=failures)
        def too_much(dp: Any) -> float:
            frame = _patients()
            frame.pipe(dp_count, epsilon=0.2, accountant=dp, dataset="patients")
            return float(frame.pipe(dp_count, epsilon=0.2, accountant=dp, dataset="patients")["value"])

        def held(dp: Any) -> float:  # a guarded callable reaching for an accountant it holds on its own
            return float(
                _patients().pipe(dp_count, epsilon=0.1, accountant=ledger, dataset="patients")["value"]
            )

        upstream = PythonOperator(
            task_id="held",
            python_callable=held,
            pre_execute=dp_guard("patients", PureDP(0.25)),
            on_failure_callback=failures,
        )
        upstream >> [plain(), too_much()]

    dag_run = run_dag(dag)

    assert states(dag_run) == {"plain": "failed", "too_much": "failed", "held": "success"}
    assert isinstance(failures.errors["plain"], LedgerError)
    assert "read-only" in str(failures.errors["plain"])
    assert isinstance(failures.errors["too_much"], BudgetExceededError)
    assert "too_much" in str(failures.errors["too_much"])  # the reservation's key names the task
    everything = dict(charges(ledger, "patients"))
    recorded = {key: status for key, status in everything.items() if key.startswith("dp_refusals/")}
    assert sorted(key.split("/")[1] for key in recorded) == ["held", "plain", "too_much"]
    assert set(everything.values()) == {"committed"} and len(everything) == 4  # the held charge as well
    # three attempts of 0.25, plus the held accountant's own charge of 0.1: counted, never missing
    assert ledger.spent("patients").epsilon == pytest.approx(3 * 0.25 + 0.1)
    (plain_key,) = [key for key in recorded if "/plain/" in key]
    (capped_key,) = [key for key in recorded if "/too_much/" in key]
    assert _paid(ledger, "patients", plain_key) == []
    assert [entry.cost.epsilon for entry in _paid(ledger, "patients", capped_key)] == pytest.approx([0.2])


def test_an_async_guarded_callable_pays_from_its_reservation(ledger) -> None:
    """An async ``@task`` under ``dp_guard`` receives the attempt's reservation as ``dp`` as a plain one
    does: a release through it is paid from the reservation, and the attempt is charged its declared cost
    once."""
    from airflow.sdk import DAG, task

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_guard
    from dp_pipeline.frames import dp_count

    ledger.set_budget("patients", PureDP(2.0))

    with DAG("dp_async_guard", schedule=None, start_date=START, catchup=False) as dag:

        @task(pre_execute=dp_guard("patients", PureDP(0.25)))
        async def paid(dp: Any = None) -> float:
            return float(_patients().pipe(dp_count, epsilon=0.1, accountant=dp, dataset="patients")["value"])

        paid()

    dag_run = run_dag(dag)

    assert states(dag_run) == {"paid": "success"}
    assert ledger.spent("patients").epsilon == pytest.approx(0.25)
    (paid_key,) = [key for key, _ in charges(ledger, "patients") if "/paid/" in key]
    assert [entry.cost.epsilon for entry in _paid(ledger, "patients", paid_key)] == pytest.approx([0.1])
