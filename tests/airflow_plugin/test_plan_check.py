"""One plan check: ``dp-pipeline plan check``, the DAG check and the DAG policy decide as the accountant does.

Random plans (Laplace, Gaussian calibrated by σ or by (ε, δ), binary and k-ary randomized response, pure,
approximate and μ-GDP guarantees; group sizes; mapped tasks; retried tasks) on random budgets under every
budget rule, after random earlier spends. For each plan:

- the CLI reads it as a JSON plan file (in process, through Typer's runner) and says whether it fits what
  remains;
- the same releases declared by a real DAG's tasks (an operator, a guard and a ``params`` spec in turn)
  go through :func:`plan_dag` and :func:`check_dag` (``fits_remaining``, ``fits_budget``) and the refusing
  DAG policy;
- ``spend_plan`` is tried on a copy of the ledger: on the dataset as it is (what remains), and on a fresh
  dataset with the same budget (the whole budget).

The four must agree: a plan fits what remains exactly when ``spend_plan`` would take it now, and the DAG
policy accepts a DAG exactly when one run could be charged on the whole budget.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dp_pipeline import ApproxDP, GaussianDP, PureDP
from dp_pipeline.accounting import group_event
from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag, dp_guard, plan_dag
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.policies import make_dag_policy
from dp_pipeline.cli import app
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    UnsupportedCompositionError,
)
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, KRandomizedResponse, Laplace
from tests.airflow_plugin._helpers import ledger_copy

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RULES = ("basic-pure", "basic-approx", "gdp", "pure-or-gdp")
NICE = (0.1, 0.25, 0.5, 1.0)  # exact sums, so that some plans use their budget exactly (ties fit)


@dataclass(frozen=True)
class Release:
    """One release of a plan, as the CLI's plan file and a DAG task both declare it."""

    kind: str  # laplace, gaussian_mu, gaussian_eps, rr, krr, pure, approx, gdp
    epsilon: float = 0.5
    delta: float = 1e-7
    mu: float = 0.5
    sensitivity: float = 1.0
    categories: int = 3
    group_size: int = 1
    count: int = 1  # how many times one run releases it (a mapped task)
    attempts: int = 1  # the task's retries + 1: every attempt that starts its code is charged

    def cost(self) -> Any:
        """The mechanism or guarantee a task declares."""
        s = self.sensitivity
        return {
            "laplace": lambda: Laplace(epsilon=self.epsilon, sensitivity=s),
            "gaussian_mu": lambda: Gaussian.from_mu(self.mu, sensitivity=s),
            "gaussian_eps": lambda: Gaussian(epsilon=self.epsilon, delta=self.delta, sensitivity=s),
            "rr": lambda: BinaryRandomizedResponse(epsilon=self.epsilon),
            "krr": lambda: KRandomizedResponse(epsilon=self.epsilon, categories=list(range(self.categories))),
            "pure": lambda: PureDP(self.epsilon),
            "approx": lambda: ApproxDP(self.epsilon, self.delta),
            "gdp": lambda: GaussianDP(self.mu),
        }[self.kind]()

    def plan_items(self) -> list[dict[str, Any]]:
        """The release in the CLI's plan format, once per map index and attempt."""
        s, e = self.sensitivity, self.epsilon
        item = {
            "laplace": {"mechanism": "laplace", "epsilon": e, "sensitivity": s},
            "gaussian_mu": {"mechanism": "gaussian", "mu": self.mu, "sensitivity": s},
            "gaussian_eps": {"mechanism": "gaussian", "epsilon": e, "delta": self.delta, "sensitivity": s},
            "rr": {"mechanism": "randomized_response", "epsilon": e},
            "krr": {"mechanism": "randomized_response", "epsilon": e, "categories": self.categories},
            "pure": {"epsilon": e},
            "approx": {"epsilon": e, "delta": self.delta},
            "gdp": {"mu": self.mu},
        }[self.kind]
        return [{**item, "group_size": self.group_size}] * (self.count * self.attempts)


