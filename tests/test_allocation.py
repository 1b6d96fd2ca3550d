"""Allocation of a budget to planned releases, against independent searches written here.

- all-Gaussian plans: the exact optimum in closed form, σᵢ = √(Σⱼ (kⱼΔⱼ)²wⱼ)/(μ·√wᵢ), with μ found by
  bisection on the μ-GDP → (ε, δ) conversion evaluated at 40 digits with mpmath;
- mixed Laplace and Gaussian plans: bisection over dp-accounting's privacy-loss distributions, called
  directly;
- pure plans (randomized response, Laplace, mechanisms with ε free): Σεᵢ = ε_B solved with scipy's brentq,
  each randomized response's ε found numerically from its noise standard deviation.
"""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize

import dp_pipeline._allocation
from dp_pipeline import (
    ApproxDP,
    BudgetExceededError,
    GaussianDP,
    InvalidParameterError,
    PlannedRelease,
    PrivacyAccountant,
    PureDP,
    UnsupportedCompositionError,
    allocate,
)
from dp_pipeline.accounting import Request, UnknownDatasetError, group_event, ledger_entries
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)
from tests.allocation_references import gaussian_optimum, largest_mu, least_scale, pld_epsilon

# ------------------------------------------------------------------------------------------------------
# independent references (the μ-GDP and PLD searches are shared with the Airflow tests)


def rr_std_formula(epsilon: float, k: int) -> float:
    """√(p(1 − p))/(p − q) with p = e^ε/(e^ε + k − 1), q = 1/(e^ε + k − 1) (k-RR, Wang et al. 2017)."""
    p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    q = 1 / (math.exp(epsilon) + k - 1)
    return math.sqrt(p * (1 - p)) / (p - q)


def rr_epsilon_numeric(std: float, k: int) -> float:
    return optimize.brentq(lambda e: rr_std_formula(e, k) - std, 1e-9, 60.0, xtol=1e-15, rtol=1e-15)


def memory(budget: Any, **kwargs: Any) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget, **kwargs)
    return acct


# ------------------------------------------------------------------------------------------------------
# all-Gaussian plans: within 0.5% of the exact optimum, never below it


def test_twenty_gaussian_releases_of_the_issue() -> None:
    """ε = 1, δ = 1e-6: an even basic split gives σ = 82.6; calibrated together, σ is over 4 times smaller."""
    allocation = allocate([PlannedRelease("gaussian", sensitivity=1.0)] * 20, target=ApproxDP(1.0, 1e-6))
    (optimum,) = set(gaussian_optimum([1.0] * 20, [1.0] * 20, largest_mu(1.0, 1e-6)))
    even = Gaussian(epsilon=1.0 / 20, delta=1e-6 / 20, sensitivity=1.0).sigma
    assert round(even, 1) == 82.6
    for release in allocation:
        sigma = release.mechanism.sigma
        assert optimum * (1 - 1e-12) <= sigma <= optimum * 1.005  # the target
        assert sigma <= optimum * (1 + 1e-5)  # what the search achieves
        assert release.std == sigma
    assert (even / allocation[0].std) ** 2 > 19  # variance 19 times smaller
    assert (
        allocation.method == "gdp"
        and allocation.cost.epsilon <= 1.0
        and allocation.target == ApproxDP(1.0, 1e-6)
    )


plans = st.lists(
    st.tuples(
        st.floats(0.1, 10.0),  # sensitivity
        st.floats(0.1, 10.0),  # weight
        st.integers(1, 3),  # group size
    ),
    min_size=1,
    max_size=25,
)


