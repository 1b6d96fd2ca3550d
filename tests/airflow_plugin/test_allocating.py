"""Budget shares and free noise at DAG-definition and DAG-check time (no run): what ``run_budget(share=...)``
and a :class:`PlannedRelease` cost accept, what the DAG check, its command and the DAG policy report.
Calibrations are checked against closed forms computed here."""

from __future__ import annotations

import datetime as dt
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline.accounting import ledger_entries

pytestmark = pytest.mark.airflow

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _dag(
    dag_id: str, tasks: dict[str, Any], *, dataset: str = "visits", share: Any = None, per_run: bool = True
) -> Any:
    """A DAG of independent ``@dp_task`` tasks on ``dataset`` (task id → declared mechanism)."""
    from airflow.sdk import DAG

    from dp_pipeline.airflow import dp_task, run_budget

    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        for task_id, mechanism in tasks.items():
            dp_task(dataset=dataset, mechanism=mechanism, task_id=task_id)(lambda mechanism: 0.0)()
    if per_run:
        run_budget(dag, share=share)
    return dag


def test_run_budget_takes_a_share_and_refuses_a_malformed_one() -> None:
    from dp_pipeline import ApproxDP, InvalidParameterError, PlannedRelease, PureDP
    from dp_pipeline.airflow import plan_dag

    free = {"count": PlannedRelease("laplace", sensitivity=1.0)}
    for share, match in [
        (0.5, "must be a guarantee"),
        ({"": PureDP(1.0)}, "non-empty strings"),
        ({"visits": 0.5}, "the share of 'visits' must be"),
    ]:
        dag = _dag(f"dp_bad_share_{len(match)}", free, per_run=False)
        from dp_pipeline.airflow import run_budget

        with pytest.raises(InvalidParameterError, match=match):
            run_budget(dag, share=share)
        assert not any(t.task_id == "dp_reserve_run" for t in dag.tasks)  # nothing added
    plan = plan_dag(_dag("dp_good_share", free, share={"visits": ApproxDP(1.0, 1e-6)}))
    assert plan.run_budget and plan.share == {"visits": ApproxDP(1.0, 1e-6)}
    assert not plan_dag(_dag("dp_no_run", free, per_run=False)).run_budget


def test_a_free_cost_checks_its_release_and_has_no_event_until_calibrated() -> None:
    from dp_pipeline import InvalidParameterError, PlannedRelease
    from dp_pipeline.airflow import DPCost, PrivacyBudgetOperator

    with pytest.raises(InvalidParameterError, match="'sensitivity' is required"):
        DPCost("visits", PlannedRelease("gaussian"))
    with pytest.raises(InvalidParameterError, match="give the group size once"):
        DPCost("visits", PlannedRelease("gaussian", sensitivity=1.0, group_size=3), group_size=2)
    cost = DPCost("visits", PlannedRelease("gaussian", sensitivity=1.0, weight=4.0), group_size=2)
    assert cost.free == PlannedRelease("gaussian", sensitivity=1.0, weight=4.0, group_size=2)
    assert cost.describe() == "gaussian noise left free (Δ=1, weight 4, groups of 2) on 'visits'"
    with pytest.raises(InvalidParameterError, match="left free: its cost is known once"):
        _ = cost.event
    with pytest.raises(InvalidParameterError, match="'sensitivity' is required"):
        PrivacyBudgetOperator(
            task_id="t", dataset="visits", mechanism=PlannedRelease("laplace"), python_callable=len
        )


