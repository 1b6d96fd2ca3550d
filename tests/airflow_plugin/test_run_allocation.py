"""A run's budget share calibrates the noise of its DP tasks, on real Airflow 3.3 with the ledger on SQLite
and on PostgreSQL. Every calibration is checked against an independent computation
(:mod:`tests.allocation_references`): the largest μ whose exact (ε, δ) conversion meets the share, by
bisection on Dong, Roth & Su's δ(ε) in mpmath; dp-accounting's privacy-loss distributions called directly
for Laplace and Gaussian noise together, and a bisection over their common scale."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dp_pipeline.accounting import ledger_entries
from tests.airflow_plugin._helpers import FailureLog, run_dag, states
from tests.allocation_references import largest_mu, least_scale, pld_epsilon

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


# ------------------------------------------------------------------------------------------------------
# DAGs


def _recorder(path: Path) -> Callable[[str, Any], float]:
    """Write what each task's callable received (its mechanism's class and noise parameter) to ``path``."""

    def record(task: str, mechanism: Any) -> float:
        seen = json.loads(path.read_text()) if path.exists() else {}
        noise = {"sigma": mechanism.sigma} if hasattr(mechanism, "sigma") else {"scale": mechanism.scale}
        seen[task] = {"class": mechanism.mechanism_type.__name__, **noise}  # a one-shot view
        path.write_text(json.dumps(seen))
        return float(mechanism.randomize(100.0))

    return record


def _seen(path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else {}


def _three_gaussians(dag_id: str, seen: Path, share: Any, *, per_run: bool = True) -> Any:
    """Three Gaussian counts of sensitivity 1 on ``visits`` with weights 1, 1 and 4, one through each way
    of declaring a DP task: the operator, ``@task.dp`` and a guard on a PythonOperator."""
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG, task

    from dp_pipeline import PlannedRelease
    from dp_pipeline.airflow import PrivacyBudgetOperator, dp_guard, run_budget

    record = _recorder(seen)
    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        first = PrivacyBudgetOperator(
            task_id="first",
            dataset="visits",
            mechanism=PlannedRelease("gaussian", sensitivity=1.0),
            python_callable=lambda mechanism: record("first", mechanism),
        )

        @task.dp(dataset="visits", mechanism=PlannedRelease("gaussian", sensitivity=1.0, weight=1.0))
        def second(mechanism: Any) -> float:
            return record("second", mechanism)

        def total(mechanism: Any = None) -> float:
            return record("total", mechanism)

        third = PythonOperator(
            task_id="total",
            python_callable=total,
            pre_execute=dp_guard("visits", PlannedRelease("gaussian", sensitivity=1.0, weight=4.0)),
        )
        first >> second() >> third
    if per_run:
        run_budget(dag, share=share)
    return dag


def _run_entries(ledger: Any, dataset: str) -> tuple[list[Any], list[Any]]:
    """The dataset's charges, and the attempts' shares of them (the draws paid within a share, which
    record its cap, are left out)."""
    history = ledger.history(dataset)
    within = {r.seq for r in ledger.store.records(dataset) if r.kind == "pay" and "cap" in r.body}
    shares = [e for e in history if e.paid_from is not None and e.seq not in within]
    return [e for e in history if e.paid_from is None], shares


# ------------------------------------------------------------------------------------------------------
# the cases


def test_three_gaussian_tasks_weighted_1_1_4_are_calibrated_to_the_run_share(any_ledger, tmp_path) -> None:
    """Share ApproxDP(1, 1e-6) of a larger budget: each callable receives σᵢ with Σ(Δ/σᵢ)² = μ² for the
    largest μ whose exact (ε, δ) conversion meets the share (within 0.5%, never above), σ₃/σ₁ = 1/2; each
    attempt pays its own calibrated event; the ledger charges the run at most the share; the DAG check
    reports the same σ; the dashboard shows them beside the share."""
    from fastapi.testclient import TestClient

    from dp_pipeline import ApproxDP
    from dp_pipeline.airflow import check_dag
    from dp_pipeline.airflow.dashboard import create_app

    ledger = any_ledger
    share = ApproxDP(1.0, 1e-6)
    ledger.set_budget("visits", ApproxDP(3.0, 1e-5))
    seen = tmp_path / "seen.json"
    dag = _three_gaussians("dp_share_gauss", seen, share)
    (check,) = check_dag(dag, ledger)
    assert check.ok and check.fits_remaining and check.share == share
    reported = {task: release.mechanism.sigma for task, release in check.calibrated.items()}
    assert set(reported) == {"first", "second", "total"}

    dag_run = run_dag(dag)

    assert set(states(dag_run).values()) == {"success"}
    sigmas = {task: got["sigma"] for task, got in _seen(seen).items()}
    assert {got["class"] for got in _seen(seen).values()} == {"Gaussian"}
    assert sigmas == reported  # the check reports the noise the run uses
    assert sigmas["first"] == sigmas["second"]
    assert sigmas["total"] / sigmas["first"] == pytest.approx(0.5, rel=1e-12)
    mu = largest_mu(1.0, 1e-6)
    composed = math.fsum((1.0 / s) ** 2 for s in sigmas.values())
    assert composed <= mu * mu * (1 + 1e-12)  # never above the share
    assert composed >= mu * mu * (1 - 0.005)  # within 0.5% of the optimum

    charged, paid = _run_entries(ledger, "visits")
    (run,) = charged
    assert run.key == f"run/dp_share_gauss/{dag_run.run_id}"
    assert run.cost.epsilon <= 1.0 and run.cost.delta <= 1e-6  # charged at most the share
    spent = ledger.spent("visits")
    assert spent.epsilon <= 1.0 and spent.delta <= 1e-6
    assert sorted(entry.label.split(" ")[0] for entry in paid) == [
        "dp_share_gauss.first",
        "dp_share_gauss.second",
        "dp_share_gauss.total",
    ]
    for entry in paid:  # each attempt paid exactly its calibrated mechanism's event
        task = entry.label.split(" ")[0].split(".")[1]
        ((kind, params),) = [(e.kind, e.parameters) for e in entry.events]
        assert kind == "gaussian" and params["sigma"] == sigmas[task]

    client = TestClient(create_app(lambda: ledger))
    (shown,) = client.get("/api/datasets/visits").json()["runs"]
    assert (
        "share ε=1, δ=1e-06" in shown["label"]
        and f"total: Gaussian σ={sigmas['total']:.6g}" in shown["label"]
    )
    page = client.get("/").text
    assert "plan (share, calibrated noise)" in page and f"first: Gaussian σ={sigmas['first']:.6g}" in page


def test_laplace_and_gaussian_tasks_beside_a_fixed_task_meet_a_pld_search(any_ledger, tmp_path) -> None:
    """A fixed Laplace task (ε = 0.2) and free Laplace and Gaussian tasks (weights 1 and 2) on one dataset,
    share ApproxDP(1, 1e-6): the free tasks get what the share leaves after the fixed one. dp-accounting's
    optimistic PLD of the three mechanisms the callables received stays within the share (never above), and
    their common scale is within 1% of the least one a pessimistic-PLD bisection finds here."""
    from airflow.sdk import DAG

    from dp_pipeline import ApproxDP, PlannedRelease
    from dp_pipeline.airflow import check_dag, dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    ledger = any_ledger
    ledger.set_budget("visits", ApproxDP(2.0, 1e-5))
    seen = tmp_path / "seen.json"
    record = _recorder(seen)
    with DAG("dp_share_mixed", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.2, sensitivity=1.0))
        def fixed(mechanism: Any) -> float:
            return record("fixed", mechanism)

        @dp_task(dataset="visits", mechanism=PlannedRelease("laplace", sensitivity=1.0))
        def laplace(mechanism: Any) -> float:
            return record("laplace", mechanism)

        @dp_task(dataset="visits", mechanism=PlannedRelease("gaussian", sensitivity=1.0, weight=2.0))
        def gaussian(mechanism: Any) -> float:
            return record("gaussian", mechanism)

        fixed() >> laplace() >> gaussian()
    run_budget(dag, share=ApproxDP(1.0, 1e-6))
    (check,) = check_dag(dag, ledger)
    assert check.ok and set(check.calibrated) == {"laplace", "gaussian"} and check.method == "pld"

    dag_run = run_dag(dag)

    assert set(states(dag_run).values()) == {"success"}
    got = _seen(seen)
    assert got["fixed"] == {"class": "Laplace", "scale": 5.0}
    b, sigma = got["laplace"]["scale"], got["gaussian"]["sigma"]
    assert (got["laplace"]["class"], got["gaussian"]["class"]) == ("Laplace", "Gaussian")
    scale = math.sqrt(2) * b  # the common scale t: Laplace std √2·b = t, Gaussian σ = t/√2
    assert sigma == pytest.approx(scale / math.sqrt(2), rel=1e-9)
    # never above the share: even dp-accounting's optimistic ε (a lower bound) of the noise drawn is within
    assert pld_epsilon(Counter([5.0, b]), {sigma: 1}, 1e-6, pessimistic=False) <= 1.0

    def fits(t: float) -> bool:  # the fixed b = 5, the free Laplace std t (b = t/√2), Gaussian σ = t/√2
        laplace = Counter([5.0, t / math.sqrt(2)])
        return pld_epsilon(laplace, {t / math.sqrt(2): 1}, 1e-6, pessimistic=True) <= 1.0

    best = least_scale(fits, scale)
    assert best * 0.99 <= scale <= best * 1.01
    (run,) = _run_entries(ledger, "visits")[0]
    assert run.cost.epsilon <= 1.0 and run.cost.delta <= 1e-6


def test_a_share_that_does_not_fit_what_remains_fails_the_run_in_its_setup(any_ledger, tmp_path) -> None:
    """ε = 0.7 remains of the budget and the run's share is ε = 1: the setup is refused, no callable runs,
    and the ledger holds nothing new."""
    from dp_pipeline import ApproxDP, PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted

    ledger = any_ledger
    ledger.set_budget("visits", ApproxDP(1.5, 1e-5))
    ledger.spend("visits", PureDP(0.8), label="an earlier report")
    before = [(r.kind, r.key) for r in ledger_entries(ledger.store, "visits")]
    seen = tmp_path / "seen.json"
    dag = _three_gaussians("dp_share_too_big", seen, ApproxDP(1.0, 1e-6))
    failures = FailureLog()
    dag.get_task("dp_reserve_run").on_failure_callback = [failures]

    dag_run = run_dag(dag)

    assert states(dag_run)["dp_reserve_run"] == "failed"
    assert {states(dag_run)[t] for t in ("first", "second", "total")} == {"upstream_failed"}
    assert not seen.exists()
    error = failures.errors["dp_reserve_run"]
    assert isinstance(error, PrivacyBudgetExhausted) and "share" in str(error)
    assert [(r.kind, r.key) for r in ledger_entries(ledger.store, "visits")] == before
    assert ledger.spent("visits").epsilon == pytest.approx(0.8)


@pytest.mark.parametrize("where", ["no run budget", "no share of the dataset"])
def test_a_free_task_without_a_share_is_refused_by_the_check_and_at_run_time(
    any_ledger, tmp_path, where
) -> None:
    """A task that leaves its noise free is never calibrated against the whole budget: without a run budget,
    or with a share of another dataset only, the DAG check reports it and the run refuses it before any
    callable runs; nothing is charged."""
    from dp_pipeline import ApproxDP
    from dp_pipeline.airflow import PrivacyCostError, check_dag

    ledger = any_ledger
    ledger.set_budget("visits", ApproxDP(3.0, 1e-5))
    seen = tmp_path / "seen.json"
    per_run = where != "no run budget"
    dag = _three_gaussians(
        f"dp_share_none_{per_run}", seen, {"patients": ApproxDP(1.0, 1e-6)}, per_run=per_run
    )
    (check,) = check_dag(dag, ledger)
    assert not check.ok and check.total is None
    (problem,) = check.problems
    assert "leave their noise free on 'visits'" in problem
    assert ("run_budget(dag, share=...)" if not per_run else "no share of that dataset") in problem
    failures = FailureLog()
    for task in dag.tasks:
        task.on_failure_callback = [failures]

    dag_run = run_dag(dag)

    refused = "dp_reserve_run" if per_run else "first"
    assert states(dag_run)[refused] == "failed"
    assert isinstance(failures.errors[refused], PrivacyCostError)
    assert "noise free" in str(failures.errors[refused])
    assert not seen.exists()
    assert [r.kind for r in ledger_entries(ledger.store, "visits")] == ["budget"]


def test_each_attempt_a_free_tasks_retries_allow_is_a_release_of_the_allocation(any_ledger, tmp_path) -> None:
    """Two free Gaussian tasks of weight 1, one with ``retries=1``: the allocation has three releases, so
    each gets σ = √3/μ (not √2/μ); both succeed at once, and the teardown keeps the two attempts that
    started."""
    from airflow.sdk import DAG

    from dp_pipeline import GaussianDP, PlannedRelease
    from dp_pipeline.airflow import check_dag, dp_task, run_budget

    ledger = any_ledger
    ledger.set_budget("visits", GaussianDP(2.0))
    seen = tmp_path / "seen.json"
    record = _recorder(seen)
    with DAG("dp_share_retries", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits", mechanism=PlannedRelease("gaussian", sensitivity=1.0))
        def once(mechanism: Any) -> float:
            return record("once", mechanism)

        @dp_task(
            dataset="visits",
            mechanism=PlannedRelease("gaussian", sensitivity=1.0),
            retries=1,
            retry_delay=dt.timedelta(0),
        )
        def twice(mechanism: Any) -> float:
            return record("twice", mechanism)

        once() >> twice()
    run_budget(dag, share=GaussianDP(1.0))
    (check,) = check_dag(dag, ledger)
    assert {t.task_id: t.releases for t in check.tasks} == {"once": 1, "twice": 2}

    dag_run = run_dag(dag)

    assert set(states(dag_run).values()) == {"success"}
    sigmas = {task: got["sigma"] for task, got in _seen(seen).items()}
    assert sigmas["once"] == sigmas["twice"]
    assert sigmas["once"] == pytest.approx(math.sqrt(3.0), rel=1e-5)  # Σ over 3 releases of (1/σ)² = 1
    assert sigmas["once"] >= math.sqrt(3.0) * (1 - 1e-12)
    (run,) = _run_entries(ledger, "visits")[0]
    assert run.cost.mu == pytest.approx(math.sqrt(2.0) / sigmas["once"], rel=1e-9)  # kept the 2 that started
    assert ledger.spent("visits").mu <= 1.0


def test_a_mapped_free_task_for_groups_counts_each_map_index_up_to_its_bound(any_ledger, tmp_path) -> None:
    """A free Gaussian task for groups of 2, mapped over an upstream result with ``max_map_length=3``, on a
    share GaussianDP(1): the allocation has three releases of sensitivity 2, so σ = 2√3 (Σ(kΔ/σ)² = μ²);
    both map indexes that run receive it, and the teardown keeps their two releases."""
    from airflow.sdk import DAG, task

    from dp_pipeline import GaussianDP, PlannedRelease
    from dp_pipeline.airflow import PrivacyBudgetOperator, run_budget

    ledger = any_ledger
    ledger.set_budget("visits", GaussianDP(2.0))
    seen = tmp_path / "seen.json"
    record = _recorder(seen)
    with DAG("dp_share_mapped", schedule=None, start_date=START, catchup=False) as dag:

        @task
        def wards() -> list[list[int]]:
            return [[1], [2]]

        PrivacyBudgetOperator.partial(
            task_id="per_ward",
            dataset="visits",
            mechanism=PlannedRelease("gaussian", sensitivity=1.0),
            group_size=2,
            python_callable=lambda ward, mechanism: record(f"ward {ward}", mechanism),
            max_map_length=3,
        ).expand(op_args=wards())
    run_budget(dag, share=GaussianDP(1.0))

    dag_run = run_dag(dag)

    assert states(dag_run)["per_ward[0]"] == states(dag_run)["per_ward[1]"] == "success"
    sigmas = {ward: got["sigma"] for ward, got in _seen(seen).items()}
    assert set(sigmas) == {"ward 1", "ward 2"} and len(set(sigmas.values())) == 1
    sigma = sigmas["ward 1"]
    assert 2 * math.sqrt(3.0) * (1 - 1e-12) <= sigma <= 2 * math.sqrt(3.0) * 1.005
    (run,) = _run_entries(ledger, "visits")[0]
    assert run.cost.mu == pytest.approx(math.sqrt(2.0) * 2 / sigma, rel=1e-9)  # the two that ran