@given(
    plan=plans,
    epsilon=st.floats(0.1, 5.0),
    delta=st.floats(1e-9, 1e-3),
    rule=st.sampled_from(["basic", "pure_or_gdp"]),
)
def test_gaussian_plans_meet_the_closed_form(
    plan: list[tuple[float, float, int]], epsilon: float, delta: float, rule: str
) -> None:
    releases = [PlannedRelease("gaussian", sensitivity=d, weight=w, group_size=k) for d, w, k in plan]
    acct = memory(ApproxDP(epsilon, delta), rule=rule)
    allocation = allocate(releases, accountant=acct, dataset="d")
    optimum = gaussian_optimum(
        [d * k for d, _, k in plan], [w for _, w, _ in plan], largest_mu(epsilon, delta)
    )
    for release, best in zip(allocation, optimum, strict=True):
        assert best * (1 - 1e-9) <= release.mechanism.sigma <= best * 1.005
    assert acct.quote("d", Request.plan(allocation)).fits
    acct.spend_plan("d", allocation)  # the ledger accepts it as one plan


@given(plan=plans, mu=st.floats(0.05, 5.0))
def test_gaussian_plans_on_a_gdp_budget(plan: list[tuple[float, float, int]], mu: float) -> None:
    releases = [PlannedRelease("gaussian", sensitivity=d, weight=w, group_size=k) for d, w, k in plan]
    allocation = allocate(releases, target=GaussianDP(mu))
    optimum = gaussian_optimum([d * k for d, _, k in plan], [w for _, w, _ in plan], mu)
    for release, best in zip(allocation, optimum, strict=True):
        assert best * (1 - 1e-9) <= release.mechanism.sigma <= best * 1.005
    mus = [k * d / r.mechanism.sigma for (d, _, k), r in zip(plan, allocation, strict=True)]
    assert math.sqrt(math.fsum(m * m for m in mus)) <= mu * (1 + 1e-12)  # never above, composed here


def test_weights_set_the_ratio_of_precisions() -> None:
    releases = [
        PlannedRelease("gaussian", sensitivity=1.0),
        PlannedRelease("gaussian", sensitivity=1.0, weight=4.0),
    ]
    first, second = allocate(releases, target=GaussianDP(1.0))
    assert first.mechanism.sigma == pytest.approx(2 * second.mechanism.sigma, rel=1e-12)
    assert first.mechanism.sigma == pytest.approx(math.sqrt(5.0), rel=1e-5)  # (1/σ)² + (2/σ)² = 1/s²·5


# ------------------------------------------------------------------------------------------------------
# mixed Laplace and Gaussian plans: within 1% of a PLD search done here with dp-accounting


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n_laplace", "n_gaussian", "w_laplace", "w_gaussian", "epsilon", "delta"),
    [(10, 10, 1.0, 1.0, 1.0, 1e-6), (5, 15, 3.0, 1.0, 2.0, 1e-5), (2, 8, 0.5, 2.0, 0.5, 1e-7)],
)
def test_mixed_plans_meet_a_pld_search(
    n_laplace: int, n_gaussian: int, w_laplace: float, w_gaussian: float, epsilon: float, delta: float
) -> None:
    releases = [PlannedRelease("laplace", sensitivity=1.0, weight=w_laplace)] * n_laplace + [
        PlannedRelease("gaussian", sensitivity=1.0, weight=w_gaussian)
    ] * n_gaussian
    allocation = allocate(releases, target=ApproxDP(epsilon, delta))
    assert allocation.method == "pld"

    def fits(t: float) -> bool:  # std t/√w: Laplace scale t/√(2w), Gaussian σ = t/√w
        laplace = {t / math.sqrt(2 * w_laplace): n_laplace}
        gaussian = {t / math.sqrt(w_gaussian): n_gaussian}
        return pld_epsilon(laplace, gaussian, delta, pessimistic=True) <= epsilon

    best = least_scale(fits, allocation.scale)
    assert allocation.scale <= best * 1.01  # the target
    # never above: even dp-accounting's optimistic ε (a lower bound) of the noise drawn is within ε
    scales = {r.mechanism.scale for r in allocation[:n_laplace]}
    sigmas = {r.mechanism.sigma for r in allocation[n_laplace:]}
    assert len(scales) == len(sigmas) == 1
    optimistic = pld_epsilon(
        dict.fromkeys(scales, n_laplace), dict.fromkeys(sigmas, n_gaussian), delta, pessimistic=False
    )
    assert optimistic <= epsilon
    for release in allocation:
        weight = release.release.weight
        assert release.std * math.sqrt(weight) == pytest.approx(allocation.scale, rel=1e-12)