def test_the_check_reports_each_free_tasks_noise_calibrated_to_the_share(ledger) -> None:
    """GaussianDP(1) share, two free Gaussians of weights 1 and 3 and sensitivity 2: σᵢ = Δ√(Σw)/(μ√wᵢ)
    = 4 and 4/√3 (Σ(Δ/σᵢ)² = μ²); the table notes them beside the share."""
    from dp_pipeline import GaussianDP, PlannedRelease
    from dp_pipeline.airflow import check_dag
    from dp_pipeline.airflow.planning import format_checks

    ledger.set_budget("visits", GaussianDP(3.0))
    tasks = {
        "light": PlannedRelease("gaussian", sensitivity=2.0),
        "heavy": PlannedRelease("gaussian", sensitivity=2.0, weight=3.0),
    }
    (check,) = check_dag(_dag("dp_check_share", tasks, share=GaussianDP(1.0)), ledger)
    assert check.ok and check.share == GaussianDP(1.0) and check.method == "gdp"
    light, heavy = check.calibrated["light"].mechanism.sigma, check.calibrated["heavy"].mechanism.sigma
    assert 4.0 * (1 - 1e-12) <= light <= 4.0 * 1.005 and heavy == pytest.approx(
        light / math.sqrt(3), rel=1e-12
    )
    assert check.total.mu <= 1.0  # the plan costs the share or less
    assert {t.task_id: t.cost.describe().split(" ")[0] for t in check.tasks} == {
        "light": "Gaussian",
        "heavy": "Gaussian",
    }
    table = format_checks([check])
    assert (
        "run share μ=1, calibrating light: Gaussian σ=" in table and f"heavy: Gaussian σ={heavy:.6g}" in table
    )


def test_a_pure_plan_under_a_share_is_priced_at_the_shares_delta(ledger) -> None:
    """Laplace tasks of weights 1 and 4 under the share ApproxDP(1, 1e-6) of an (ε, δ) budget are calibrated
    at the share's δ (allocate uses its target's δ): the plan's tight total stays within the share, the noise
    is no larger than Σ Δ/bᵢ = 1 at δ = 0 needs (exact sums, computed here), and the heavier task has half
    the standard deviation."""
    from dp_pipeline import ApproxDP, PlannedRelease
    from dp_pipeline.airflow import check_dag

    ledger.set_budget("visits", ApproxDP(2.0, 1e-5))
    tasks = {
        "a": PlannedRelease("laplace", sensitivity=1.0),
        "b": PlannedRelease("laplace", sensitivity=1.0, weight=4.0),
    }
    (check,) = check_dag(_dag("dp_check_pure", tasks, share=ApproxDP(1.0, 1e-6)), ledger)
    scales = {task: release.mechanism.scale for task, release in check.calibrated.items()}
    assert scales["b"] == pytest.approx(scales["a"] / 2, rel=1e-12)
    epsilons = math.fsum(1.0 / b for b in scales.values())
    assert epsilons >= 1.0 - 1e-5  # at least the loss the δ = 0 calibration allowed
    assert check.total.delta <= 1e-6 and check.total.epsilon <= 1.0


def test_shares_that_cannot_hold_the_plan_are_problems_of_the_check(ledger) -> None:
    from dp_pipeline import ApproxDP, GaussianDP, PlannedRelease, PureDP
    from dp_pipeline.airflow import check_dag
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits", ApproxDP(3.0, 1e-5))
    free = PlannedRelease("laplace", sensitivity=1.0)
    cases = [
        ({"count": free}, GaussianDP(1.0), "not in the currency of its budget"),
        (
            {"fixed": Laplace(epsilon=0.6, sensitivity=1.0)},
            PureDP(0.5),
            "need ε=0.6, more than the run's share",
        ),
        (
            {"fixed": Laplace(epsilon=0.6, sensitivity=1.0), "count": free},
            PureDP(0.5),
            "cannot hold its plan",
        ),
        ({"count": PlannedRelease("gaussian", sensitivity=1.0)}, PureDP(0.5), "cannot hold its plan"),
    ]
    for index, (tasks, share, problem) in enumerate(cases):
        (check,) = check_dag(_dag(f"dp_check_bad_share_{index}", tasks, share=share), ledger)
        assert not check.ok and check.total is None
        assert any(problem in p for p in check.problems), (problem, check.problems)
    fitting = {"fixed": Laplace(epsilon=0.4, sensitivity=1.0)}
    (check,) = check_dag(_dag("dp_check_fixed_share", fitting, share=PureDP(0.5)), ledger)
    assert check.ok and check.total.epsilon == pytest.approx(0.4) and not check.calibrated