@dataclass(frozen=True)
class Budget:
    """A dataset's budget under one of the rules: an amount, or a multiple of what the plan costs."""

    rule: str
    amount: float  # ε, or μ for the μ-GDP filter
    delta: float = 1e-6
    relation: str = "replace_one"
    scale: float | None = None  # the amount is ``scale`` times the plan's cost on the whole budget

    def sized_for(self, accountant: Any, plan: list[Release], probe: str) -> Budget:
        """This budget, its amount ``scale`` times the plan's cost when it is relative (priced by the
        accountant on a probe dataset under the same rule with a large budget; unchanged when the rule
        cannot price the plan, or prices it at a δ above the budget's)."""
        if self.scale is None:
            return self
        replace(self, amount=1000.0 if self.rule != "gdp" else 100.0).set_on(accountant, probe)
        costs, k = _as_given(plan)
        try:
            cost = accountant.plan_cost(probe, costs, k, against="budget").guarantee
        except (UnsupportedCompositionError, InvalidParameterError):
            return self
        if isinstance(cost, ApproxDP) and cost.delta > (0.0 if self.rule == "basic-pure" else self.delta):
            return self
        if isinstance(cost, GaussianDP) and self.rule == "pure-or-gdp":  # the ε of the scaled μ at δ_B
            amount = GaussianDP(cost.mu * self.scale).to_approx_dp(self.delta).epsilon
        else:
            amount = (cost.mu if isinstance(cost, GaussianDP) else cost.epsilon) * self.scale
        return replace(self, amount=amount)

    def set_on(self, accountant: Any, dataset: str) -> None:
        if self.rule == "basic-pure":
            accountant.set_budget(dataset, PureDP(self.amount), relation=self.relation)
        elif self.rule == "basic-approx":
            accountant.set_budget(dataset, ApproxDP(self.amount, self.delta), relation=self.relation)
        elif self.rule == "gdp":
            accountant.set_budget(dataset, GaussianDP(self.amount), relation=self.relation)
        else:
            budget = ApproxDP(self.amount, self.delta)
            accountant.set_budget(dataset, budget, rule="pure_or_gdp", relation=self.relation)


def _amounts(low: float, high: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(NICE), st.floats(low, high, allow_nan=False, allow_infinity=False))


releases = st.builds(
    Release,
    kind=st.sampled_from(("laplace", "gaussian_mu", "gaussian_eps", "rr", "krr", "pure", "approx", "gdp")),
    epsilon=_amounts(0.02, 1.0),
    delta=st.sampled_from((1e-9, 1e-8, 1e-7)),
    mu=_amounts(0.02, 1.0),
    sensitivity=st.sampled_from((1.0, 2.0, 0.5)),
    categories=st.integers(3, 6),
    group_size=st.sampled_from((1, 1, 2, 3)),
    count=st.sampled_from((1, 1, 1, 2, 3)),
    attempts=st.sampled_from((1, 1, 1, 2, 3)),
)
budgets = st.builds(
    Budget,
    rule=st.sampled_from(RULES),
    amount=st.one_of(st.sampled_from((0.5, 1.0, 2.0)), st.floats(0.1, 5.0, allow_nan=False)),
    delta=st.sampled_from((1e-6, 1e-5)),
    relation=st.sampled_from(("replace_one", "replace_one", "add_remove")),
    scale=st.one_of(st.none(), st.just(1.0), st.floats(0.6, 1.6, allow_nan=False)),
)


@st.composite
def plans(draw: st.DrawFn) -> list[Release]:
    """1 to 5 releases: with one group size for all (the accountant applies it to the whole plan) or one
    per release."""
    plan = draw(st.lists(releases, min_size=1, max_size=5))
    if draw(st.booleans()):
        size = draw(st.sampled_from((1, 2, 3)))
        plan = [replace(release, group_size=size) for release in plan]
    return plan


def _dag(dag_id: str, dataset: str, plan: list[Release]) -> Any:
    """A DAG whose tasks declare the plan: an operator, a guard on a plain operator and a ``params`` spec
    in turn; a release made ``count`` times is one task mapped over ``count`` literal values, and one made
    in ``attempts`` attempts has ``retries=attempts - 1``."""
    with DAG(dag_id, schedule=None, start_date=START, catchup=False) as dag:
        for i, release in enumerate(plan):
            cost, k, task_id = release.cost(), release.group_size, f"t{i}"
            values = [f"echo {n}" for n in range(release.count)]
            retries = release.attempts - 1
            if i % 3 == 0:
                PrivacyBudgetOperator.partial(
                    task_id=task_id,
                    dataset=dataset,
                    mechanism=cost,
                    group_size=k,
                    python_callable=len,
                    retries=retries,
                ).expand(op_args=[[n] for n in range(release.count)])
            elif i % 3 == 1:
                guard = dp_guard(dataset, cost, group_size=k)
                BashOperator.partial(task_id=task_id, pre_execute=guard, retries=retries).expand(
                    bash_command=values
                )
            else:
                spec = {"dataset": dataset, "event": DPCost(dataset, cost).event.to_dict(), "group_size": k}
                BashOperator.partial(task_id=task_id, params={"dp_cost": spec}, retries=retries).expand(
                    bash_command=values
                )
    return dag