# ------------------------------------------------------------------------------------------------------
# pure plans: randomized response, Laplace, mechanisms with ε free


def test_randomized_response_and_laplace_on_a_pure_budget() -> None:
    releases = [
        PlannedRelease("randomized_response"),
        PlannedRelease("randomized_response", categories=["a", "b", "c", "d"], weight=2.0),
        PlannedRelease("laplace", sensitivity=1.0, weight=0.5),
    ]
    allocation = allocate(releases, target=PureDP(2.0))
    binary, four, laplace = allocation.mechanisms
    assert isinstance(binary, BinaryRandomizedResponse) and isinstance(four, KRandomizedResponse)
    # the noise of each, from its own probabilities
    binary_std = math.sqrt(binary.p_true * (1 - binary.p_true)) / (binary.p_true - binary.p_other)
    four_std = math.sqrt(four.p * (1 - four.p)) / (four.p - four.q)
    laplace_std = math.sqrt(laplace.variance)
    for std, release in zip([binary_std, four_std, laplace_std], allocation, strict=True):
        assert release.std == pytest.approx(std, rel=1e-9)
        assert std * math.sqrt(release.release.weight) == pytest.approx(allocation.scale, rel=1e-9)

    def total_epsilon(t: float) -> float:
        return (
            rr_epsilon_numeric(t, 2)
            + rr_epsilon_numeric(t / math.sqrt(2.0), 4)
            + math.sqrt(2.0) / (t / math.sqrt(0.5))
        )

    best = optimize.brentq(lambda t: total_epsilon(t) - 2.0, 0.1, 100.0, xtol=1e-14, rtol=1e-14)
    assert best * (1 - 1e-9) <= allocation.scale <= best * 1.005
    assert binary.epsilon + four.epsilon + laplace.epsilon <= 2.0
    assert allocation.method == "basic" and allocation.cost == ApproxDP(allocation.cost.epsilon, 0.0)


def test_mechanisms_with_epsilon_or_sigma_free() -> None:
    staircase = PlannedRelease(
        lambda e: Staircase(epsilon=e, sensitivity=2.0), free="epsilon", sensitivity=2.0
    )
    allocation = allocate(
        [staircase, staircase, PlannedRelease("laplace", sensitivity=1.0)], target=PureDP(3.0)
    )
    # the same std √2Δ/ε for all three: ε ∝ Δ, so 2ε + 2ε + ε = 3
    assert [m.epsilon for m in allocation.mechanisms] == pytest.approx([1.2, 1.2, 0.6], rel=1e-5)
    assert sum(m.epsilon for m in allocation.mechanisms) <= 3.0

    free_sigma = PlannedRelease(lambda s: Gaussian.from_mu(mu=2.0 / s, sensitivity=2.0), free="sigma")
    allocation = allocate([free_sigma, PlannedRelease("gaussian", sensitivity=1.0)], target=GaussianDP(1.0))
    # (2/t)² + (1/t)² = 1
    assert [r.std for r in allocation] == pytest.approx([math.sqrt(5.0)] * 2, rel=1e-5)
    assert allocation[0].mechanism.sigma == pytest.approx(math.sqrt(5.0), rel=1e-5)


# ------------------------------------------------------------------------------------------------------
# the accountant: remaining budget, group sizes, spend_plan


def test_allocation_fits_what_remains_and_uses_it() -> None:
    acct = memory(ApproxDP(1.0, 1e-6))
    acct.spend("d", Laplace(epsilon=0.3, sensitivity=1.0))
    releases = [PlannedRelease("gaussian", sensitivity=1.0)] * 10
    allocation = allocate(releases, accountant=acct, dataset="d")
    assert allocation.target == acct.remaining("d").guarantee
    (optimum,) = set(gaussian_optimum([1.0] * 10, [1.0] * 10, largest_mu(0.7, 1e-6)))
    assert optimum * (1 - 1e-9) <= allocation[0].mechanism.sigma <= optimum * 1.005
    acct.spend_plan("d", allocation, key="run-1")
    assert acct.remaining("d").epsilon < 1e-5  # the budget is used up
    with pytest.raises(BudgetExceededError):
        acct.spend("d", Laplace(epsilon=1e-4, sensitivity=1.0))


