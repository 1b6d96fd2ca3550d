"""One attempt, one charge, one release, on real Airflow 3.3 (``dag.test()``): an attempt that resumes after a
deferral or a reschedule continues under its reservation, while a second delivery of a running attempt is
refused and runs nothing."""

from __future__ import annotations

import contextvars
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_plugin._helpers import charges, run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _append(path: Path, line: str) -> None:
    with path.open("a") as handle:
        handle.write(line + "\n")


def test_guarded_sensor_in_reschedule_mode_is_charged_once(ledger, tmp_path) -> None:
    from airflow.providers.standard.sensors.python import PythonSensor
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_guard

    ledger.set_budget("sensed", PureDP(1.0))
    pokes = tmp_path / "pokes.txt"

    def poke() -> bool:
        _append(pokes, "poke")
        return len(_lines(pokes)) >= 2  # False on the first poke, True on the second

    with DAG("dp_sensor", schedule=None, start_date=START, catchup=False) as dag:
        PythonSensor(
            task_id="wait",
            python_callable=poke,
            mode="reschedule",
            poke_interval=1,
            timeout=120,
            pre_execute=dp_guard("sensed", PureDP(0.4)),
        )

    dag_run = run_dag(dag)

    assert states(dag_run) == {"wait": "success"}
    assert _lines(pokes) == ["poke", "poke"]  # rescheduled once, then done
    assert [status for _, status in charges(ledger, "sensed")] == ["committed"]
    assert ledger.spent("sensed").epsilon == 0.4
    ledger.verify()


def test_guarded_deferrable_operator_is_charged_once(ledger, tmp_path) -> None:
    from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
    from airflow.sdk import DAG, BaseOperator

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_guard

    ledger.set_budget("deferred", PureDP(1.0))
    log = tmp_path / "log.txt"

    class WaitThenRelease(BaseOperator):
        """Defers to a one-second trigger, then releases in the resumed method."""

        def execute(self, context: Any) -> None:
            _append(log, "deferred")
            self.defer(trigger=TimeDeltaTrigger(dt.timedelta(seconds=1)), method_name="resume")

        def resume(self, context: Any, event: Any = None) -> str:
            _append(log, "released")
            return "released"

    with DAG("dp_deferred", schedule=None, start_date=START, catchup=False) as dag:
        WaitThenRelease(task_id="release", pre_execute=dp_guard("deferred", PureDP(0.3)))

    dag_run = run_dag(dag)

    assert states(dag_run) == {"release": "success"}
    assert _lines(log) == ["deferred", "released"]
    assert [status for _, status in charges(ledger, "deferred")] == ["committed"]
    assert ledger.spent("deferred").epsilon == 0.3
    ledger.verify()


def test_a_second_delivery_of_a_running_attempt_is_refused(ledger, tmp_path) -> None:
    from airflow.sdk import DAG

    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("twice", Laplace(epsilon=5.0, sensitivity=1.0).event.guarantee)
    runs = tmp_path / "runs.txt"

    def release(**context: Any) -> str:
        _append(runs, "release")
        if len(_lines(runs)) > 1:
            return "second"  # only reached if a second delivery ran the callable: stop the recursion
        try:  # the same attempt delivered again while this delivery runs (its reservation is open), as
            # another process would run it: outside this delivery's scope (a fresh contextvars context)
            contextvars.Context().run(context["task"].execute, context)
        except AttemptAlreadyChargedError as refused:
            _append(runs, f"refused {refused.status}")
        return "first"

    with DAG("dp_twice", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="release",
            dataset="twice",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=release,
        )

    dag_run = run_dag(dag)

    assert states(dag_run) == {"release": "success"}
    assert _lines(runs) == ["release", "refused open"]  # the callable ran once
    assert [status for _, status in charges(ledger, "twice")] == ["committed"]
    assert ledger.spent("twice").epsilon == 0.5
    ledger.verify()


def test_a_second_delivery_of_a_guarded_first_run_is_refused(ledger, tmp_path) -> None:
    """A deferrable operator's first run delivered again is no resumption: the guard refuses it."""
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import dp_guard
    from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError

    ledger.set_budget("guarded", PureDP(1.0))
    ran = tmp_path / "ran.txt"
    failures: dict[str, BaseException] = {}
    logical_date = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    with DAG("dp_guarded_twice", schedule=None, start_date=START, catchup=False) as dag:
        PythonOperator(
            task_id="export",
            python_callable=lambda: ran.write_text("ran"),
            pre_execute=dp_guard("guarded", PureDP(0.3)),
            on_failure_callback=lambda context: failures.update(export=context["exception"]),
        )
    key = f"dp_guarded_twice/export/manual__{logical_date.isoformat()}/-1/1"
    ledger.spend("guarded", PureDP(0.3), key=key)  # the first delivery passed the guard

    dag_run = run_dag(dag, logical_date=logical_date, run_after=logical_date)

    assert states(dag_run) == {"export": "failed"}
    assert isinstance(failures["export"], AttemptAlreadyChargedError)
    assert failures["export"].status == "committed"
    assert not ran.exists()
    assert charges(ledger, "guarded") == [(key, "committed")]


def _context(next_method: str | None = None, reschedules: int = 0) -> dict[str, Any]:
    from types import SimpleNamespace

    ti = SimpleNamespace(
        dag_id="d",
        task_id="t",
        run_id="r",
        map_index=-1,
        try_number=1,
        _ti_context_from_server=SimpleNamespace(next_method=next_method),
    )
    return {"ti": ti, "task_reschedule_count": reschedules}


def test_resumption_is_read_from_the_run_context() -> None:
    from dp_pipeline.airflow.attempt import resumption

    assert resumption(_context()) is None  # a first run
    assert resumption({"ti": object()}) is None  # a context without Airflow's run context
    assert "deferral into resume()" in str(resumption(_context(next_method="resume")))
    assert "reschedule 2" in str(resumption(_context(reschedules=2)))


@pytest.mark.parametrize("first", ["open", "committed", "released"])
def test_a_reused_attempt_key_is_refused_with_its_state(ledger, first: str) -> None:
    import pickle

    from dp_pipeline import PureDP
    from dp_pipeline.airflow.attempt import reserve_or_refuse
    from dp_pipeline.airflow.costs import DPCost
    from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError
    from dp_pipeline.airflow.keys import attempt_key

    ledger.set_budget("d", PureDP(1.0))
    context = _context()
    cost = DPCost(dataset="d", cost=PureDP(0.25))
    reservation = reserve_or_refuse(ledger, cost, context)
    if first == "committed":
        reservation.commit()
    elif first == "released":
        reservation.cancel("read nothing")
    with pytest.raises(AttemptAlreadyChargedError) as refused:
        reserve_or_refuse(ledger, cost, context)
    refusal = refused.value
    assert (refusal.dataset, refusal.key, refusal.status) == ("d", attempt_key(context), first)
    assert pickle.loads(pickle.dumps(refused.value)).status == first
    assert len(charges(ledger, "d")) == 1