def test_a_share_named_by_its_template_calibrates_the_rendered_dataset(ledger) -> None:
    from dp_pipeline import GaussianDP, PlannedRelease
    from dp_pipeline.airflow import check_dag

    ledger.set_budget("visits/2026-03-02", GaussianDP(2.0))
    dag = _dag(
        "dp_check_template_share",
        {"count": PlannedRelease("gaussian", sensitivity=1.0)},
        dataset="visits/{{ ds }}",
        share={"visits/{{ ds }}": GaussianDP(0.5)},
    )
    (check,) = check_dag(dag, ledger, logical_date="2026-03-02")
    assert check.dataset == "visits/2026-03-02" and check.ok
    assert check.calibrated["count"].mechanism.sigma == pytest.approx(2.0, rel=1e-5)  # σ = Δ/μ
    (unrendered,) = check_dag(dag, ledger)
    assert not unrendered.checked and not unrendered.calibrated


def test_the_check_command_prints_the_calibration_as_json(ledger, tmp_path: Path, capfd) -> None:
    from dp_pipeline import GaussianDP
    from dp_pipeline.airflow.check import main

    ledger.set_budget("visits", GaussianDP(2.0))
    (tmp_path / "share_dag.py").write_text(
        textwrap.dedent(
            """
            import datetime as dt
            from airflow.sdk import DAG
            from dp_pipeline.airflow import dp_task, run_budget
            from dp_pipeline import GaussianDP, PlannedRelease

            with DAG("dp_json_share", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
                @dp_task(dataset="visits", mechanism=PlannedRelease("gaussian", sensitivity=1.0), retries=1)
                def count(mechanism):
                    return 0.0
                count()
            run_budget(dag, share=GaussianDP(1.0))
            """
        )
    )
    assert main([str(tmp_path), "--json", "--ledger-url", ledger.store.url]) == 0
    (check,) = json.loads(capfd.readouterr().out)["checks"]
    assert check["share"] == {"type": "gdp", "mu": 1.0}
    (task,) = check["tasks"]
    assert task["releases"] == 2 and task["calibrated"]["mechanism"] == "Gaussian"
    sigma = task["calibrated"]["sigma"]
    assert math.sqrt(2.0) * (1 - 1e-12) <= sigma <= math.sqrt(2.0) * 1.005  # two attempts: 2(1/σ)² = 1
    assert task["calibrated"]["event"]["parameters"]["sigma"] == sigma


def test_the_dag_policy_refuses_a_free_task_outside_a_run_budget(ledger) -> None:
    from airflow.exceptions import AirflowClusterPolicyViolation

    from dp_pipeline import ApproxDP, PlannedRelease
    from dp_pipeline.airflow.policies import make_dag_policy

    ledger.set_budget("visits", ApproxDP(1.0, 1e-6))
    dag = _dag("dp_policy_free", {"count": PlannedRelease("gaussian", sensitivity=1.0)}, per_run=False)
    with pytest.raises(AirflowClusterPolicyViolation, match="leave their noise free"):
        make_dag_policy()(dag)
    assert [r.kind for r in ledger_entries(ledger.store, "visits")] == ["budget"]


def test_calibrations_are_remembered_and_releases_that_cannot_be_keys_are_calibrated_anew(ledger) -> None:
    """A second check of the same plan reuses the calibration (the DAG policy checks at every parse); a
    randomized response over a list of categories cannot be a key and is calibrated each time, the same:
    one release under the pure share ε = 1 gets ε within 1e-5 below it."""
    from dp_pipeline import PlannedRelease, PureDP
    from dp_pipeline.airflow import check_dag

    ledger.set_budget("visits", PureDP(2.0))
    tasks = {
        "count": PlannedRelease("laplace", sensitivity=1.0),
        "answer": PlannedRelease("randomized_response", categories=["yes", "no", "maybe"]),
    }
    for name, chosen in [("dp_cached", {"count": tasks["count"]}), ("dp_uncached", tasks)]:
        dag = _dag(name, chosen, share=PureDP(1.0))
        (first,) = check_dag(dag, ledger)
        (second,) = check_dag(dag, ledger)
        assert first.ok and (first.calibrated["count"] is second.calibrated["count"]) == (name == "dp_cached")
        assert first.calibrated["count"].event == second.calibrated["count"].event
    answer = first.calibrated["answer"].mechanism
    assert type(answer).__name__ == "KRandomizedResponse" and answer.categories == ("yes", "no", "maybe")
    epsilons = 1.0 / first.calibrated["count"].mechanism.scale + answer.epsilon
    assert 1.0 - 1e-5 <= epsilons <= 1.0