def test_against_the_whole_budget() -> None:
    acct = memory(GaussianDP(1.0))
    acct.spend("d", Gaussian.from_mu(mu=0.6, sensitivity=1.0))
    releases = [PlannedRelease("gaussian", sensitivity=1.0)] * 4
    whole = allocate(releases, accountant=acct, dataset="d", against="budget")
    rest = allocate(releases, accountant=acct, dataset="d")
    assert whole[0].mechanism.sigma == pytest.approx(2.0, rel=1e-5)  # 4/σ² = 1
    assert rest[0].mechanism.sigma == pytest.approx(2.0 / 0.8, rel=1e-5)  # 4/σ² = 1 − 0.36
    assert (
        acct.quote("d", Request.plan(whole), against="budget").fits
        and not acct.quote("d", Request.plan(whole)).fits
    )


def test_group_sizes_are_in_the_events_and_charged_once() -> None:
    acct = memory(ApproxDP(2.0, 1e-6))
    releases = [
        PlannedRelease("laplace", sensitivity=1.0, group_size=3),
        PlannedRelease("randomized_response", group_size=2),
        PlannedRelease("gaussian", sensitivity=1.0),
    ]
    allocation = allocate(releases, accountant=acct, dataset="d")
    for release, k in zip(allocation, [3, 2, 1], strict=True):
        assert release.event == group_event(release.mechanism.event, k)
    assert allocation[0].event.sensitivity == 3.0
    assert allocation[1].event.guarantee == PureDP(allocation[1].mechanism.epsilon).group(2)
    cost = acct.plan_cost("d", allocation)
    acct.spend_plan("d", allocation)
    assert acct.spent("d").guarantee == cost.guarantee == allocation.cost
    assert cost.epsilon <= 2.0


def test_an_allocation_runs() -> None:
    allocation = allocate(
        [PlannedRelease("laplace", sensitivity=1.0), PlannedRelease("randomized_response", categories=3)],
        target=ApproxDP(1.0, 0.0),
    )
    assert len(allocation) == 2 and list(allocation) == list(allocation.releases)
    counts = allocation[0].mechanism.randomize([10.0, 20.0])
    answers = allocation[1].mechanism.randomize([0, 1, 2])
    assert len(counts) == 2 and set(answers) <= {0, 1, 2}


# ------------------------------------------------------------------------------------------------------
# refusals: a clear error, nothing charged


def _bad(**changes: Any) -> PlannedRelease:
    fields: dict[str, Any] = {"mechanism": "gaussian", "sensitivity": 1.0, **changes}
    return PlannedRelease(**fields)


