"""The DAG check counts what a run can really cost, and real Airflow 3.3 runs charge no more than it counted:
every attempt a retry can start, every map index up to the task's map bound, and the dataset a templated
name renders to for the run's logical date."""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace
from typing import Any

import pytest

from dp_pipeline.accounting import Request
from tests.airflow_plugin._helpers import charges, run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
MONDAY = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)


def test_retries_are_counted_in_the_plan_and_a_run_charges_what_was_counted(any_ledger, tmp_path) -> None:
    """``retries=2``: up to three attempts start the callable and each is charged (it may have read data,
    and the next attempt redraws noise). The check counts three Laplace releases of ε = 0.5, whose total is
    3 × 0.5 = 1.5 (pure ε adds up, and the tight total of pure Laplace releases is that sum): an ε = 1.4
    budget cannot hold one run, though it holds one attempt. A run whose callable fails twice after it
    started is then charged exactly the counted total."""
    ledger = any_ledger
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, plan_dag
    from dp_pipeline.mechanisms import Laplace

    attempts = tmp_path / "attempts.txt"

    def fails_twice(mechanism: Laplace) -> float:
        with attempts.open("a") as handle:
            handle.write("x")
        if len(attempts.read_text()) < 3:
            raise RuntimeError("the warehouse dropped the connection after the read")
        return float(mechanism.randomize(10.0))

    with DAG("dp_retried", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="flaky",
            dataset="visits",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=fails_twice,
            retries=2,
            retry_delay=dt.timedelta(0),
        )

    (planned,) = plan_dag(dag).tasks
    assert (planned.count, planned.attempts, planned.releases) == (1, 3, 3)
    ledger.set_budget("visits", PureDP(1.4))
    (check,) = check_dag(dag, ledger)
    assert check.total.epsilon == pytest.approx(3 * 0.5) and not check.ok
    assert "one run needs ε=1.5 but the whole budget is ε=1.4" in check.problems[0]
    assert ledger.quote(
        "visits", Request.plan([Laplace(epsilon=0.5, sensitivity=1.0)])
    ).fits  # one attempt would fit

    ledger.set_budget("visits", PureDP(1.5))
    (check,) = check_dag(dag, ledger)
    assert check.ok

    dag_run = run_dag(dag)

    assert states(dag_run) == {"flaky": "success"}
    assert len(attempts.read_text()) == 3
    recorded = charges(ledger, "visits")
    assert [key.rsplit("/", 1)[1] for key, _ in recorded] == ["1", "2", "3"]
    assert {status for _, status in recorded} == {"committed"}
    assert ledger.spent("visits").epsilon == pytest.approx(check.total.epsilon)


def test_a_mapped_task_is_counted_and_charged_up_to_its_map_bound(ledger, monkeypatch) -> None:
    """Mapped over an upstream result, a task's map length is known only at run time. The check counts
    its declared ``max_map_length`` (else Airflow's ``[core] max_map_length``), and a run refuses every
    map index beyond that bound before it reads data, on an operator and on a guarded operator alike: the
    upstream returns three values, two map indexes of each task are charged, the third is refused."""
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, task

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, dp_guard, plan_dag
    from dp_pipeline.airflow.exceptions import PrivacyCostError
    from dp_pipeline.mechanisms import Laplace

    def unbounded_dag() -> Any:
        with DAG("dp_unbounded_map", schedule=None, start_date=START, catchup=False) as dag:

            @task
            def site_ids() -> list[list[int]]:
                return [[1], [2], [3]]

            PrivacyBudgetOperator.partial(
                task_id="per_site",
                dataset="sites",
                mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
                python_callable=lambda site: site,
            ).expand(op_args=site_ids())
        return dag

    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "5")
    (planned,) = plan_dag(unbounded_dag()).tasks
    assert (planned.count, planned.bound) == (5, "airflow")
    ledger.set_budget("sites", PureDP(0.5))
    (check,) = check_dag(unbounded_dag(), ledger)
    assert check.total.epsilon == pytest.approx(5 * 0.1) and check.ok
    assert "counted at Airflow's [core] max_map_length (5): per_site" in check.warnings[0]

    failures: dict[str, BaseException] = {}

    def keep(context: Any) -> None:
        failures[f"{context['ti'].task_id}[{context['ti'].map_index}]"] = context["exception"]

    with DAG("dp_bounded_map", schedule=None, start_date=START, catchup=False) as dag:

        @task
        def sites() -> list[list[int]]:
            return [[1], [2], [3]]

        @task
        def commands() -> list[str]:
            return ["echo 1", "echo 2", "echo 3"]

        PrivacyBudgetOperator.partial(
            task_id="per_site",
            dataset="sites",
            mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
            python_callable=lambda site: site,
            max_map_length=2,
            on_failure_callback=keep,
        ).expand(op_args=sites())
        BashOperator.partial(
            task_id="export",
            pre_execute=dp_guard("sites", PureDP(0.2), max_map_length=2),
            on_failure_callback=keep,
        ).expand(bash_command=commands())

    plan = plan_dag(dag)
    assert {(t.task_id, t.count, t.bound) for t in plan.tasks} == {
        ("per_site", 2, "declared"),
        ("export", 2, "declared"),
    }
    ledger.set_budget("sites", PureDP(2 * 0.1 + 2 * 0.2))
    (check,) = check_dag(plan, ledger)
    assert check.total.epsilon == pytest.approx(0.6) and check.ok and not check.warnings

    dag_run = run_dag(dag)

    assert states(dag_run) == {
        "sites": "success",
        "commands": "success",
        "per_site[0]": "success",
        "per_site[1]": "success",
        "per_site[2]": "failed",
        "export[0]": "success",
        "export[1]": "success",
        "export[2]": "failed",
    }
    for name in ("per_site[2]", "export[2]"):
        assert isinstance(failures[name], PrivacyCostError)
        assert "map index 2 is beyond its declared max_map_length (2)" in str(failures[name])
    recorded = charges(ledger, "sites")
    assert sorted(key.split("/")[1] + "/" + key.split("/")[3] for key, _ in recorded) == [
        "export/0",
        "export/1",
        "per_site/0",
        "per_site/1",
    ]
    assert ledger.spent("sites").epsilon == pytest.approx(check.total.epsilon)


