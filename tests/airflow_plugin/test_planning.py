"""DAG-level planning on real Airflow 3.3: declared costs composed per dataset before anything runs, the
check command, and the opt-in DAG policy that refuses an over-budget DAG at parse time."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline.accounting import Request, ledger_entries
from tests.airflow_plugin.conftest import EXAMPLE_DAGS, REPO

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _example_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_report.py"))
    assert not bag.import_errors
    return bag.dags["dp_patients_report"]


def test_plan_of_the_example_dag_exceeds_a_budget_for_two(ledger) -> None:
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag, plan_dag

    plan = plan_dag(_example_dag())
    assert [(t.task_id, t.count, t.source) for t in plan.tasks] == [
        ("count_diabetic", 1, "operator"),
        ("count_over_65", 1, "operator"),
        ("sum_of_ages", 1, "operator"),
    ]
    ledger.set_budget("patients", PureDP(1.0))
    (check,) = check_dag(plan, ledger)
    assert (check.dataset, check.total.epsilon, check.budget.epsilon) == ("patients", 1.5, 1.0)
    assert not check.fits_budget and not check.ok
    assert "one run needs ε=1.5 but the whole budget is ε=1" in check.problems[0]
    assert not ledger_entries(ledger.store, "patients")[1:]  # planning charged nothing

    ledger.set_budget("patients", PureDP(1.5))
    (check,) = check_dag(plan, ledger)
    assert check.ok and check.fits_remaining and not check.problems


def test_plan_is_composed_tightly_and_counts_literal_map_indexes(ledger) -> None:
    """40 mapped Gaussian releases at (ε = 0.1, δ = 1e-7) sum to (4, 4e-6) by basic composition, but fit
    an (ε = 3, δ = 1e-5) budget by the tight total of the plan (about 0.54, as ``spend_plan`` charges it).
    A pure plan is read at δ = 0, as ``spend_plan`` charges it, so that it leaves the δ budget alone."""
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import ApproxDP, PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, dp_guard, plan_dag
    from dp_pipeline.mechanisms import Gaussian, Laplace

    ledger.set_budget("cohort", ApproxDP(3.0, 1e-5))
    ledger.set_budget("other", PureDP(1.0))
    with DAG("dp_plan", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator.partial(
            task_id="per_site",
            dataset="cohort",
            mechanism=Gaussian(epsilon=0.1, delta=1e-7, sensitivity=1.0),
            python_callable=len,
        ).expand(op_args=[[i] for i in range(40)])
        source = PythonOperator(task_id="sites", python_callable=lambda: [[1], [2]])
        PrivacyBudgetOperator.partial(
            task_id="per_runtime_site",
            dataset="other",
            mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
            python_callable=len,
            max_map_length=3,
        ).expand(op_args=source.output)
        BashOperator(task_id="export", bash_command="true", pre_execute=dp_guard("other", PureDP(0.2)))
        BashOperator(
            task_id="declared_only",
            bash_command="true",
            params={"dp_cost": {"dataset": "other", "epsilon": 0.1}},
        )

    plan = plan_dag(dag)
    counts = {t.task_id: (t.count, t.source, t.enforced) for t in plan.tasks}
    assert counts == {
        "per_site": (40, "operator", True),
        "per_runtime_site": (3, "operator", True),
        "export": (1, "guard", True),
        "declared_only": (1, "params", False),
    }
    checks = {c.dataset: c for c in check_dag(plan, ledger)}
    cohort = checks["cohort"]
    assert cohort.method != "basic"
    assert 0.4 < cohort.total.epsilon < 0.7 and cohort.total.delta <= 1e-5
    assert cohort.ok
    pure = [Laplace(epsilon=0.1, sensitivity=1.0).event] * 40  # Σε = 4 > 3 at δ = 0
    assert (
        not ledger.quote("cohort", Request.plan(pure)).fits
        and ledger.plan_cost("cohort", pure).guarantee.epsilon >= 4
    )
    other = checks["other"]
    assert other.ok  # 3 × 0.1 (its declared map bound) + 0.2 + 0.1 fits ε = 1
    assert any("declared_only" in w and "not enforced" in w for w in other.warnings)


def test_dag_check_agrees_with_the_accountant_on_a_gdp_rule_budget(ledger) -> None:
    """Three μ = 0.1 Gaussian tasks on an (ε = 1, δ = 1e-6) budget under the μ-GDP rule cost μ = √0.03,
    whose (ε, δ = 1e-6) reading is about 0.95: the plan fits, and the DAG check must say so (it once
    compared the GDP total with the (ε, δ) budget itself and reported "exceeds budget")."""
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import ApproxDP, GaussianDP
    from dp_pipeline.airflow import check_dag, dp_guard, plan_dag
    from dp_pipeline.mechanisms import Gaussian

    ledger.set_budget("visits", ApproxDP(1.0, 1e-6), rule="pure_or_gdp")
    mechanism = Gaussian.from_mu(0.1, sensitivity=1.0)
    with DAG("dp_gdp_plan", schedule=None, start_date=START, catchup=False) as dag:
        for i in range(3):
            PythonOperator(task_id=f"t{i}", python_callable=len, pre_execute=dp_guard("visits", mechanism))
    events = [mechanism.event] * 3
    assert (
        ledger.quote("visits", Request.plan(events)).fits
        and ledger.quote("visits", Request.plan(events), against="budget").fits
    )
    (check,) = check_dag(plan_dag(dag), ledger)
    assert check.fits_budget and check.fits_remaining and check.ok and not check.problems
    mu = GaussianDP(check.total.mu)
    assert abs(mu.mu - 0.03**0.5) < 1e-12 and mu.to_approx_dp(1e-6).epsilon < 1.0


def test_dag_policy_refuses_an_over_budget_dag_at_parse_time(ledger) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.exceptions import AirflowClusterPolicyViolation
    from airflow.settings import get_policy_plugin_manager

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import policies

    ledger.set_budget("patients", PureDP(1.0))
    dag = _example_dag()  # parsed before the policy is registered
    manager = get_policy_plugin_manager()
    manager.register(policies, name="dp_pipeline_policies")
    try:
        with pytest.raises(AirflowClusterPolicyViolation, match=r"patients: one run needs ε=1\.5"):
            DagBag(dag_folder="/dev/null", collect_dags=False).bag_dag(dag)
        # a DAG folder shows it as an import error, as the DAG processor would
        bag = DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_report.py"))
        assert "dp_patients_report" not in bag.dags
        assert any("exceeds its privacy budget" in error for error in bag.import_errors.values())

        ledger.set_budget("patients", PureDP(1.5))
        DagBag(dag_folder="/dev/null", collect_dags=False).bag_dag(dag)
        assert "dp_patients_report" in DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_report.py")).dags
    finally:
        manager.unregister(name="dp_pipeline_policies")

    ledger.set_budget("patients", PureDP(2.0))
    warn = policies.make_dag_policy(mode="warn", ledger_conn_id="missing")
    warn_only = types.SimpleNamespace(dag_policy=warn)
    manager.register(warn_only, name="dp_pipeline_warn_policy")
    try:  # warn mode: an unreadable ledger is logged, the DAG still loads
        DagBag(dag_folder="/dev/null", collect_dags=False).bag_dag(dag)
    finally:
        manager.unregister(name="dp_pipeline_warn_policy")


def test_check_command_reports_plans_and_exits_non_zero_when_one_exceeds(ledger, capfd) -> None:
    from dp_pipeline import PureDP
    from dp_pipeline.airflow.check import main

    ledger.set_budget("patients", PureDP(1.0))
    assert main([str(EXAMPLE_DAGS), "--ledger-url", ledger.store.url]) == 1
    out = capfd.readouterr().out
    assert "dp_patients_report" in out and "EXCEEDS BUDGET" in out and "ε=1.5" in out

    ledger.set_budget("patients", PureDP(1.5))
    assert main([str(EXAMPLE_DAGS), "--json"]) == 0  # through the dp_ledger_default connection
    report = json.loads(capfd.readouterr().out)  # standard output is the JSON alone
    patients = next(c for c in report["checks"] if c["dag_id"] == "dp_patients_report")
    assert patients["fits_budget"] and patients["total"] == {"type": "approx", "epsilon": 1.5, "delta": 0.0}


def test_check_shows_each_dataset_relation_in_the_table_and_json(ledger, capfd) -> None:
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow import check_dag, plan_dag
    from dp_pipeline.airflow.check import main
    from dp_pipeline.airflow.planning import format_checks

    plan = plan_dag(_example_dag())
    ledger.set_budget("patients", PureDP(2.0), relation="add_remove")
    (check,) = check_dag(plan, ledger)
    assert check.relation == ledger.budget("patients").relation == "add_remove"
    header, row = format_checks([check]).splitlines()[:2]
    assert header.split()[2] == "relation" and row.split()[2] == "add_remove"
    assert main([str(EXAMPLE_DAGS), "--json", "--ledger-url", ledger.store.url]) == 0
    report = json.loads(capfd.readouterr().out)
    relations = {c["dataset"]: c["relation"] for c in report["checks"] if c["dag_id"] == "dp_patients_report"}
    assert relations == {"patients": "add_remove"}
    (unbudgeted,) = check_dag(plan, PrivacyAccountant("memory://"))
    assert unbudgeted.relation is None and "has no budget" in unbudgeted.problems[0]


_COMMANDS = {
    "python-m": [sys.executable, "-m", "dp_pipeline.airflow.check"],
    "python-m-former-name": [sys.executable, "-m", "airflow_plugin.check"],
    "airflow-cli": [str(Path(sys.executable).parent / "airflow"), "dp-pipeline", "check-dags"],
    "airflow-cli-old-name": [str(Path(sys.executable).parent / "airflow"), "dp-pipeline", "check"],
}


def _run_check(command: list[str], *args: str, env: dict[str, str] | None = None) -> Any:
    import os

    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONPATH": _this_tree_first(), **(env or {})},
    )


def _this_tree_first() -> str:
    """PYTHONPATH that imports this source tree's packages before any installed copy."""
    import os

    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