def _cli(dataset: str, plan: list[Release], url: str, folder: Path) -> tuple[bool, dict[str, Any] | None]:
    """``dp-pipeline plan check DATASET PLAN.json --json``: whether it says the plan fits, and its JSON
    (None when it refused to price the plan at all)."""
    path = folder / f"{dataset}.json"
    path.write_text(json.dumps([item for release in plan for item in release.plan_items()]))
    result = CliRunner().invoke(app, ["plan", "check", dataset, str(path), "--ledger", url, "--json"])
    assert result.exit_code in (0, 1), (result.exit_code, result.stdout, result.stderr)
    if not result.stdout:  # refused before pricing (e.g. (ε, δ) releases on a μ-GDP budget)
        assert result.exit_code == 1 and result.stderr.startswith("error: "), result.stderr
        return False, None
    report = json.loads(result.stdout)
    assert report["fits"] is (result.exit_code == 0)
    return report["fits"], report


def _policy_accepts(dag: Any) -> bool:
    try:
        make_dag_policy(mode="refuse")(dag)  # the ledger of the default connection: the test's ledger
    except AirflowClusterPolicyViolation:
        return False
    return True


def _as_given(plan: list[Release]) -> tuple[list[Any], int]:
    """The plan's costs and group size as a user gives them to the accountant: one group size for the
    whole plan when there is one, else each release grouped on its own."""
    made = [release for release in plan for _ in range(release.count * release.attempts)]
    sizes = {release.group_size for release in made}
    if len(sizes) == 1:
        return [release.cost() for release in made], sizes.pop()
    return [group_event(DPCost("any", release.cost()).event, release.group_size) for release in made], 1


def _spend_plan_takes(accountant: Any, dataset: str, plan: list[Release]) -> bool:
    """Whether ``spend_plan`` charges the plan."""

    costs, k = _as_given(plan)
    try:
        accountant.spend_plan(dataset, costs, group_size=k)
    except (BudgetExceededError, UnsupportedCompositionError):
        return False
    return True


def _spend_earlier(accountant: Any, dataset: str, earlier: list[Release]) -> None:
    """Spend what fits of the earlier releases, one by one, as tasks charged at run time are."""

    for release in earlier:
        try:
            accountant.spend(dataset, release.cost(), group_size=release.group_size)
        except (BudgetExceededError, UnsupportedCompositionError, InvalidParameterError):
            continue


def _agree(
    ledger: Any, folder: Path, dataset: str, budget: Budget, earlier: list[Release], plan: list[Release]
) -> tuple[bool, bool]:
    """Set the budget, spend the earlier releases, then ask the four deciders about the plan and check
    that they agree; returns whether it fits what remains and whether it fits the whole budget."""
    sized = budget.sized_for(ledger, plan, probe=f"probe_{dataset}")
    sized.set_on(ledger, dataset)
    _spend_earlier(ledger, dataset, earlier)

    cli_fits, report = _cli(dataset, plan, ledger.store.url, folder)
    dag = _dag(f"plan_{dataset}", dataset, plan)
    (dag_check,) = check_dag(plan_dag(dag), ledger)
    accepts = _policy_accepts(dag)
    copy = ledger_copy(ledger.store.url, folder / f"{dataset}.db")
    try:
        takes_now = _spend_plan_takes(copy, dataset, plan)
        sized.set_on(copy, "fresh")
        takes_on_the_whole_budget = _spend_plan_takes(copy, "fresh", plan)
    finally:
        copy.close()

    assert cli_fits is dag_check.fits_remaining is takes_now, (cli_fits, dag_check, takes_now)
    assert accepts is dag_check.ok is dag_check.fits_budget is takes_on_the_whole_budget, (
        accepts,
        dag_check,
        takes_on_the_whole_budget,
    )
    if report is not None and dag_check.total is not None:  # the same budget, read the same way
        assert report["budget"] == dag_check.budget.to_dict() and report["relation"] == dag_check.relation
    if sized.scale == 1.0 and sized is not budget:  # a budget of exactly the plan's cost: ties fit
        assert takes_on_the_whole_budget, (sized, plan)
    return takes_now, takes_on_the_whole_budget


