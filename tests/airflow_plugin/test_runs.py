"""DP tasks run under ``dag.test()`` on real Airflow 3.3, charging a real SQLite ledger through the
``dp_ledger_default`` connection: refusal, retries, mapped tasks and the guard on plain operators."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from dp_pipeline.accounting import ledger_entries
from tests.airflow_plugin._helpers import FailureLog, charges, run_dag, states
from tests.airflow_plugin.conftest import EXAMPLE_DAGS

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_example_dag_third_task_is_refused_and_two_are_committed(ledger) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted

    ledger.set_budget("patients", PureDP(1.0))
    bag = DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_report.py"))
    assert not bag.import_errors
    dag = bag.dags["dp_patients_report"]
    failures = FailureLog()
    for task in dag.tasks:  # retries are allowed: the refusal must still not be retried
        task.retries = 3
        task.retry_delay = dt.timedelta(0)
        task.on_failure_callback = [failures]

    dag_run = run_dag(dag)

    assert states(dag_run) == {
        "count_diabetic": "success",
        "count_over_65": "success",
        "sum_of_ages": "failed",
    }
    refused = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "sum_of_ages")
    assert refused.try_number == 1  # failed at once, despite retries=3
    error = failures.errors["sum_of_ages"]
    assert isinstance(error, PrivacyBudgetExhausted)
    assert error.dataset == "patients"
    for part in ("'patients'", "requested", "spent", "remaining", "requested ε = 0.5", "spent ε = 1"):
        assert part in str(error), part
    recorded = charges(ledger, "patients")
    assert [status for _, status in recorded] == ["committed", "committed"]
    assert [key.split("/")[1] for key, _ in recorded] == ["count_diabetic", "count_over_65"]
    run_id = dag_run.run_id
    assert recorded[0][0] == f"dp_patients_report/count_diabetic/{run_id}/-1/1"
    assert ledger.spent("patients").epsilon == pytest.approx(1.0)
    assert ledger.remaining("patients").epsilon == 0.0


@pytest.fixture
def execution_api(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Airflow's Task Execution API served on 127.0.0.1 (as the API server does), for executor runs."""
    import socket
    import threading
    import time

    import uvicorn
    from airflow.api_fastapi.app import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = uvicorn.Config(create_app(apps="execution"), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the execution API did not start"
        time.sleep(0.05)
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", f"http://127.0.0.1:{port}/execution/")
    yield
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.processes
def test_example_dag_under_the_local_executor(ledger, execution_api) -> None:
    """The production task path: the LocalExecutor runs each task in a supervised subprocess that reaches
    Airflow only through the Task Execution API (no metadata database) and the ledger through the
    ``dp_ledger_default`` connection."""
    from airflow.dag_processing.dagbag import DagBag

    from dp_pipeline import PureDP

    ledger.set_budget("patients", PureDP(1.0))
    dag = DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_report.py")).dags["dp_patients_report"]

    dag_run = run_dag(dag, use_executor=True)

    assert states(dag_run) == {
        "count_diabetic": "success",
        "count_over_65": "success",
        "sum_of_ages": "failed",
    }
    assert [status for _, status in charges(ledger, "patients")] == ["committed", "committed"]
    assert ledger.remaining("patients").epsilon == 0.0
    xcoms = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dag_run.get_task_instances()}
    assert isinstance(xcoms["count_diabetic"], float) and xcoms["sum_of_ages"] is None


