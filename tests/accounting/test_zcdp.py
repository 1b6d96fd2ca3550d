"""The zCDP rule: its conversion of ρ to (ε, δ) against mpmath, OpenDP and dp-accounting, the rule
contract, what each release is charged, and adaptive Laplace releases against basic composition."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import hypothesis
import mpmath
import numpy as np
import pytest
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting._concentrated import zcdp_epsilon, zcdp_rho_limit
from dp_pipeline.accounting.rules import BasicComposition, BudgetRule, Totals, ZeroConcentratedDP, user_rule
from dp_pipeline.accounting.testing import BudgetRuleContract, gaussian_event, laplace_event
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError, UnsupportedCompositionError
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import Gaussian, Laplace, fast_rng

# ------------------------------------------------------------------------------------------------ references


def _mp_epsilon(rho: mpmath.mpf, delta: mpmath.mpf) -> mpmath.mpf:
    """inf over α > 1 of αρ + (ln(1/δ) + (α − 1)ln(1 − 1/α) − ln α)/(α − 1) (Canonne, Kamath & Steinke 2020,
    §2.3), in 50 digits: the minimiser is where the α-derivative vanishes, found by bisection."""
    with mpmath.workdps(50):
        rho, delta = mpmath.mpf(rho), mpmath.mpf(delta)
        log_inv = -mpmath.log(delta)

        def bound(a: mpmath.mpf) -> mpmath.mpf:
            return a * rho + (log_inv + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)) / (a - 1)

        def slope(t: mpmath.mpf) -> mpmath.mpf:  # α = 1 + eᵗ
            a = 1 + mpmath.exp(t)
            return (a - 1) ** 2 * rho - log_inv + mpmath.log(a)

        low, high = mpmath.mpf(-100), mpmath.log(mpmath.sqrt(log_inv / rho) + 1) + 1  # slope < 0, > 0
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if slope(middle) < 0 else (low, middle)
        return max(mpmath.mpf(0), bound(1 + mpmath.exp(low)))


def _bun_steinke(rho: float, delta: float) -> float:
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


# ------------------------------------------------------------------------------------------------ conversion


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    rho=st.floats(min_value=1e-8, max_value=1e4), delta=st.floats(min_value=1e-30, max_value=0.5)
)
def test_the_epsilon_of_rho_is_never_below_the_exact_bound_and_within_1e_12_of_it(
    rho: float, delta: float
) -> None:
    got = zcdp_epsilon(Decimal(rho), delta)
    expected = _mp_epsilon(mpmath.mpf(rho), mpmath.mpf(delta))
    assert mpmath.mpf(got) >= expected
    assert mpmath.mpf(got) <= expected * (1 + mpmath.mpf("1e-12")) + mpmath.mpf("1e-300")
    assert got <= _bun_steinke(rho, delta) * (1 + 1e-15)  # never looser than Bun & Steinke's form


@pytest.mark.parametrize(
    ("rho", "delta"), [(0.03125, 1e-3), (0.125, 1e-6), (0.5, 1e-9), (2.0, 1e-5), (1e-4, 1e-7), (30.0, 1e-10)]
)
def test_the_epsilon_of_rho_matches_opendp_and_is_below_dp_accountings_grid(rho: float, delta: float) -> None:
    dp = pytest.importorskip("opendp.prelude")
    rdp_privacy_accountant = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

    dp.enable_features("contrib", "honest-but-curious")
    measurement = dp.m.make_user_measurement(
        dp.atom_domain(T=float, nan=False),
        dp.absolute_distance(T=float),
        dp.zero_concentrated_divergence(),
        lambda x: x,
        lambda d_in: rho,
    )
    opendp_epsilon = dp.c.make_zCDP_to_approxDP(measurement).map(1.0).epsilon(delta)
    got = zcdp_epsilon(Decimal(rho), delta)
    assert got == pytest.approx(opendp_epsilon, rel=1e-12)  # OpenDP rounds its own way, conservatively
    orders = np.concatenate([np.linspace(1.01, 8, 500), np.linspace(8, 2000, 2000)])
    grid_epsilon, _ = rdp_privacy_accountant.compute_epsilon(orders, orders * rho, delta)
    assert got <= grid_epsilon * (1 + 1e-12)  # the exact optimum is below the best order of any grid


def test_the_rho_limit_reads_within_the_budget_and_is_the_largest_that_does() -> None:
    for epsilon, delta in [(3.0, 1e-6), (1.0, 1e-5), (0.1, 1e-9), (10.0, 1e-12), (0.5, 0.25)]:
        limit = zcdp_rho_limit(epsilon, delta)
        assert limit > 0 and limit == Decimal(float(limit))  # a double, stored exactly
        assert _mp_epsilon(mpmath.mpf(limit), mpmath.mpf(delta)) <= epsilon
        assert _mp_epsilon(mpmath.mpf(limit) * (1 + mpmath.mpf("1e-10")), mpmath.mpf(delta)) > epsilon


def test_a_rho_limit_of_zero_when_no_positive_rho_is_certified() -> None:
    # ε = 1e-300 at δ = 5e-324: the least double ρ already reads to more (mpmath), so only pure spends fit
    assert _mp_epsilon(mpmath.mpf(5e-324), mpmath.mpf(5e-324)) > mpmath.mpf(1e-300)
    assert zcdp_rho_limit(1e-300, 5e-324) == 0
    assert ZeroConcentratedDP.create(ApproxDP(1e-300, 5e-324)).fits(
        ZeroConcentratedDP.create(ApproxDP(1e-300, 5e-324)).empty()
    )


# ------------------------------------------------------------------------------------------------ contract


class TestZeroConcentratedDP(BudgetRuleContract):
    def make_rules(self) -> list[BudgetRule]:
        return [
            ZeroConcentratedDP.create(ApproxDP(2.0, 1e-5)),
            ZeroConcentratedDP.create(ApproxDP(0.5, 1e-9)),
        ]

    def remaining_spend(self, rule: BudgetRule, totals: Totals) -> Guarantee | None:
        """What remains is the largest pure ε one more release can have (and no δ: an (ε, δ > 0) guarantee
        that is not Gaussian has no zCDP)."""
        left, _ = rule.remaining(totals)
        assert isinstance(left, ApproxDP)
        return PureDP(left.epsilon)


# ------------------------------------------------------------------------------------------------ charges


def _zcdp(budget: ApproxDP | None = None) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget or ApproxDP(3.0, 1e-6), rule="zcdp")
    return acct


def _rho(acct: PrivacyAccountant) -> Fraction:
    head = acct.store.head("d")
    assert head is not None
    return Fraction(Decimal(head.state.totals["rho"]))


def test_each_release_is_charged_its_rho_exactly() -> None:
    acct = _zcdp(ApproxDP(10.0, 1e-6))
    laplace = Laplace(epsilon=0.25, sensitivity=2.0)  # b = 8: the noise loses exactly 1/4
    acct.spend("d", laplace, group_size=3)
    x = mpmath.mpf(3) * 2 / laplace.scale  # the group's loss kΔ/b = 3/4, exactly
    with mpmath.workdps(60):  # the Laplace noise's own ρ: its KL divergence x + e^{−x} − 1
        laplace_rho = x + mpmath.expm1(-x)
        got = mpmath.mpf(_rho(acct).numerator) / _rho(acct).denominator
        assert laplace_rho <= got <= laplace_rho * (1 + mpmath.mpf("1e-39"))
    expected = _rho(acct)
    gaussian = Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.5)  # analytic calibration
    acct.spend("d", gaussian)
    expected += Fraction(1.5) ** 2 / (2 * Fraction(gaussian.sigma) ** 2)  # Δ²/(2σ²), whatever calibrated σ
    assert abs(_rho(acct) - expected) <= Fraction(1, 10**39) * expected  # 40 digits, rounded up
    assert _rho(acct) >= expected
    acct.spend("d", GaussianDP(0.125))
    acct.spend("d", PureDP(0.5))
    expected_total = expected + Fraction(0.125) ** 2 / 2 + Fraction(0.5) ** 2 / 2
    assert _rho(acct) >= expected_total and _rho(acct) - expected_total < Fraction(1, 10**38)
    assert acct.spent("d").method == "zcdp"  # not all pure: the zCDP route
    assert acct.spent("d").epsilon == zcdp_epsilon(Decimal(acct.store.head("d").state.totals["rho"]), 1e-6)  # type: ignore[union-attr]
    acct.verify()


def test_a_release_with_delta_that_is_not_gaussian_is_refused_and_writes_nothing() -> None:
    acct = _zcdp()
    before = acct.store.records("d")
    with pytest.raises(UnsupportedCompositionError, match=r"no zCDP guarantee.*rule='basic'"):
        acct.spend("d", ApproxDP(0.5, 1e-8))
    assert acct.store.records("d") == before


def test_the_rule_needs_an_epsilon_delta_budget_with_delta() -> None:
    acct = PrivacyAccountant("memory://")
    with pytest.raises(InvalidParameterError, match="needs δ > 0"):
        acct.set_budget("d", ApproxDP(1.0, 0.0), rule="zcdp")
    with pytest.raises(InvalidParameterError, match="'zcdp' is for ApproxDP budgets"):
        acct.set_budget("d", GaussianDP(1.0), rule="zcdp")
    assert acct.datasets() == []


def test_a_stored_rho_limit_above_what_the_budget_allows_is_found() -> None:
    rule = ZeroConcentratedDP.create(ApproxDP(1.0, 1e-6))
    assert rule.check_parameters() is None
    assert rule.rho_limit is not None
    raised = ZeroConcentratedDP(rule.budget, rule.rho_limit * Decimal("1.000001"))
    assert "above the one its (ε, δ) allows" in (raised.check_parameters() or "")


def test_auto_stays_basic_composition_for_an_epsilon_delta_budget() -> None:
    # the documented decision: basic composition takes every release the code spent before
    assert user_rule("auto", ApproxDP(3.0, 1e-6)) is BasicComposition
    for release in (ApproxDP(0.5, 1e-8), Gaussian(epsilon=3.0, delta=1e-6, sensitivity=1.0)):
        acct = PrivacyAccountant("memory://")
        acct.set_budget("d", ApproxDP(3.0, 1e-6))
        acct.spend("d", release)  # accepted by the default
        with pytest.raises((UnsupportedCompositionError, BudgetExceededError)):
            _zcdp().spend("d", release)  # no zCDP at all; a Gaussian at the whole budget reads above it


def test_a_zcdp_budget_persists_in_an_sqlite_ledger(sqlite_url: str) -> None:
    with PrivacyAccountant(sqlite_url, create=True) as acct:
        acct.set_budget("d", ApproxDP(3.0, 1e-6), rule="zcdp")
        acct.spend("d", Laplace(epsilon=0.25, sensitivity=1.0))
        acct.spend("d", Gaussian.from_mu(mu=0.25, sensitivity=1.0))
        spent = acct.spent("d")
    with PrivacyAccountant(sqlite_url, create=False) as again:
        assert again.spent("d") == spent and again.budget("d").method == "zcdp"
        assert again.verify().records == 5


# ------------------------------------------------------------------------------------------------ adaptivity


def _adaptive_laplace(acct: PrivacyAccountant, data: np.ndarray, rng: np.random.Generator, limit: int) -> int:
    """Release noisy counts with ε = 0.05 until refused (or ``limit``), each query chosen from the previous
    noisy answer (the next threshold is the last answer scaled into the data's range)."""
    threshold, released = 0.5, 0
    while released < limit:
        mechanism = Laplace(epsilon=0.05, sensitivity=1.0)
        try:
            acct.spend("d", mechanism, label=f"count above {threshold:.3f}")
        except BudgetExceededError:
            return released
        answer = float(mechanism.randomize(np.array([float(np.sum(data > threshold))]), rng=rng)[0])
        threshold = min(1.0, max(0.0, answer / len(data)))  # the next query depends on this result
        released += 1
    return released


def _mp_laplace_rho(loss: Fraction) -> mpmath.mpf:
    """x + e^{−x} − 1 (the Laplace noise's KL divergence, its least zCDP ρ) in 50 digits."""
    with mpmath.workdps(50):
        x = mpmath.mpf(loss.numerator) / loss.denominator
        return x + mpmath.expm1(-x)


def test_100_adaptive_laplace_releases_fit_a_budget_where_basic_composition_fits_60() -> None:
    budget, rho_each = ApproxDP(3.0, 1e-6), _mp_laplace_rho(Fraction(1, 20))  # ε = Δ/b = 1/20 (b = 20)
    expected = _mp_epsilon(mpmath.mpf(100) * rho_each, mpmath.mpf(1e-6))
    assert expected < 3  # the independent bound: 100 releases fit
    reads = [_mp_epsilon(n * rho_each, mpmath.mpf(1e-6)) for n in range(100, 200)]
    most = 100 + next(i for i, epsilon in enumerate(reads) if epsilon > 3) - 1
    basic_most = int(Fraction(3) / Fraction(1, 20))  # Σε ≤ 3

    rng = fast_rng(7)
    data = rng.uniform(size=500)
    acct = _zcdp(budget)
    assert _adaptive_laplace(acct, data, rng, 100) == 100
    spent = acct.spent("d")
    assert spent.method == "zcdp" and spent.delta == 1e-6
    assert expected <= spent.epsilon <= expected * (1 + mpmath.mpf("1e-12"))
    assert _adaptive_laplace(acct, data, rng, 10_000) == most - 100  # the rest, up to the bound
    acct.verify()

    basic = PrivacyAccountant("memory://")
    basic.set_budget("d", budget, rule="basic")
    assert _adaptive_laplace(basic, data, rng, 10_000) == basic_most == 60


@pytest.mark.slow
def test_the_zcdp_total_of_laplace_releases_is_never_below_their_tight_privacy_loss() -> None:
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    acct = _zcdp()
    for _ in range(100):
        acct.spend("d", laplace_event(0.05))
    one = pld.from_laplace_mechanism(20.0, pessimistic_estimate=False, value_discretization_interval=1e-4)
    composed = one.self_compose(100)
    assert acct.spent("d").epsilon >= composed.get_epsilon_for_delta(1e-6)


def test_mixed_laplace_and_gaussian_releases_fit_exactly_as_many_as_the_zcdp_bound_allows() -> None:
    zcdp = _zcdp()
    events = [laplace_event(0.05) if i % 2 == 0 else gaussian_event(0.05) for i in range(200)]
    accepted = 0
    for event in events:
        try:
            zcdp.spend("d", event)
        except BudgetExceededError:
            break
        accepted += 1
    total, most = mpmath.mpf(0), 0
    for event in events:  # the Laplace noise's ρ at its exact ε = Δ/b; Δ²/(2σ²) of the Gaussian noise
        noise = Fraction(event.parameters["scale" if event.kind == "laplace" else "sigma"])
        loss = Fraction(event.sensitivity or 1.0) / noise
        rho = _mp_laplace_rho(loss) if event.kind == "laplace" else mpmath.mpf(loss**2 / 2)
        total += rho
        if _mp_epsilon(total, mpmath.mpf(1e-6)) > 3:
            break
        most += 1
    assert accepted == most > 100


def _mp_rho_limit(epsilon: float, delta: float) -> mpmath.mpf:
    """The largest ρ whose reading is within ε, by bisection on ρ in mpmath."""
    low, high = mpmath.mpf(0), mpmath.mpf(epsilon)
    for _ in range(120):
        middle = (low + high) / 2
        low, high = (middle, high) if _mp_epsilon(middle, mpmath.mpf(delta)) <= epsilon else (low, middle)
    return low


def test_the_readme_rule_table_counts_for_zcdp() -> None:
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    rows = {
        "Laplace(epsilon=0.5, sensitivity=1)": Laplace(epsilon=0.5, sensitivity=1.0),
        "Gaussian(epsilon=0.5, delta=1e-6, sensitivity=1)": Gaussian(
            epsilon=0.5, delta=1e-6, sensitivity=1.0
        ),
        "Laplace(epsilon=0.05, sensitivity=1)": Laplace(epsilon=0.05, sensitivity=1.0),
    }
    limit = _mp_rho_limit(3.0, 1e-5)
    for shown, mechanism in rows.items():
        line = next(row for row in text.splitlines() if row.startswith(f"| `{shown}`"))
        claimed = int(line.split("|")[4].split()[0])  # the rule="zcdp" column
        if isinstance(mechanism, Laplace):
            # ε = Δ/b exactly, ρ = ε + e^{−ε} − 1; the pure route fits n·ε ≤ 3
            rho, pure = _mp_laplace_rho(1 / Fraction(mechanism.scale)), int(3 * Fraction(mechanism.scale))
        else:
            gauss = Fraction(1) / (2 * Fraction(mechanism.sigma) ** 2)
            rho, pure = mpmath.mpf(gauss.numerator) / gauss.denominator, 0
        expected = max(pure, int(mpmath.floor(limit / rho)))
        acct = _zcdp(ApproxDP(3.0, 1e-5))
        count = 0
        while True:
            try:
                acct.spend("d", mechanism)
            except BudgetExceededError:
                break
            count += 1
        assert count == claimed == expected, shown


def test_the_command_sets_a_zcdp_budget(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from dp_pipeline.cli import app

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    runner = CliRunner()
    assert runner.invoke(app, ["ledger", "init", "--ledger", url]).exit_code == 0
    shown = runner.invoke(
        app,
        [
            "budget",
            "set",
            "d",
            "--epsilon",
            "3",
            "--delta",
            "1e-6",
            "--rule",
            "zcdp",
            "--json",
            "--ledger",
            url,
        ],
    )
    assert shown.exit_code == 0 and json.loads(shown.stdout)["rule"] == "zcdp"
    table = runner.invoke(app, ["budget", "show", "d", "--ledger", url], env={"COLUMNS": "200"}).stdout
    assert "pure ε or zCDP filter" in table
    with PrivacyAccountant(url, create=False) as acct:
        assert acct.budget("d").method == "zcdp"
        acct.spend("d", Gaussian.from_mu(mu=0.25, sensitivity=1.0))
    table = runner.invoke(app, ["budget", "show", "d", "--ledger", url], env={"COLUMNS": "200"}).stdout
    assert "zCDP filter" in table.split("pure ε or zCDP filter")[-1]  # the spent amount's method