def test_the_cli_the_dag_check_the_dag_policy_and_spend_plan_agree(ledger, tmp_path) -> None:
    names = (f"d{n}" for n in itertools.count())
    outcomes: list[tuple[bool, bool]] = []

    @settings(max_examples=100, deadline=None)
    @given(budget=budgets, earlier=st.lists(releases, max_size=3), plan=plans())
    # a pure plan that uses a pure budget exactly: ties fit
    @example(budget=Budget("basic-pure", 1.0), earlier=[], plan=[Release("laplace", epsilon=0.5, count=2)])
    # a plan of (ε, δ)-calibrated Gaussians for groups of two with a budget of exactly its cost
    @example(
        budget=Budget("basic-approx", 1.0, scale=1.0),
        earlier=[],
        plan=[
            Release("gaussian_eps", epsilon=0.3, group_size=2),
            Release("laplace", epsilon=0.2, group_size=2),
        ],
    )
    # fits the whole budget but not what remains after an earlier spend
    @example(
        budget=Budget("basic-pure", 1.0),
        earlier=[Release("pure", epsilon=0.5)],
        plan=[Release("laplace", epsilon=0.75)],
    )
    # a task with two retries may be charged three times: 3 × 0.5 exceeds ε = 1.4 (one attempt fits)
    @example(budget=Budget("basic-pure", 1.4), earlier=[], plan=[Release("laplace", epsilon=0.5, attempts=3)])
    # a plan whose releases' own δ (9 × 1e-7) exceed the δ left after an earlier spend fits the whole budget
    # (the DAG check once called that "cannot be composed" and the DAG policy refused the DAG)
    @example(
        budget=Budget("basic-approx", 0.5, scale=1.0),
        earlier=[Release("laplace", epsilon=0.1), Release("approx", epsilon=0.1, delta=1e-7, group_size=3)],
        plan=[
            Release("laplace", epsilon=0.1),
            Release("laplace", epsilon=0.1),
            Release("gaussian_mu", mu=0.1),
            Release("approx", epsilon=0.1, delta=1e-7, count=3, attempts=3),
        ],
    )
    # three μ = 0.1 Gaussians fit an (ε = 1, δ = 1e-6) budget under the pure-or-GDP rule
    @example(budget=Budget("pure-or-gdp", 1.0), earlier=[], plan=[Release("gaussian_mu", mu=0.1, count=3)])
    # an (ε, δ) release cannot be charged to a μ-GDP budget at all
    @example(budget=Budget("gdp", 1.0), earlier=[], plan=[Release("approx", epsilon=0.1)])
    def check(budget: Budget, earlier: list[Release], plan: list[Release]) -> None:
        outcomes.append(_agree(ledger, tmp_path, next(names), budget, earlier, plan))

    check()
    assert set(outcomes) >= {(True, True), (False, True), (False, False)}


PLANS_FOR_GROUPS = {
    "gdp": [
        Release("pure", epsilon=0.4517018487869528, group_size=3),
        Release("gaussian_mu", mu=0.7364612216550845, group_size=3),
        Release("gdp", mu=0.28917882723149, group_size=3),
    ],
    "pure-or-gdp": [
        Release("gaussian_mu", mu=0.596160381001381, group_size=3),
        Release("laplace", epsilon=0.33547133039087973, sensitivity=2.0, group_size=3),
        Release("rr", epsilon=0.33340493219241, group_size=3),
    ],
}


@pytest.mark.parametrize("rule", list(PLANS_FOR_GROUPS))
def test_a_plan_for_groups_is_priced_as_the_accountant_prices_a_group_size(ledger, tmp_path, rule) -> None:
    """Releases for groups of three: the DAG check once applied each task's group size to its event
    itself, and the accountant prices such a plan a little lower than the same plan with the group size
    given to it. On a budget of exactly the lower price, the DAG check and the policy let the DAG through
    while ``dp-pipeline plan check`` and ``spend_plan`` refused it (and at run time each task is charged
    with its group size given to the accountant)."""
    plan = PLANS_FOR_GROUPS[rule]
    Budget(rule, 100.0).set_on(ledger, "probe")
    grouped = [group_event(DPCost("any", release.cost()).event, 3) for release in plan]
    mu = ledger.plan_cost("probe", grouped).guarantee.mu  # the plan's μ as the DAG check once priced it
    amount = mu if rule == "gdp" else GaussianDP(mu).to_approx_dp(1e-6).epsilon
    _agree(ledger, tmp_path, "groups", Budget(rule, amount, delta=1e-6), [], plan)