@pytest.mark.parametrize(
    ("releases", "match"),
    [
        ([], "empty"),
        ("gaussian", "list of PlannedRelease"),
        ([{"mechanism": "gaussian"}], r"releases\[0\]' must be a PlannedRelease"),
        ([_bad(mechanism="cauchy")], "'mechanism' must be one of"),
        ([_bad(mechanism=3)], "'mechanism' must be one of"),
        ([_bad(sensitivity=None)], "'sensitivity' is required"),
        ([_bad(sensitivity=-1.0)], "'sensitivity' must be > 0"),
        ([_bad(sensitivity=math.nan)], "finite"),
        ([_bad(weight=0.0)], "'weight' must be > 0"),
        ([_bad(weight="2")], "real number"),
        ([_bad(group_size=0)], "positive integer"),
        ([_bad(group_size=1.5)], "positive integer"),
        ([_bad(label=7)], "'label' must be a string"),
        ([_bad(categories=3)], "only for randomized response"),
        ([_bad(free="epsilon")], "only for a callable"),
        ([_bad(mechanism="randomized_response")], "takes no 'sensitivity'"),
        ([PlannedRelease("randomized_response", categories=1)], "must be ≥ 2"),
        ([PlannedRelease("randomized_response", categories="ab")], "count or a list"),
        ([PlannedRelease("randomized_response", categories=["a", "a"])], "categories"),
        ([PlannedRelease(lambda e: Laplace(epsilon=e, sensitivity=1.0), sensitivity=1.0)], "free='epsilon'"),
        (
            [PlannedRelease(lambda e: Laplace(epsilon=e, sensitivity=1.0), free="epsilon")],
            "'sensitivity' is required",
        ),
        ([PlannedRelease(lambda s: s, free="sigma")], "must return a mechanism"),
        ([_bad(), _bad(weight=-1.0)], r"releases\[1\]"),
    ],
)
def test_bad_releases_are_refused_and_nothing_changes(releases: Any, match: str) -> None:
    acct = memory(ApproxDP(1.0, 1e-6))
    before = ledger_entries(acct.store, "d")
    with pytest.raises(InvalidParameterError, match=match):
        allocate(releases, accountant=acct, dataset="d")
    assert ledger_entries(acct.store, "d") == before


@pytest.mark.parametrize(
    "where",
    [
        {},
        {"accountant": None, "dataset": "d"},
        {"dataset": "d"},
        {"target": ApproxDP(1.0, 1e-6), "dataset": "d"},
        {"target": 1.0},
        {"target": ApproxDP(1.0, 1e-6), "against": "all"},
    ],
)
def test_the_budget_must_be_named_once(where: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameterError):
        allocate([PlannedRelease("gaussian", sensitivity=1.0)], **where)


def test_plans_that_cannot_fit() -> None:
    acct = memory(ApproxDP(1.0, 1e-6))
    acct.spend("d", ApproxDP(1.0, 1e-6))  # ε and δ used up (with δ left, enough noise fits (0, δ))
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError, match="No amount of noise"):
        allocate([PlannedRelease("laplace", sensitivity=1.0)], accountant=acct, dataset="d")
    assert ledger_entries(acct.store, "d") == before
    with pytest.raises(UnsupportedCompositionError):
        allocate([PlannedRelease("gaussian", sensitivity=1.0)], target=PureDP(1.0))
    with pytest.raises(UnknownDatasetError):
        allocate([PlannedRelease("gaussian", sensitivity=1.0)], accountant=acct, dataset="other")


def test_fixed_releases_get_their_share_first() -> None:
    """A fixed μ = 0.6 Gaussian and two free ones of weight 1 on GaussianDP(1): the free ones get what is
    left, Σμ² = 1 − 0.36, each μ = √(0.32) (closed form); the cost counts all three."""
    fixed = Gaussian.from_mu(mu=0.6, sensitivity=1.0)
    free = [PlannedRelease("gaussian", sensitivity=1.0)] * 2
    allocation = allocate(free, target=GaussianDP(1.0), fixed=[fixed])
    mu_fixed = 1.0 / fixed.sigma
    best = math.sqrt(2.0 / (1.0 - mu_fixed**2))  # σ = 1/μ with 2μ² = 1 − μ_fixed²
    for release in allocation:
        assert best * (1 - 1e-12) <= release.mechanism.sigma <= best * 1.005
    mus = [mu_fixed, *(1.0 / r.mechanism.sigma for r in allocation)]
    assert math.sqrt(math.fsum(m * m for m in mus)) <= 1.0 * (1 + 1e-12)
    assert allocation.cost.mu == pytest.approx(1.0, rel=1e-5)  # type: ignore[union-attr]
    acct = memory(GaussianDP(1.0))
    acct.spend_plan("d", [fixed, *allocation])  # the ledger takes the fixed and the calibrated together


