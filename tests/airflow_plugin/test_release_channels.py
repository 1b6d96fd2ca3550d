"""A DP task releases through two channels: the ``mechanism`` it is handed and ``dp``, the reservation (or
run share) it pays from. Real Airflow 3.3 runs check that no release escapes the ledger: a task declared
with a mechanism has that mechanism's one draw paid before its code starts, whatever its callable's
parameters, so that ``dp`` pays only what the declared cost leaves; one declared with an event or a
guarantee hands nothing that can draw and pays its releases through ``dp``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_plugin._helpers import run_dag, states

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _released(path: Path) -> float:
    """The ε the callables wrote down as released (each line: a task and the ε of one release)."""
    return sum(float(line.split()[1]) for line in path.read_text().splitlines()) if path.exists() else 0.0


def test_in_a_run_a_task_cannot_release_through_its_mechanism_unpaid(ledger, tmp_path) -> None:
    """``a(mechanism, **context)`` releases through its mechanism; ``b(dp)`` then tries to pay ε = 1 through
    the run's reservation, twice its declared 0.5. Before, ``a`` paid nothing (``**context`` counted as
    paying through ``dp``) and ``b`` took the whole run's budget: 1.5 released, 1.0 charged. Now ``a``
    pays its 0.5 before it starts, ``b`` is refused, and the ledger covers everything released."""
    from airflow.sdk import DAG

    from dp_pipeline import BudgetExceededError, PureDP
    from dp_pipeline.airflow import dp_task, run_budget
    from dp_pipeline.mechanisms import Laplace

    released, refused = tmp_path / "released.txt", tmp_path / "refused.txt"
    ledger.set_budget("visits", PureDP(10.0))

    with DAG("dp_channels_run", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
        def a(mechanism: Laplace, **context: Any) -> float:
            with released.open("a") as out:
                out.write("a 0.5\n")
            return float(mechanism.randomize(100.0))

        @dp_task(dataset="visits", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
        def b(dp: Any) -> float:
            big = Laplace(epsilon=1.0, sensitivity=1.0)
            try:
                dp.spend("visits", big, label="twice the declared cost")
            except BudgetExceededError:
                refused.write_text("b")
                raise
            with released.open("a") as out:
                out.write("b 1.0\n")
            return float(big.randomize(100.0))

        a() >> b()
    run_budget(dag)

    dag_run = run_dag(dag)

    assert states(dag_run)["a"] == "success" and states(dag_run)["b"] == "failed"
    assert refused.read_text() == "b"
    assert _released(released) == 0.5
    assert ledger.spent("visits").epsilon >= _released(released)
    assert ledger.spent("visits").epsilon == pytest.approx(1.0)  # the run's plan, settled


def test_on_its_own_reservation_dp_pays_only_beyond_the_mechanism(ledger, tmp_path) -> None:
    """Outside a run, a task declared with a mechanism has that mechanism's draw paid first: a further
    release of the same cost through ``dp`` is refused. One declared with the event alone (nothing handed
    that can draw) pays its release through ``dp``; both are charged their declared 0.5 once. What is paid
    first follows from the declaration, not from the callable's parameters."""
    from airflow.sdk import DAG

    from dp_pipeline import BudgetExceededError, PureDP
    from dp_pipeline.airflow import dp_task
    from dp_pipeline.mechanisms import Laplace

    released = tmp_path / "released.txt"
    ledger.set_budget("visits", PureDP(10.0))
    declared = Laplace(epsilon=0.5, sensitivity=1.0)

    with DAG("dp_channels_own", schedule=None, start_date=START, catchup=False) as dag:

        @dp_task(dataset="visits", mechanism=declared)
        def both(mechanism: Laplace, dp: Any) -> str:
            with released.open("a") as out:
                out.write("both 0.5\n")
            mechanism.randomize(100.0)
            try:
                dp.spend("visits", declared, label="a second release")
            except BudgetExceededError:
                return "refused"
            with released.open("a") as out:
                out.write("both 0.5\n")
            return "paid twice"

        @dp_task(dataset="visits", mechanism=declared.event)
        def through_dp(dp: Any) -> str:
            dp.spend("visits", declared, label="its one release")
            with released.open("a") as out:
                out.write("through_dp 0.5\n")
            return "paid"

        both() >> through_dp()

    dag_run = run_dag(dag)

    assert states(dag_run) == {"both": "success", "through_dp": "success"}
    assert _released(released) == 1.0
    assert ledger.spent("visits").epsilon == pytest.approx(1.0)
    assert ledger.spent("visits").epsilon >= _released(released)


@pytest.mark.parametrize("keywords", [True, False], ids=["mechanism-and-context", "mechanism"])
def test_a_settled_run_cleared_and_run_again_releases_nothing_unpaid(
    ledger, tmp_path, keywords: bool
) -> None:
    """``dag.test()`` on the same logical date clears a finished run and runs it again under the same run
    id: the setup finds the run's reservation, and the "settled" XCom is gone. The task of the second run
    must pay its declared cost from what the first run already paid, so it is refused before its code
    runs: one release, charged once."""
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, run_budget
    from dp_pipeline.mechanisms import Laplace

    released = tmp_path / "released.txt"
    ledger.set_budget("visits", PureDP(10.0))
    logical = dt.datetime(2026, 2, 2, tzinfo=dt.UTC)

    def with_context(mechanism: Laplace, **context: Any) -> float:
        with released.open("a") as out:
            out.write("t 0.5\n")
        return float(mechanism.randomize(1.0))

    def alone(mechanism: Laplace) -> float:
        return with_context(mechanism)

    with DAG(f"dp_rerun_{keywords}", schedule=None, start_date=START, catchup=False) as dag:
        PrivacyBudgetOperator(
            task_id="t",
            dataset="visits",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=with_context if keywords else alone,
            retries=1,
            retry_delay=dt.timedelta(0),
        )
    run_budget(dag)

    first = run_dag(dag, logical_date=logical, run_after=logical)
    second = run_dag(dag, logical_date=logical, run_after=logical)

    assert first.run_id == second.run_id
    assert states(second)["t"] == "failed"
    assert _released(released) == 0.5
    assert ledger.spent("visits").epsilon == pytest.approx(0.5)
