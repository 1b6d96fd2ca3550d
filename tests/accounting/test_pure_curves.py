"""Pure releases priced by their own curves: the Laplace mechanism's ρ (zCDP) and μ (GDP), the exponential
mechanism's ρ = ε²/8 (bounded range), each checked against the definition in mpmath; how many releases fit
before and after; and ledgers charged at the older, higher prices still verify."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import hypothesis
import mpmath
import pytest
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant
from dp_pipeline.accounting._composition import event_gdp, laplace_mu
from dp_pipeline.accounting._concentrated import bounded_range_rho, laplace_rho
from dp_pipeline.accounting.rules import Charge, GaussianDPFilter, ZeroConcentratedDP
from dp_pipeline.accounting.testing import laplace_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError
from dp_pipeline.guarantees import Guarantee, PureDP
from dp_pipeline.mechanisms import Exponential, Laplace

from .test_zcdp import _mp_epsilon, _mp_rho_limit

# ------------------------------------------------------------------------------------------------ references


def _mp_renyi_by_quadrature(alpha: mpmath.mpf, epsilon: mpmath.mpf) -> mpmath.mpf:
    """D_α(Lap(0, 1) ‖ Lap(ε, 1)) = ln ∫ p^α q^{1−α} / (α − 1), by quadrature of the two densities."""

    def integrand(x: mpmath.mpf) -> mpmath.mpf:
        p, q = mpmath.exp(-abs(x)) / 2, mpmath.exp(-abs(x - epsilon)) / 2
        return p**alpha * q ** (1 - alpha)

    total = mpmath.quad(integrand, [-mpmath.inf, 0, epsilon, mpmath.inf])
    return mpmath.log(total) / (alpha - 1)


def _mp_renyi_mironov(alpha: mpmath.mpf, epsilon: mpmath.mpf) -> mpmath.mpf:
    """Mironov 2017's closed form of the Laplace mechanism's Rényi divergence."""
    return mpmath.log(
        alpha / (2 * alpha - 1) * mpmath.exp((alpha - 1) * epsilon)
        + (alpha - 1) / (2 * alpha - 1) * mpmath.exp(-alpha * epsilon)
    ) / (alpha - 1)


def _alphas() -> list[mpmath.mpf]:
    """Orders from 1 + 10⁻⁹ to 1 + 10⁴, 40 per decade."""
    return [1 + mpmath.mpf(10) ** (mpmath.mpf(j) / 40) for j in range(-360, 161)]


def _mp_inverse_phi(p: mpmath.mpf) -> mpmath.mpf:
    return -mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * p)


# -------------------------------------------------------------------------------------------- Laplace, zCDP


@pytest.mark.parametrize("epsilon", ["0.05", "0.5", "2"])
@pytest.mark.parametrize("alpha", ["1.001", "1.5", "4", "40"])
def test_mironovs_laplace_renyi_divergence_matches_quadrature(epsilon: str, alpha: str) -> None:
    with mpmath.workdps(30):
        e, a = mpmath.mpf(epsilon), mpmath.mpf(alpha)
        assert _mp_renyi_mironov(a, e) == pytest.approx(_mp_renyi_by_quadrature(a, e), rel=1e-15)


@pytest.mark.parametrize("epsilon", ["1e-4", "0.05", "0.1", "1", "3", "10"])
def test_the_laplace_rho_is_the_supremum_of_its_renyi_curve_over_alpha(epsilon: str) -> None:
    with mpmath.workdps(40):
        e = mpmath.mpf(epsilon)
        curve = max(_mp_renyi_mironov(a, e) / a for a in _alphas())  # sup over α of D_α/α on the grid
        charged = laplace_rho(Fraction(epsilon))
        rho = mpmath.mpf(str(charged))
        assert rho >= curve  # a valid zCDP price: D_α ≤ ρα at every order tried
        assert rho <= curve * (1 + mpmath.mpf("1e-6"))  # and tight: the supremum is approached as α → 1
        assert rho < e**2 / 2  # below the generic pure-ε price


@hypothesis.settings(max_examples=80, deadline=None)
@hypothesis.given(loss=st.floats(min_value=1e-200, max_value=1e4))
def test_the_laplace_rho_is_never_below_its_exact_value_and_within_1e_35(loss: float) -> None:
    digits = 60 + 2 * max(0, -math.floor(math.log10(loss)))  # ρ ≈ x²/2: twice the digits of 1/x, and more
    with mpmath.workdps(digits):
        x = mpmath.mpf(loss)  # the double's exact value
        exact = x + mpmath.expm1(-x)
        charged = mpmath.mpf(str(laplace_rho(Fraction(loss))))
        assert charged >= exact
        assert charged <= exact * (1 + mpmath.mpf("1e-35"))


def test_bounded_range_rho_bounds_every_generalised_randomized_response() -> None:
    """ε-BR is dominated by generalised randomized response (loss t w.p. p_t, t − ε otherwise, t ∈ [0, ε],
    Dong, Durfee & Rogers 2020); D_α/α of each, in mpmath, never exceeds ε²/8, and reaches it as ε → 0."""
    with mpmath.workdps(30):
        for epsilon in ("0.1", "1", "3"):
            e = mpmath.mpf(epsilon)
            charged = bounded_range_rho(Decimal(epsilon))
            assert Fraction(charged) == Fraction(epsilon) ** 2 / 8
            rho = mpmath.mpf(str(charged))
            worst = mpmath.mpf(0)
            for i in range(1, 40):
                t = e * i / 40
                p = (mpmath.exp(e) - mpmath.exp(t)) / mpmath.expm1(e)
                for a in _alphas()[::8]:
                    moment = p * mpmath.exp((a - 1) * t) + (1 - p) * mpmath.exp((a - 1) * (t - e))
                    worst = max(worst, mpmath.log(moment) / (a - 1) / a)
            assert worst <= rho
            if epsilon == "0.1":
                assert worst >= rho * mpmath.mpf("0.999")  # ε²/8 is tight for small ε


def _fitting(acct: PrivacyAccountant, mechanism: object, limit: int = 5000) -> int:
    count = 0
    while count < limit:
        try:
            acct.spend("d", mechanism)
        except BudgetExceededError:
            return count
        count += 1
    return count


def test_exponential_releases_at_0_1_fit_19_of_a_zcdp_budget_where_9_did() -> None:
    budget = ApproxDP(1.0, 1e-6)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget, rule="zcdp")
    got = _fitting(acct, Exponential(epsilon=0.1, sensitivity=1.0))
    each = Fraction(0.1) ** 2 / 8  # the double 0.1, exactly
    zcdp_most = next(n for n in range(1, 1000) if _mp_epsilon(n * mpmath.mpf(each), mpmath.mpf(1e-6)) > 1) - 1
    pure_most = int(Fraction(1) / Fraction(0.1))  # Σε ≤ 1 at the double's value: 9 (the count before)
    assert pure_most == 9
    assert got == max(zcdp_most, pure_most) == 19
    acct.verify()


def test_exponential_and_laplace_group_charges_under_zcdp() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(10.0, 1e-6), rule="zcdp")
    acct.spend("d", Exponential(epsilon=0.25, sensitivity=1.0), group_size=3)  # 0.75-bounded range
    acct.spend("d", Laplace(epsilon=0.25, sensitivity=2.0), group_size=3)  # b = 8: loss exactly 3/4
    head = acct.store.head("d")
    assert head is not None
    rho = Fraction(Decimal(head.state.totals["rho"]))
    with mpmath.workdps(60):
        expected = mpmath.mpf(3) ** 2 / 4**2 / 8 + (mpmath.mpf(3) / 4 + mpmath.expm1(-mpmath.mpf(3) / 4))
        assert mpmath.mpf(rho.numerator) / rho.denominator >= expected
        assert mpmath.mpf(rho.numerator) / rho.denominator <= expected * (1 + mpmath.mpf("1e-38"))


# --------------------------------------------------------------------------------------------- Laplace, GDP


def _laplace_tradeoff_points(epsilon: mpmath.mpf, steps: int) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """(α, β) of the Laplace trade-off T(Lap(0, 1), Lap(ε, 1)) from the densities: the likelihood-ratio
    tests "reject if X > c" for c ∈ [0, ε] by quadrature, and the randomised tests between them and the
    trivial tests (0, 1), (1, 0), where the ratio is constant (segments, sampled)."""

    def p(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-abs(x)) / 2

    def q(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-abs(x - epsilon)) / 2

    curve = []
    for i in range(steps + 1):
        c = epsilon * i / steps
        alpha = mpmath.quad(p, [c, mpmath.inf])
        beta = mpmath.quad(q, [-mpmath.inf, min(c, 0), c] if c > 0 else [-mpmath.inf, c])
        curve.append((alpha, beta))
    last, first = curve[-1], curve[0]  # c = ε (least α), c = 0
    segments = []
    for j in range(1, steps):
        w = mpmath.mpf(j) / steps
        segments.append((w * last[0], 1 - w * (1 - last[1])))  # between (0, 1) and c = ε
        segments.append((first[0] + w * (1 - first[0]), first[1] * (1 - w)))  # between c = 0 and (1, 0)
    return curve + segments


@pytest.mark.parametrize("epsilon", ["0.1", "1", "2", "5"])
def test_the_laplace_tradeoff_lies_above_g_mu_for_the_mu_charged_and_no_smaller_mu(epsilon: str) -> None:
    with mpmath.workdps(25):
        e = mpmath.mpf(epsilon)
        points = _laplace_tradeoff_points(e, 60)
        needed = max(_mp_inverse_phi(1 - a) - _mp_inverse_phi(b) for a, b in points if 0 < a < 1 and b > 0)
        charged = event_gdp(laplace_event(float(epsilon))).mu
        assert charged >= needed  # G_μ ≤ T everywhere sampled
        assert charged <= needed * (1 + mpmath.mpf("1e-12"))  # and the least μ: the midpoint needs it all
        generic = PureDP(float(epsilon)).to_gdp().mu
        assert charged < generic


@hypothesis.settings(max_examples=80, deadline=None)
@hypothesis.given(loss=st.floats(min_value=1e-300, max_value=1e5))
def test_laplace_mu_is_never_below_its_exact_value_and_within_1e_12(loss: float) -> None:
    # scipy's ndtri_exp errs by at most 6e-16 below and 7e-13 above (large ε) the exact value (measured)
    with mpmath.workdps(60):
        x = mpmath.mpf(loss)
        exact = 2 * mpmath.sqrt(2) * mpmath.erfinv(-mpmath.expm1(-x / 2))
        if not mpmath.isfinite(exact) or exact == 0:  # erfinv of a value within 10⁻⁶⁰ of 1: solve instead
            start = -mpmath.sqrt(x)
            exact = -2 * mpmath.findroot(lambda z: mpmath.log(mpmath.ncdf(z)) + x / 2 + mpmath.log(2), start)
        charged = laplace_mu(loss).mu
        assert charged >= exact
        assert charged <= exact * (1 + mpmath.mpf("1e-12"))


@pytest.mark.parametrize(("epsilon", "before"), [(1.0, 65), (2.0, 17)])
def test_laplace_releases_fit_a_gdp_budget_as_the_laplace_tradeoff_allows(
    epsilon: float, before: int
) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(10.0), rule="gdp_filter")
    got = _fitting(acct, Laplace(epsilon=epsilon, sensitivity=1.0))
    with mpmath.workdps(30):
        mu = -2 * _mp_inverse_phi(mpmath.exp(-mpmath.mpf(epsilon) / 2) / 2)
        generic = 2 * _mp_inverse_phi(mpmath.exp(epsilon) / (1 + mpmath.exp(epsilon)))
        assert int(mpmath.floor(100 / mu**2)) == got
        assert int(mpmath.floor(100 / generic**2)) == before  # what the generic ε-DP μ allowed
    assert 1.4 * before <= got <= 1.8 * before
    acct.verify()


def test_laplace_releases_on_a_pure_or_gdp_budget_use_the_laplace_mu() -> None:
    from tests.test_readme import _gdp_delta

    budget = ApproxDP(1.0, 1e-6)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget, rule="pure_or_gdp")
    got = _fitting(acct, Laplace(epsilon=0.01, sensitivity=1.0))  # b = 100: the loss is exactly 1/100
    from scipy import optimize

    mu_b = optimize.brentq(lambda m: _gdp_delta(m, 1.0) - 1e-6, 0.01, 10.0)
    with mpmath.workdps(30):
        mu = -2 * _mp_inverse_phi(mpmath.exp(-mpmath.mpf(1) / 200) / 2)
        generic = 2 * _mp_inverse_phi(mpmath.exp(mpmath.mpf(1) / 100) / (1 + mpmath.exp(mpmath.mpf(1) / 100)))
        expected = int(mpmath.floor(mu_b**2 / mu**2))
        before = int(mpmath.floor(mu_b**2 / generic**2))
    assert got == expected > before > 100  # the μ-GDP route, past the pure route's 100


def test_a_gdp_plan_of_laplace_releases_costs_the_root_sum_of_laplace_mus() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(10.0), rule="gdp_filter")
    cost = acct.plan_cost("d", [Laplace(epsilon=1.0, sensitivity=1.0)] * 10).guarantee
    assert isinstance(cost, GaussianDP)
    with mpmath.workdps(30):
        mu = -2 * _mp_inverse_phi(mpmath.exp(-mpmath.mpf(1) / 2) / 2)
        assert mpmath.sqrt(10) * mu <= cost.mu <= mpmath.sqrt(10) * mu * (1 + mpmath.mpf("1e-12"))


# ------------------------------------------------------------------------------------------------ old ledgers


def _old_zcdp_charge(self: ZeroConcentratedDP, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
    charge, cost = _NEW_ZCDP(self, event, k)
    epsilon = charge["epsilon"]
    if epsilon is None:
        return charge, cost
    return Charge({"epsilon": epsilon, "rho": epsilon * epsilon / 2}), cost  # the ε²/2 charged before


def _old_gdp_charge(self: GaussianDPFilter, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
    charge, cost = _NEW_GDP(self, event, k)
    generic = Decimal(PureDP(1.0).to_gdp().mu) ** 2  # the generic μ of ε = 1, charged before
    return Charge({**charge.amounts, "mu2": generic}), cost


_NEW_ZCDP = ZeroConcentratedDP.charge_event
_NEW_GDP = GaussianDPFilter.charge_event


def test_ledgers_charged_at_the_older_higher_prices_still_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    from dp_pipeline.accounting import _pricing as pricing

    acct = PrivacyAccountant("memory://")
    acct.set_budget("z", ApproxDP(3.0, 1e-6), rule="zcdp")
    acct.set_budget("g", GaussianDP(5.0), rule="gdp_filter")
    with monkeypatch.context() as patch:
        pricing.price_one.cache_clear()
        patch.setattr(ZeroConcentratedDP, "charge_event", _old_zcdp_charge)
        patch.setattr(GaussianDPFilter, "charge_event", _old_gdp_charge)
        for _ in range(3):
            acct.spend("z", Laplace(epsilon=0.25, sensitivity=1.0), label="written at ε²/2")
            acct.spend("z", Exponential(epsilon=0.25, sensitivity=1.0), label="written at ε²/2")
            acct.spend("g", Laplace(epsilon=1.0, sensitivity=1.0), label="written at the generic μ")
    pricing.price_one.cache_clear()
    head = acct.store.head("z")
    assert head is not None and Decimal(head.state.totals["rho"]) == 6 * Decimal("0.03125")  # the old prices
    assert acct.verify().records == 2 + 2 * 9  # a charge above today's price is fine (reserve, commit)
    acct.spend("z", Laplace(epsilon=0.25, sensitivity=1.0))  # and new spends are charged today's price
    acct.spend("g", Laplace(epsilon=1.0, sensitivity=1.0))
    assert acct.verify().records == 2 + 2 * 11


def test_a_charge_below_todays_price_is_found_by_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    from dp_pipeline.accounting import _pricing as pricing
    from dp_pipeline.exceptions import LedgerError

    acct = PrivacyAccountant("memory://")
    acct.set_budget("z", ApproxDP(3.0, 1e-6), rule="zcdp")
    with monkeypatch.context() as patch:
        pricing.price_one.cache_clear()

        def under(self: ZeroConcentratedDP, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
            charge, cost = _NEW_ZCDP(self, event, k)
            rho = charge["rho"]
            assert rho is not None
            return Charge({**charge.amounts, "rho": rho * Decimal("0.99")}), cost

        patch.setattr(ZeroConcentratedDP, "charge_event", under)
        acct.spend("z", Laplace(epsilon=0.5, sensitivity=1.0))
    pricing.price_one.cache_clear()
    with pytest.raises(LedgerError, match="below what its request costs"):
        acct.verify()


def test_readme_rows_for_zcdp_and_pure_or_gdp_reference_counts() -> None:
    """The counts the README's rule table should show for Laplace(ε = 0.05) on ApproxDP(3, 1e-5), from
    mpmath: ρ = ε + e^{−ε} − 1 each against ρ_B, and the Laplace μ against μ_B."""
    from scipy import optimize

    from tests.test_readme import _gdp_delta

    with mpmath.workdps(40):
        eps = mpmath.mpf(1) / 20
        rho_each = eps + mpmath.expm1(-eps)
        zcdp_expected = int(mpmath.floor(_mp_rho_limit(3.0, 1e-5) / rho_each))
        mu_each = -2 * _mp_inverse_phi(mpmath.exp(-eps / 2) / 2)
        mu_b = optimize.brentq(lambda m: _gdp_delta(m, 3.0) - 1e-5, 0.01, 10.0)
        gdp_expected = int(mpmath.floor(mu_b**2 / mu_each**2))
    for rule, expected in (("zcdp", zcdp_expected), ("pure_or_gdp", gdp_expected)):
        acct = PrivacyAccountant("memory://")
        acct.set_budget("d", ApproxDP(3.0, 1e-5), rule=rule)
        assert _fitting(acct, Laplace(epsilon=0.05, sensitivity=1.0)) == expected, rule
    assert (zcdp_expected, gdp_expected) == (182, 134)


def test_no_loss_costs_nothing_and_the_spec_value_at_1() -> None:
    assert laplace_mu(0.0).mu == 0.0 and laplace_rho(Fraction(0)) == 0
    assert math.isclose(laplace_mu(1.0).mu, 1.030, abs_tol=5e-4)  # SPEC.md §3: 1.030 at ε = 1