def test_fixed_releases_that_leave_nothing_or_are_not_releases_are_refused() -> None:
    with pytest.raises(BudgetExceededError, match="beside the fixed releases"):
        allocate(
            [PlannedRelease("laplace", sensitivity=1.0)],
            target=PureDP(1.0),
            fixed=[Laplace(epsilon=1.0, sensitivity=1.0)],
        )
    for fixed, match in [("laplace", "list"), ([0.5], r"fixed\[0\]"), ({"a": PureDP(1.0)}, "list")]:
        with pytest.raises(InvalidParameterError, match=match):
            allocate([PlannedRelease("laplace", sensitivity=1.0)], target=PureDP(1.0), fixed=fixed)  # type: ignore[arg-type]


def test_a_release_rebuilt_at_the_allocation_scale_is_the_one_allocated() -> None:
    """``at_scale`` rebuilds each calibrated mechanism from the common scale alone (what a run's task does
    with its run's published scale): the same event and noise."""
    releases = [
        PlannedRelease("laplace", sensitivity=2.0, weight=3.0),
        PlannedRelease("gaussian", sensitivity=1.0, weight=0.5, group_size=2),
        PlannedRelease("randomized_response", categories=4),
    ]
    allocation = allocate(releases, target=ApproxDP(1.0, 1e-6))
    for release, allocated in zip(releases, allocation, strict=True):
        again = release.check().at_scale(allocation.scale)
        assert again.event == allocated.event and again.std == allocated.std
    with pytest.raises(InvalidParameterError, match="'scale' must be > 0"):
        releases[0].at_scale(0.0)
    with pytest.raises(InvalidParameterError, match="'sensitivity' is required"):
        PlannedRelease("gaussian").check()


def test_from_dict() -> None:
    release = PlannedRelease.from_dict(
        {"mechanism": "laplace", "sensitivity": 2, "weight": 3, "label": "sum"}
    )
    assert release == PlannedRelease("laplace", sensitivity=2, weight=3, label="sum")
    for data, match in [
        ({"mechanism": "laplace", "sensitivity": 1, "epsilon": 1}, "unknown key"),
        ({"mechanism": "staircase", "sensitivity": 1}, "'mechanism' must be one of"),
        ({"mechanism": "laplace"}, "'sensitivity' is required"),
        ([1], "mapping"),
    ]:
        with pytest.raises(InvalidParameterError, match=match):
            PlannedRelease.from_dict(data)  # type: ignore[arg-type]


def test_the_module_examples_run() -> None:
    failures, tried = doctest.testmod(dp_pipeline._allocation)
    assert tried > 0 and failures == 0


# ------------------------------------------------------------------------------------------------------
# the command: dp-pipeline plan allocate DATASET plan.json


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.close()
    return url


def command(*args: str) -> Any:
    pytest.importorskip("typer")
    from typer.testing import CliRunner

    from dp_pipeline.cli import app

    return CliRunner().invoke(app, list(args))


def test_command_allocates_and_its_plan_checks(ledger: str, tmp_path: Path) -> None:
    items = [
        {"mechanism": "gaussian", "sensitivity": 1, "label": "count"},
        {"mechanism": "laplace", "sensitivity": 1, "weight": 2},
        {"mechanism": "randomized_response", "categories": ["x", "y", "z"], "group_size": 2},
    ]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(items))
    result = command("plan", "allocate", "d", str(plan), "--ledger", ledger)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    acct = PrivacyAccountant(ledger)
    expected = allocate([PlannedRelease.from_dict(i) for i in items], accountant=acct, dataset="d")
    assert [r["std"] for r in out["releases"]] == [r.std for r in expected]
    assert [r["event"] for r in out["releases"]] == [r.event.to_dict() for r in expected]
    assert out["cost"] == {"guarantee": expected.cost.to_dict(), "method": expected.method}
    assert out["target"] == ApproxDP(1.0, 1e-6).to_dict()
    # the calibrated plan, read back by plan check, costs what the allocation says and fits
    calibrated = tmp_path / "calibrated.json"
    calibrated.write_text(json.dumps(out["plan"]))
    check = command("plan", "check", "d", str(calibrated), "--json", "--ledger", ledger)
    assert check.exit_code == 0, check.stderr
    assert json.loads(check.stdout)["cost"] == out["cost"]
    assert ledger_entries(acct.store, "d")[-1].kind == "budget"  # nothing was charged
    acct.close()