def test_a_map_index_whose_cost_an_upstream_result_sets_is_refused_before_it_reads_data(any_ledger) -> None:
    """``expand_kwargs`` over an upstream result is only known at run time, so the check counts each map
    index at the cost its ``.partial()`` declares. A mapping that also sets ``group_size`` (or, with
    ``strict=False``, overrides the dataset) would charge what the plan never counted: each such map index
    is refused before its code runs and charges nothing, on either dataset; a mapping over the callable's
    arguments alone runs and charges exactly what the check counted."""
    ledger = any_ledger
    from airflow.sdk import DAG, task

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag
    from dp_pipeline.airflow.exceptions import PrivacyCostError
    from dp_pipeline.mechanisms import Laplace

    failures: dict[str, BaseException] = {}
    ran: list[int] = []

    def keep(context: Any) -> None:
        failures[f"{context['ti'].task_id}[{context['ti'].map_index}]"] = context["exception"]

    def read(site: int) -> int:
        ran.append(site)
        return site

    with DAG("dp_mapped_from_upstream", schedule=None, start_date=START, catchup=False) as dag:

        @task
        def plain() -> list[dict[str, Any]]:
            return [{"op_args": [1]}, {"op_args": [2]}]

        @task
        def grouped() -> list[dict[str, Any]]:
            return [{"op_args": [3], "group_size": 3}, {"op_args": [4]}]

        @task
        def redirected() -> list[dict[str, Any]]:
            return [{"op_args": [5], "dataset": "elsewhere"}]

        for task_id, upstream, strict in (
            ("per_site", plain(), True),
            ("per_group", grouped(), True),
            ("per_other", redirected(), False),
        ):
            PrivacyBudgetOperator.partial(
                task_id=task_id,
                dataset="sites",
                mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
                python_callable=read,
                max_map_length=2,
                on_failure_callback=keep,
            ).expand_kwargs(upstream, strict=strict)

    ledger.set_budget("sites", PureDP(5.0))
    ledger.set_budget("elsewhere", PureDP(5.0))
    (check,) = check_dag(dag, ledger)
    assert check.ok and check.total.epsilon == pytest.approx(3 * 2 * 0.1)

    dag_run = run_dag(dag)

    assert {name: state for name, state in states(dag_run).items() if name.startswith("per_")} == {
        "per_site[0]": "success",
        "per_site[1]": "success",
        "per_group[0]": "failed",
        "per_group[1]": "success",
        "per_other[0]": "failed",
    }
    assert sorted(ran) == [1, 2, 4]
    assert isinstance(failures["per_group[0]"], PrivacyCostError)
    assert "costs Laplace ε=0.1 (groups of 3) on 'sites'" in str(failures["per_group[0]"])
    assert "declare Laplace ε=0.1 on 'sites'" in str(failures["per_group[0]"])
    assert isinstance(failures["per_other[0]"], PrivacyCostError)
    assert "on 'elsewhere'" in str(failures["per_other[0]"])
    assert ledger.history("elsewhere") == []
    assert sorted(key.split("/")[1] + "/" + key.split("/")[3] for key, _ in charges(ledger, "sites")) == [
        "per_group/1",
        "per_site/0",
        "per_site/1",
    ]
    assert ledger.spent("sites").epsilon == pytest.approx(3 * 0.1)