@pytest.mark.parametrize("name", list(_COMMANDS))
@pytest.mark.processes
def test_check_command_runs_as_a_module_and_an_airflow_command(ledger, name) -> None:
    from dp_pipeline import PureDP

    ledger.set_budget("patients", PureDP(1.0))
    result = _run_check(_COMMANDS[name], str(EXAMPLE_DAGS / "dp_patients_report.py"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "EXCEEDS BUDGET" in result.stdout


@pytest.mark.parametrize("name", ["python-m", "airflow-cli"])
@pytest.mark.processes
def test_check_json_is_all_of_standard_output_and_logs_go_to_stderr(ledger, name) -> None:
    """Airflow logs "Filling up the DagBag" (and the ledger its migrations) to stdout; the JSON report
    must be parseable as the whole of standard output."""
    from dp_pipeline import PureDP

    ledger.set_budget("patients", PureDP(1.5))
    # INFO: the level at which Airflow logs the DagBag fill; unit-test mode off, as users run it (in that
    # mode Airflow's own start-up, before any command runs, logs which test configuration it loaded)
    env = {"AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO", "AIRFLOW__CORE__UNIT_TEST_MODE": "False"}
    result = _run_check(
        _COMMANDS[name], str(EXAMPLE_DAGS), "--json", "--ledger-url", ledger.store.url, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert {c["dag_id"] for c in report["checks"]} >= {"dp_patients_report"}
    assert report["import_errors"] == {}
    assert "Filling up the DagBag" in result.stderr


@pytest.mark.processes
def test_check_of_a_missing_folder_or_one_without_dags_is_an_error(ledger, tmp_path) -> None:
    missing = _run_check(_COMMANDS["python-m"], str(tmp_path / "dgas"), "--ledger-url", ledger.store.url)
    assert missing.returncode == 2 and missing.stdout == ""
    assert f"no DAG folder or file at {tmp_path / 'dgas'}" in missing.stderr

    (tmp_path / "empty").mkdir()
    empty = _run_check(_COMMANDS["python-m"], str(tmp_path / "empty"), "--ledger-url", ledger.store.url)
    assert empty.returncode == 2 and "no DAG found in" in empty.stderr


@pytest.mark.processes
def test_check_of_a_folder_with_import_errors_exits_2_with_the_errors_in_json(ledger, tmp_path) -> None:
    (tmp_path / "broken_dag.py").write_text("from airflow.sdk import DAG\nraise RuntimeError('broken')\n")
    result = _run_check(_COMMANDS["python-m"], str(tmp_path), "--json", "--ledger-url", ledger.store.url)
    assert result.returncode == 2, result.stdout + result.stderr
    report = json.loads(result.stdout)
    (path,) = report["import_errors"]
    assert path.endswith("broken_dag.py") and "broken" in report["import_errors"][path]


@pytest.mark.parametrize("name", ["python-m", "airflow-cli"])
@pytest.mark.processes
def test_check_without_a_ledger_connection_is_one_line_naming_it(name) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    result = subprocess.run(
        [*_COMMANDS[name], str(EXAMPLE_DAGS), "--conn-id", "my_ledger"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
        check=False,
        env=env,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: no Airflow connection 'my_ledger': define it (e.g. AIRFLOW_CONN_MY_LEDGER=sqlite:////abs/path/"
        "ledger.db or 'airflow connections add'), or pass --ledger-url URL"
    ]
    assert "Traceback" not in result.stderr


@pytest.mark.processes
def test_policies_enabled_through_airflow_local_settings(ledger, tmp_path) -> None:
    """The documented opt-in: importing the policies in airflow_local_settings.py, which Airflow imports
    while it initialises, refuses the over-budget example DAG when a DAG folder is parsed."""
    import os

    from dp_pipeline import PureDP

    ledger.set_budget("patients", PureDP(1.0))
    home = tmp_path / "airflow-home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "airflow_local_settings.py").write_text(
        "from dp_pipeline.airflow.policies import dag_policy, task_policy  # noqa: F401\n"
    )
    code = (
        "import json\n"
        "from airflow.settings import get_policy_plugin_manager\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "hooks = get_policy_plugin_manager().hook\n"
        "impls = hooks.task_policy.get_hookimpls() + hooks.dag_policy.get_hookimpls()\n"
        "active = [i.function.__module__ for i in impls]\n"
        f"bag = DagBag(dag_folder={str(EXAMPLE_DAGS)!r})\n"
        "errors = list(bag.import_errors.values())\n"
        "print(json.dumps({'active': active, 'dags': sorted(bag.dags), 'errors': errors}))\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(home), "PYTHONPATH": _this_tree_first()}
    env.pop("AIRFLOW__CORE__DAGS_FOLDER", None)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["active"].count("dp_pipeline.airflow.policies") == 2
    # ε = 1.0, 0.9, 0.5 and the share 0.5 fit; dp_patients_report (ε = 1.5) does not
    fitting = ["dp_patients_by_region", "dp_patients_spark", "dp_weekly_counts", "dp_weekly_report"]
    assert report["dags"] == fitting
    assert len(report["errors"]) == 1 and "dp_patients_report" in report["errors"][0]
    assert "one run needs ε=1.5 but the whole budget is ε=1" in report["errors"][0]


def test_check_command_escapes_control_characters_in_its_table(ledger, tmp_path, capsys) -> None:
    from dp_pipeline.airflow.check import main

    (tmp_path / "escape_dag.py").write_text(
        "import datetime as dt\n"
        "from airflow.sdk import DAG\n"
        "from airflow_plugin import PrivacyBudgetOperator\n"
        "from dp_pipeline.mechanisms import Laplace\n"
        "with DAG('escapes', schedule=None, start_date=dt.datetime(2026, 1, 1)):\n"
        "    PrivacyBudgetOperator(\n"
        "        task_id='count', dataset='pat\\x1b[2Jients',\n"
        "        mechanism=Laplace(epsilon=0.5, sensitivity=1.0),\n"
        "        python_callable=len,\n"
        "    )\n"
    )
    assert main([str(tmp_path), "--ledger-url", ledger.store.url]) == 1  # the dataset has no budget
    out = capsys.readouterr().out
    assert "escapes" in out and "\x1b" not in out and "pat\\x1b[2Jients" in out


def test_reservation_log_lines_escape_control_characters(caplog) -> None:
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow.attempt import reserve_or_refuse
    from dp_pipeline.airflow.costs import DPCost

    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(1.0))
    ti = types.SimpleNamespace(dag_id="dag", task_id="t", run_id="manual\x1b[2J", map_index=-1, try_number=1)
    with caplog.at_level("INFO", logger="dp_pipeline.airflow.attempt"):
        reserve_or_refuse(accountant, DPCost(dataset="d", cost=PureDP(0.5)), {"ti": ti})
    lines = [record.getMessage() for record in caplog.records]
    assert any("manual\\x1b[2J" in line for line in lines) and not any("\x1b" in line for line in lines)


@pytest.mark.parametrize(
    "url",
    ["postgresql:/alice:S3CRET-PASSWORD-42@db/ledger", "postgresql://alice:S3CRET-PASSWORD-42@127.0.0.1:1/l"],
)
def test_check_command_names_an_unusable_ledger_without_its_password(tmp_path, capsys, url: str) -> None:
    from dp_pipeline.airflow.check import main

    assert main([str(tmp_path), "--ledger-url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot open the ledger") and "alice:***@" in err and "S3CRET" not in err


def test_the_check_shows_what_each_task_pays_before_its_code_runs(ledger, capfd) -> None:
    """The declaration decides what is paid before a task's code runs, and the check says which: a task
    declaring a mechanism is handed it (its draw paid up front), one declaring a guarantee or an event pays
    its releases through ``dp``, whatever the callables' parameters are (here both take ``**context``)."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, dp_task
    from dp_pipeline.airflow.check import _as_dict
    from dp_pipeline.airflow.planning import format_checks
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("patients", PureDP(2.0))
    with DAG("dp_up_front", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="handed",
            dataset="patients",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=lambda **context: None,
        )
        dp_task(dataset="patients", mechanism=Laplace(epsilon=0.5, sensitivity=1.0).event, task_id="event")(
            lambda **context: None
        )()
        dp_task(dataset="patients", mechanism=PureDP(0.25), task_id="budget")(lambda **context: None)()

    (check,) = check_dag(dag, ledger)
    assert {t["task_id"]: t["up_front"] for t in _as_dict(check)["tasks"]} == {
        "handed": "handed_mechanism",
        "event": "budget_through_dp",
        "budget": "budget_through_dp",
    }
    (line,) = [line for line in format_checks([check]).splitlines() if "before the code runs" in line]
    assert "handed: a handed mechanism, its draw paid" in line
    assert "event: its declared cost, paid through dp" in line
    assert "budget: its declared cost, paid through dp" in line