@pytest.mark.parametrize(
    ("items", "code", "match"),
    [
        ([{"mechanism": "gaussian", "sensitivity": 1}, {"mechanism": "gaussian"}], 2, "plan item 2:"),
        ([{"mechanism": "gaussian", "sensitivity": 1, "sigma": 3}], 2, "unknown key"),
        ({"mechanism": "gaussian"}, 2, "non-empty JSON list"),
    ],
)
def test_command_refuses_bad_plans(ledger: str, tmp_path: Path, items: Any, code: int, match: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(items))
    result = command("plan", "allocate", "d", str(plan), "--ledger", ledger)
    assert result.exit_code == code and result.stdout == ""
    assert result.stderr.startswith("error: ") and match in result.stderr


def test_command_on_a_used_up_budget_exits_1(ledger: str, tmp_path: Path) -> None:
    acct = PrivacyAccountant(ledger)
    acct.spend("d", ApproxDP(1.0, 1e-6))  # ε and δ used up
    acct.close()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"mechanism": "laplace", "sensitivity": 1}]))
    result = command("plan", "allocate", "d", str(plan), "--ledger", ledger)
    assert result.exit_code == 1 and "No amount of noise" in result.stderr
    result = command("plan", "allocate", "d", str(plan), "--against", "budget", "--ledger", ledger)
    assert result.exit_code == 0 and json.loads(result.stdout)["against"] == "budget"
    assert command("plan", "allocate", "d", str(plan), "--against", "all", "--ledger", ledger).exit_code == 2


# ------------------------------------------------------------------------------------------------------
# a pure plan uses the target's δ


@pytest.mark.parametrize(("count", "before"), [(20, 20.0), (500, 500.0)])
def test_a_pure_plan_is_calibrated_at_the_targets_delta_against_dp_accountings_pld(
    count: int, before: float
) -> None:
    """Laplace releases in (1, 10⁻⁴): the least scale whose PLD (dp-accounting, run here) reads ε ≤ 1 at
    δ = 10⁻⁴, not the scale Σε ≤ 1 needs at δ = 0 (b = count, what allocate gave before)."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    allocation = allocate([PlannedRelease("laplace", sensitivity=1.0)] * count, target=ApproxDP(1.0, 1e-4))
    scale = allocation[0].mechanism.scale
    assert allocation.delta == 1e-4 and allocation.method == "pld"

    def epsilon(b: float) -> float:
        one = pld.from_laplace_mechanism(b, sensitivity=1.0, value_discretization_interval=1e-4)
        return float(one.self_compose(count).get_epsilon_for_delta(1e-4))

    assert epsilon(scale) <= 1.0 + 1e-3  # fits (dp-accounting's pessimistic PLD, up to its discretisation)
    assert epsilon(scale * (1 - 2e-3)) > 1.0  # and is the least that does, to the search's tolerance
    assert scale < 0.7 * before if count == 20 else scale < 0.15 * before


def test_a_pure_allocation_is_charged_at_its_delta_and_a_pure_budget_stays_at_delta_0() -> None:
    acct = memory(ApproxDP(1.0, 1e-4))
    allocation = allocate([PlannedRelease("laplace", sensitivity=1.0)] * 20, accountant=acct, dataset="d")
    assert allocation.delta == 1e-4
    acct.spend_plan("d", allocation, delta=allocation.delta, key="plan")  # accepted at the δ it was priced
    assert acct.spent("d").guarantee == allocation.cost
    pure = allocate([PlannedRelease("laplace", sensitivity=1.0)] * 20, target=PureDP(1.0))
    assert pure.delta == 0.0 and pure[0].mechanism.scale == pytest.approx(20.0, rel=1e-4)