def _templated_dag() -> Any:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, dp_guard, dp_task
    from dp_pipeline.mechanisms import Laplace

    with DAG("dp_templated", schedule="@weekly", start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="count",
            dataset="visits/{{ ds }}",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=lambda dataset: dataset,
        )
        PythonOperator(
            task_id="export",
            python_callable=lambda: "exported",
            pre_execute=dp_guard("visits/{{ ds_nodash }}", PureDP(0.25)),
        )

        @dp_task(dataset="visits/{{ ds }}", mechanism=Laplace(epsilon=0.25, sensitivity=1.0))
        def summary(dataset: str) -> str:
            return dataset

        summary()
    return dag


def test_a_templated_dataset_is_checked_and_charged_under_its_rendered_name(any_ledger, caplog) -> None:
    """``dataset`` is a template field of the operator and the decorator, and a guard renders its own: a
    run charges the name rendered for its logical date, the name the check renders for that date. Without
    a date the check reports each template unchecked, and the DAG policy (parse time, no date) lets the DAG
    load."""
    ledger = any_ledger
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag
    from dp_pipeline.airflow.decorators import _DPDecoratedOperator
    from dp_pipeline.airflow.policies import make_dag_policy

    assert "dataset" in PrivacyBudgetOperator.template_fields
    assert "dataset" in _DPDecoratedOperator.template_fields
    ledger.set_budget("visits/2026-03-02", PureDP(1.0))
    ledger.set_budget("visits/20260302", PureDP(0.25))

    unrendered = check_dag(_templated_dag(), ledger)
    assert {(c.dataset, c.checked, c.ok) for c in unrendered} == {
        ("visits/{{ ds }}", False, False),
        ("visits/{{ ds_nodash }}", False, False),
    }
    assert all(c.budget is None and c.total is None for c in unrendered)
    assert "needs a logical date" in unrendered[0].warnings[0]
    with caplog.at_level("WARNING"):
        make_dag_policy(mode="refuse")(_templated_dag())  # nothing to refuse before a run has a date

    checks = {c.dataset: c for c in check_dag(_templated_dag(), ledger, logical_date="2026-03-02")}
    assert set(checks) == {"visits/2026-03-02", "visits/20260302"}
    assert checks["visits/2026-03-02"].total.epsilon == pytest.approx(0.5 + 0.25)
    assert all(c.checked and c.ok for c in checks.values())
    assert {t.template for c in checks.values() for t in c.tasks} == {
        "visits/{{ ds }}",
        "visits/{{ ds_nodash }}",
    }

    dag_run = run_dag(_templated_dag(), logical_date=MONDAY)

    assert states(dag_run) == {"count": "success", "export": "success", "summary": "success"}
    xcoms = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dag_run.get_task_instances()}
    assert xcoms["count"] == xcoms["summary"] == "visits/2026-03-02"  # the callable sees the rendered name
    assert sorted(key.split("/")[1] for key, _ in charges(ledger, "visits/2026-03-02")) == [
        "count",
        "summary",
    ]
    assert [key.split("/")[1] for key, _ in charges(ledger, "visits/20260302")] == ["export"]
    for dataset, check in checks.items():
        assert ledger.spent(dataset).epsilon == pytest.approx(check.total.epsilon)


def test_a_template_that_renders_to_no_name_fails_the_task_without_a_charge(ledger) -> None:
    from airflow.sdk import DAG

    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.mechanisms import Laplace

    with DAG("dp_empty_name", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="count",
            dataset="{{ params.name }}",
            params={"name": ""},
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=lambda: 1,
        )

    dag_run = run_dag(dag)

    assert states(dag_run) == {"count": "failed"}
    assert ledger.datasets() == []