def test_retry_policy_started_attempts_stay_charged_early_failures_release(ledger, tmp_path) -> None:
    """``read_then_fail`` fails on its first try after its callable started (it may have read data), then
    succeeds: both attempts are charged. ``never_starts`` fails both tries before its callable runs (its
    arguments cannot be bound): both reservations are released and nothing is spent."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits", PureDP(5.0))
    ledger.set_budget("claims", PureDP(5.0))
    attempts = tmp_path / "attempts.txt"

    def read_then_fail(mechanism: Laplace) -> float:
        with attempts.open("a") as handle:
            handle.write("read\n")
        if attempts.read_text().count("read") == 1:
            raise RuntimeError("the warehouse connection dropped mid-read")
        return float(mechanism.randomize(10.0))

    def needs_an_argument(mechanism: Laplace, table: str) -> float:
        raise AssertionError("never called: 'table' is not provided")

    with DAG("dp_retries", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="read_then_fail",
            dataset="visits",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=read_then_fail,
            retries=1,
            retry_delay=dt.timedelta(0),
        )
        PrivacyBudgetOperator(
            task_id="never_starts",
            dataset="claims",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=needs_an_argument,
            retries=1,
            retry_delay=dt.timedelta(0),
        )

    dag_run = run_dag(dag)

    assert states(dag_run) == {"read_then_fail": "success", "never_starts": "failed"}
    assert attempts.read_text().count("read") == 2
    visits = charges(ledger, "visits")
    assert [status for _, status in visits] == ["committed", "committed"]
    assert [key.rsplit("/", 1)[1] for key, _ in visits] == ["1", "2"]  # one key per try
    assert ledger.spent("visits").epsilon == pytest.approx(1.0)

    claims = charges(ledger, "claims")
    assert [status for _, status in claims] == ["released", "released"]
    assert [key.rsplit("/", 1)[1] for key, _ in claims] == ["1", "2"]
    releases = [entry.reason for entry in ledger_entries(ledger.store, "claims") if entry.kind == "release"]
    assert len(releases) == 2 and all("before its callable ran" in (r or "") for r in releases)
    assert ledger.spent("claims").epsilon == 0.0


def test_mapped_tasks_are_charged_per_map_index(ledger) -> None:
    from airflow.sdk import DAG, task

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("regions", PureDP(1.0))  # two of the three operator map indexes fit
    ledger.set_budget("wards", PureDP(2.0))  # all four decorator map indexes fit

    def count_region(mechanism: Laplace, region: str) -> float:
        return float(mechanism.randomize(float(len(region))))

    with DAG("dp_mapped", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator.partial(
            task_id="count_region",
            dataset="regions",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=count_region,
        ).expand(op_kwargs=[{"region": "north"}, {"region": "south"}, {"region": "east"}])

        # dp_task, registered by provider info
        @task.dp(dataset="wards", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
        def count_ward(ward: int, mechanism: Laplace) -> float:
            return float(mechanism.randomize(float(ward)))

        count_ward.expand(ward=[1, 2, 3, 4])

    dag_run = run_dag(dag)

    result = states(dag_run)
    region_states = {name: state for name, state in result.items() if name.startswith("count_region")}
    assert sorted(region_states.values()) == ["failed", "success", "success"]
    committed = {key.split("/")[3] for key, status in charges(ledger, "regions") if status == "committed"}
    # "count_region[i]" -> "i"
    succeeded = {name[13:-1] for name, state in region_states.items() if state == "success"}
    assert committed == succeeded and len(committed) == 2
    assert all(key.endswith("/1") for key, _ in charges(ledger, "regions"))

    assert [result[f"count_ward[{i}]"] for i in range(4)] == ["success"] * 4
    wards = charges(ledger, "wards")
    assert sorted(key.split("/")[3] for key, _ in wards) == ["0", "1", "2", "3"]
    assert ledger.spent("wards").epsilon == pytest.approx(2.0)


def test_guard_on_plain_python_and_bash_operators(ledger, tmp_path) -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted, dp_guard
    from dp_pipeline.airflow.exceptions import PrivacyCostError
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("exports", PureDP(1.0))
    ledger.set_budget("audits", PureDP(0.5))
    out = tmp_path / "ran.txt"
    failures = FailureLog()

    def python_export() -> str:
        with out.open("a") as handle:
            handle.write("python\n")
        return "ok"

    with DAG("dp_guarded", schedule=None, start_date=START, catchup=False) as dag:
        first = PythonOperator(
            task_id="python_export",
            python_callable=python_export,
            pre_execute=dp_guard("exports", Laplace(epsilon=0.6, sensitivity=1.0)),
        )
        second = BashOperator(
            task_id="bash_export",
            bash_command=f"echo bash >> {out}",
            pre_execute=dp_guard("exports", Laplace(epsilon=0.6, sensitivity=1.0)),  # 0.6 + 0.6 > 1: refused
            retries=2,
            on_failure_callback=failures,
            trigger_rule="all_done",
        )
        audit = BashOperator(
            task_id="bash_audit",
            bash_command=f"echo audit >> {out}",
            pre_execute=dp_guard("audits", PureDP(0.5), on_exhausted="skip"),
            trigger_rule="all_done",
        )
        audit_again = BashOperator(
            task_id="bash_audit_again",
            bash_command=f"echo audit-again >> {out}",
            pre_execute=dp_guard("audits", PureDP(0.5), on_exhausted="skip"),
            trigger_rule="all_done",
        )
        no_budget = BashOperator(
            task_id="no_budget",
            bash_command=f"echo no-budget >> {out}",
            pre_execute=dp_guard("nobody_set_a_budget", PureDP(0.1)),
            retries=2,
            on_failure_callback=failures,
            trigger_rule="all_done",
        )
        first >> second >> audit >> audit_again >> no_budget

    dag_run = run_dag(dag)

    assert states(dag_run) == {
        "python_export": "success",
        "bash_export": "failed",
        "bash_audit": "success",
        "bash_audit_again": "skipped",
        "no_budget": "failed",
    }
    assert out.read_text().splitlines() == ["python", "audit"]  # the refused commands never ran
    assert isinstance(failures.errors["bash_export"], PrivacyBudgetExhausted)
    assert isinstance(failures.errors["no_budget"], PrivacyCostError)  # a missing budget is not retried
    message = str(failures.errors["no_budget"])
    assert "nobody_set_a_budget" in message and ".." not in message
    assert f"in the ledger {ledger.store.url}" in message  # the ledger is named
    tries = {ti.task_id: ti.try_number for ti in dag_run.get_task_instances()}
    assert tries["bash_export"] == 1 and tries["no_budget"] == 1
    assert [s for _, s in charges(ledger, "exports")] == ["committed"]
    assert [s for _, s in charges(ledger, "audits")] == ["committed"]


def test_cluster_policy_guards_any_operator_declaring_a_cost(ledger, tmp_path) -> None:
    import types

    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG
    from airflow.settings import get_policy_plugin_manager

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import policies

    ledger.set_budget("billing", PureDP(1.0))
    out = tmp_path / "ran.txt"
    with DAG("dp_policy", schedule=None, start_date=START, catchup=False) as dag:
        first = BashOperator(
            task_id="declared",
            bash_command=f"echo declared >> {out}",
            params={"dp_cost": {"dataset": "billing", "epsilon": 0.7}},
        )
        second = BashOperator(
            task_id="declared_too",
            bash_command=f"echo declared_too >> {out}",
            params={"dp_cost": {"dataset": "billing", "epsilon": 0.7}},
            trigger_rule="all_done",
        )
        plain = BashOperator(task_id="plain", bash_command=f"echo plain >> {out}", trigger_rule="all_done")
        first >> second >> plain

    manager = get_policy_plugin_manager()
    only_task_policy = types.SimpleNamespace(task_policy=policies.task_policy)
    manager.register(only_task_policy, name="dp_pipeline_test_policies")
    try:
        dag_run = run_dag(dag)  # bagging the DAG applies the cluster policies, as the DAG processor does
    finally:
        manager.unregister(name="dp_pipeline_test_policies")

    assert states(dag_run) == {"declared": "success", "declared_too": "failed", "plain": "success"}
    assert out.read_text().splitlines() == ["declared", "plain"]
    assert [s for _, s in charges(ledger, "billing")] == ["committed"]
    assert ledger.spent("billing").epsilon == pytest.approx(0.7)



def test_an_attempt_whose_key_is_already_committed_does_not_run_again(ledger, tmp_path) -> None:
    """The same key never charges twice; so an attempt executed a second time must not release again."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("repeat", PureDP(5.0))
    ran = tmp_path / "ran.txt"
    failures = FailureLog()
    logical_date = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    with DAG("dp_repeat", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="release",
            dataset="repeat",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=lambda: ran.write_text("ran"),
            on_failure_callback=failures,
        )
    # the ledger already has this attempt's key committed, as if the attempt had run once
    key = f"dp_repeat/release/manual__{logical_date.isoformat()}/-1/1"
    ledger.spend("repeat", Laplace(epsilon=0.5, sensitivity=1.0), key=key)

    dag_run = run_dag(dag, logical_date=logical_date, run_after=logical_date)

    assert dag_run.run_id == f"manual__{logical_date.isoformat()}"
    assert states(dag_run) == {"release": "failed"}
    assert isinstance(failures.errors["release"], AttemptAlreadyChargedError)
    assert not ran.exists()
    assert charges(ledger, "repeat") == [(key, "committed")]