def test_check_command_renders_templates_for_the_logical_date_given(ledger, tmp_path, capsys) -> None:
    """Without ``--logical-date`` the check cannot be made for names templated on the date (exit 2, the
    templates named on stderr); with it, the rendered names are checked against their budgets."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow.check import main

    (tmp_path / "templated_dag.py").write_text(
        "import datetime as dt\n"
        "from airflow.sdk import DAG\n"
        "from dp_pipeline.airflow import PrivacyBudgetOperator\n"
        "from dp_pipeline.mechanisms import Laplace\n"
        "with DAG('weekly', schedule='@weekly', start_date=dt.datetime(2026, 1, 1)):\n"
        "    PrivacyBudgetOperator(\n"
        "        task_id='count', dataset='visits/{{ ds }}', retries=1,\n"
        "        mechanism=Laplace(epsilon=0.5, sensitivity=1.0), python_callable=len,\n"
        "    )\n"
    )
    ledger.set_budget("visits/2026-03-02", PureDP(1.0))

    assert main([str(tmp_path), "--ledger-url", ledger.store.url]) == 2
    captured = capsys.readouterr()
    assert "UNCHECKED (template)" in captured.out
    assert "templated dataset names not rendered: weekly: visits/{{ ds }}" in captured.err

    assert (
        main([str(tmp_path), "--ledger-url", ledger.store.url, "--logical-date", "2026-03-02", "--json"]) == 0
    )
    (check,) = json.loads(capsys.readouterr().out)["checks"]
    assert check["dataset"] == "visits/2026-03-02" and check["checked"] and check["fits_budget"]
    (planned,) = check["tasks"]
    assert (planned["template"], planned["attempts"], planned["releases"]) == ("visits/{{ ds }}", 2, 2)
    assert check["total"]["epsilon"] == pytest.approx(2 * 0.5)

    assert main([str(tmp_path), "--ledger-url", ledger.store.url, "--logical-date", "next monday"]) == 2
    assert "is not a date" in capsys.readouterr().err


def test_the_check_renders_a_name_as_the_task_runner_does(ledger) -> None:
    """A name built from every date key the check renders (and a macro) is charged, by a real run with a
    logical date given in another time zone, under exactly the name the check renders for that date; a
    name that needs the run id is reported per template even with a date."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, plan_dag
    from dp_pipeline.airflow.templating import DATE_KEYS
    from dp_pipeline.mechanisms import Laplace

    name = "v/" + "/".join(f"{{{{ {key} }}}}" for key in DATE_KEYS) + "/{{ macros.ds_add(ds, -7) }}"
    with DAG("dp_names", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="count",
            dataset=name,
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=len,
            op_args=[[1]],
        )
        PrivacyBudgetOperator(
            task_id="per_run",
            dataset="v/{{ run_id }}",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=len,
            op_args=[[1]],
        )
    local = dt.datetime(2026, 3, 2, 6, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    plan = plan_dag(dag, logical_date=local)
    rendered, per_run = plan.tasks
    assert (
        rendered.unrendered is None
        and per_run.unrendered is not None
        and per_run.cost.dataset == "v/{{ run_id }}"
    )
    ledger.set_budget(rendered.cost.dataset, PureDP(1.0))

    dag_run = run_dag(dag, logical_date=local)

    assert states(dag_run)["count"] == "success"
    (charged,) = [d for d in ledger.datasets() if d.startswith("v/2026")]
    assert charged == rendered.cost.dataset
    assert charged.startswith("v/2026-03-02 04:30:00+00:00/2026-03-02/20260302/")  # the date in UTC
    assert charged.endswith("/2026-02-23")
    (check,) = [c for c in check_dag(plan, ledger) if c.checked]
    assert check.dataset == charged and check.ok


def test_a_template_that_fails_on_a_value_does_not_quote_it() -> None:
    """A dataset template whose macro raises on the value it read (a parameter, a Variable) names the error's
    type, never its message, which would quote the value; Jinja's own errors (about the template) are
    shown whole."""
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow.templating import render_dataset
    from dp_pipeline.exceptions import InvalidParameterError

    with DAG("dp_template_secret", schedule=None, start_date=START):
        task = EmptyOperator(task_id="t")
    secret = "s3cr3t-api-token"
    context = {"params": {"code": secret}, "macros": SimpleNamespace(datetime=dt.datetime)}
    template = "visits/{{ macros.datetime.strptime(params.code, '%Y') }}"
    with pytest.raises(InvalidParameterError) as refused:
        render_dataset(task, template, context)
    assert "ValueError" in str(refused.value) and secret not in str(refused.value)
    assert refused.value.__cause__ is not None and secret in str(refused.value.__cause__)  # it did read it
    with pytest.raises(InvalidParameterError, match="is undefined"):
        render_dataset(task, "visits/{{ missing.day }}", context)
