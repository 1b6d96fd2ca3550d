"""The pandas functions calibrate to the relation of the dataset they are charged to.

Each aggregate's true privacy loss under replace-one is computed here, from the noise it actually added (read
from ``attrs``) and from the largest change of the exact statistic between neighbouring datasets built in the
test (one person's rows replaced by another's). The recorded charge must cover it, and the noise must not be
needlessly large: the true loss equals what was asked for.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from dp_pipeline import ApproxDP, PrivacyAccountant, UnsupportedCompositionError
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.frames import (
    add_noise,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_sum,
    dp_var,
    randomized_response,
)
from dp_pipeline.frames._core import sensitivity as _sensitivity

pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

KEYS = ["a", "b", "c"]
M = 3  # rows kept per person


def accountant(relation: str) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(100.0, 1e-3), relation=relation)
    return acct


def release(function: Any, acct: PrivacyAccountant, *args: Any, **options: Any) -> Any:
    """One release on ``people([("a", 1.0)])`` charged to dataset "d", at most M rows per person."""
    df = people([("a", 1.0)])
    return df.pipe(
        function, *args, accountant=acct, dataset="d", privacy_unit="person", max_contributions=M, **options
    )


def gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP, i.e. of Gaussian noise σ at L2 sensitivity μσ (Balle & Wang 2018)."""
    return float(
        special.ndtr(mu / 2 - epsilon / mu) - math.exp(epsilon) * special.ndtr(-mu / 2 - epsilon / mu)
    )


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The least ε with δ(ε) ≤ δ for μ-GDP (the curve decreases in ε)."""
    return float(optimize.brentq(lambda e: gaussian_delta(mu, e) - delta, 0.0, 100.0, xtol=1e-14))


def people(first: list[tuple[str, float]]) -> pd.DataFrame:
    """Person 0 has the rows ``first`` (key, value); persons 1–5 have one row each."""
    rows = [("p0", k, v) for k, v in first] + [(f"p{i}", KEYS[i % 3], 1.0) for i in range(1, 6)]
    return pd.DataFrame(rows, columns=["person", "key", "x"])


def neighbours(low: float, high: float) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Pairs of datasets in which person 0 (≤ M rows) is replaced by another person (≤ M rows).

    A person may have no rows in the frame released (``df[df.diabetic]`` filters before the release).
    """
    shapes = [
        [],
        [("a", high)] * M,
        [("a", low)] * M,
        [("b", high)] * M,
        [("b", low)] * M,
        [("a", high), ("b", high), ("c", high)],
        [("a", low)],
        [("c", high)],
    ]
    return [(people(x), people(y)) for x in shapes for y in shapes if x != y]


def exact(function: Any, df: pd.DataFrame, grouped: bool, **options: Any) -> np.ndarray:
    """The exact count or clipped sum, as a vector over the keys (every person has at most M rows)."""
    if function is dp_count:
        values = pd.Series(1.0, index=df.index)
    else:
        values = df["x"].clip(options["lower"], options["upper"])
    if not grouped:
        return np.array([float(values.sum())])
    return values.groupby(df["key"]).sum().reindex(KEYS, fill_value=0.0).to_numpy(dtype=float)


def largest_change(function: Any, grouped: bool, norm: int, low: float, high: float, **options: Any) -> float:
    changes = [
        np.linalg.norm(exact(function, x, grouped, **options) - exact(function, y, grouped, **options), norm)
        for x, y in neighbours(low, high)
    ]
    return float(max(changes))


@pytest.mark.parametrize(
    ("function", "grouped", "options", "low", "high"),
    [
        (dp_count, True, {}, 1.0, 1.0),
        (dp_count, False, {}, 1.0, 1.0),
        (dp_histogram, True, {"column": "key", "categories": KEYS}, 1.0, 1.0),
        (dp_sum, True, {"column": "x", "lower": -2.0, "upper": 5.0}, -2.0, 5.0),
        (dp_sum, False, {"column": "x", "lower": -2.0, "upper": 5.0}, -2.0, 5.0),
    ],
)
def test_laplace_aggregates_on_replace_one_lose_what_they_are_charged(
    function: Any, grouped: bool, options: dict[str, Any], low: float, high: float
) -> None:
    acct = accountant("replace_one")
    by = {"by": "key", "keys": KEYS} if grouped and function is not dp_histogram else {}
    out = release(function, acct, epsilon=0.7, **by, **options)
    scale = out.attrs["cost"]["parameters"]["scale"]  # the Laplace noise added
    statistic = dp_count if function is dp_histogram else function  # a histogram counts rows per key
    true_epsilon = largest_change(statistic, grouped, 1, low, high, **options) / scale
    # ≥ up to the last place of the scale's division (its rounding is tested with the mechanisms)
    assert acct.spent("d").epsilon * (1 + 2**-52) >= true_epsilon
    assert true_epsilon == pytest.approx(0.7, rel=1e-12)  # calibrated to replace-one, not 2ε
    assert out.attrs["relation"] == "replace_one"


def test_grouped_laplace_count_on_add_remove_is_calibrated_to_m() -> None:
    acct = accountant("add_remove")
    out = release(dp_count, acct, epsilon=0.5, by="key", keys=KEYS)
    assert out.attrs["noise_std"] == [pytest.approx(math.sqrt(2.0) * M / 0.5)]
    assert out.attrs["relation"] == "add_remove" and acct.spent("d").epsilon == 0.5


@pytest.mark.parametrize("function", [dp_count, dp_histogram])
def test_gaussian_histogram_on_replace_one_loses_what_it_is_charged(function: Any) -> None:
    acct = accountant("replace_one")
    options: dict[str, Any] = (
        {"by": "key", "keys": KEYS} if function is dp_count else {"column": "key", "categories": KEYS}
    )
    out = release(function, acct, epsilon=1.0, delta=1e-6, mechanism="gaussian", **options)
    sigma = out.attrs["noise_std"][0]
    change = largest_change(dp_count, True, 2, 1.0, 1.0)
    assert change == pytest.approx(math.sqrt(2.0) * M)  # the rows leave one key for another
    true_delta = gaussian_delta(change / sigma, acct.spent("d").epsilon)
    assert true_delta <= acct.spent("d").delta * (1 + 1e-9)
    assert true_delta == pytest.approx(1e-6, rel=1e-5)


def test_gaussian_mean_on_replace_one_loses_what_it_is_charged() -> None:
    acct = accountant("replace_one")
    out = release(dp_mean, acct, "x", lower=-2.0, upper=5.0, epsilon=1.0, delta=1e-6, mechanism="gaussian")
    sigma_sum, sigma_count = out.attrs["noise_std"]
    centre = 1.5

    def parts(frame: pd.DataFrame) -> np.ndarray:  # every person has at most M rows here: all are kept
        return np.array([float((frame["x"].clip(-2.0, 5.0) - centre).sum()), float(len(frame))])

    # the released pair (S, N) with independent noise: μ = ‖(ΔS/σ_S, ΔN/σ_N)‖ for the worst neighbours
    mu = max(
        float(np.linalg.norm((parts(x) - parts(y)) / np.array([sigma_sum, sigma_count])))
        for x, y in neighbours(-2.0, 5.0)
    )
    true_delta = gaussian_delta(mu, acct.spent("d").epsilon)
    assert true_delta <= acct.spent("d").delta * (1 + 1e-9)


def test_row_level_releases_are_refused_on_add_remove_before_any_charge() -> None:
    acct = accountant("add_remove")
    df = pd.DataFrame({"x": [1.0, 2.0], "yes": [True, False]})
    before = acct.history("d")
    with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
        df.pipe(add_noise, "x", epsilon=1.0, lower=0, upper=3, accountant=acct, dataset="d")
    with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
        df.pipe(randomized_response, "yes", epsilon=1.0, accountant=acct, dataset="d")
    pytest.importorskip("sklearn")
    from dp_pipeline.transformers import LaplaceNoise

    with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
        LaplaceNoise(epsilon=1.0, sensitivity=1.0, accountant=acct, dataset="d").fit_transform(df[["x"]])
    assert acct.history("d") == before


@st.composite
def two_people(draw: Any) -> tuple[int, float, float, list[tuple[int, float]], list[tuple[int, float]]]:
    """m, [l, u], and the rows (group, value) of an old and a new person, each at most m rows."""
    m = draw(st.integers(1, 4))
    low = draw(st.floats(-10.0, 10.0))
    high = draw(st.floats(-10.0, 10.0).filter(lambda x: x != low))
    low, high = min(low, high), max(low, high)
    row = st.tuples(st.integers(0, 2), st.one_of(st.sampled_from([low, high]), st.floats(low, high)))
    return m, low, high, draw(st.lists(row, max_size=m)), draw(st.lists(row, max_size=m))


def totals(rows: list[tuple[int, float]], grouped: bool) -> np.ndarray:
    out = np.zeros(3 if grouped else 1)
    for group, value in rows:
        out[group if grouped else 0] += value
    return out


@settings(max_examples=400, deadline=None)
@given(two_people(), st.booleans())
def test_no_person_changes_a_statistic_by_more_than_its_sensitivity(case: Any, grouped: bool) -> None:
    m, low, high, old, new = case
    change = totals(new, grouped) - totals(old, grouped)
    l1, l2 = _sensitivity("replace_one", grouped, m, low, high)
    assert np.abs(change).sum() <= l1 * (1 + 1e-12) and np.linalg.norm(change) <= l2 * (1 + 1e-12)
    added = totals(new, grouped)  # add/remove: the new person's rows appear
    l1, l2 = _sensitivity("add_remove", grouped, m, low, high)
    assert np.abs(added).sum() <= l1 * (1 + 1e-12) and np.linalg.norm(added) <= l2 * (1 + 1e-12)


def test_an_add_remove_aggregate_states_its_replace_one_sensitivity_and_converts_exactly() -> None:
    source, target = accountant("add_remove"), accountant("replace_one")
    out = release(dp_histogram, source, "key", categories=KEYS, epsilon=1.0, delta=1e-6, mechanism="gaussian")
    sigma = out.attrs["noise_std"][0]
    event = PrivacyEvent.from_dict(out.attrs["cost"])
    target.spend("d", event)  # the same release, read on a replace-one dataset
    mu = largest_change(dp_count, True, 2, 1.0, 1.0) / sigma  # √2·m/σ: tighter than group privacy's 2m/σ
    exact = gaussian_epsilon(mu, 1e-6)
    assert target.spent("d").epsilon >= exact
    assert target.spent("d").epsilon == pytest.approx(exact, rel=1e-6)
    assert target.spent("d").epsilon < gaussian_epsilon(2 * M / sigma, 1e-6)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.floats(-1e3, -1e-3), st.floats(1e-3, 1e3), st.booleans())
@example(1, -0.1, 0.7, False)  # 0.7 − (−0.1) rounds to a double below 0.8
def test_replace_one_width_is_never_rounded_down(m: int, low: float, high: float, grouped: bool) -> None:
    l1, l2 = _sensitivity("replace_one", grouped, m, low, high)
    exact = m * (Fraction(high) - Fraction(low))  # both persons' rows at opposite bounds, in one group
    assert Fraction(l1) >= exact and Fraction(l2) >= exact


@pytest.mark.parametrize("relation", ["replace_one", "add_remove"])
def test_mean_is_calibrated_to_the_centred_floats_it_sums(relation: str) -> None:
    low, high = -0.1, 0.7  # the float c − low exceeds the float (high − low)/2
    out = pd.DataFrame({"x": [low, high]}).pipe(
        dp_mean, "x", lower=low, upper=high, epsilon=1.0, accountant=accountant(relation), dataset="d"
    )
    centre = (low + high) / 2
    below, above = Fraction(low - centre), Fraction(high - centre)  # the extreme values of the sum
    assert max(-below, above) > Fraction((high - low) / 2)
    sum_part = PrivacyEvent.from_dict(out.attrs["cost"]).parts[0]
    assert sum_part.sensitivity is not None
    if relation == "add_remove":
        assert Fraction(sum_part.sensitivity) >= max(-below, above)
        replaced = sum_part.parameters["replace_one_sensitivity"]
        assert isinstance(replaced, float) and Fraction(replaced) >= above - below
    else:
        assert Fraction(sum_part.sensitivity) >= above - below


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e3, 1e3), st.floats(1e-9, 1e3), st.sampled_from(["replace_one", "add_remove"]))
@example(5.245601649158839, 5.266662182669946 - 5.245601649158839, "replace_one")  # c − low > (high − low)/2
@example(32.0, 0.00011665438341291367, "replace_one")  # (x − c)² a rounding tie
def test_variance_is_calibrated_to_the_centred_floats_and_squares_it_sums(
    low: float, width: float, relation: str
) -> None:
    """``dp_var`` sums the floats x − c and (x − c)² (c the float midpoint): the sensitivity of each part is
    at least its largest value over the clip range, computed here exactly from the floats at the bounds."""
    high = low + width
    if not high > low:
        return
    out = pd.DataFrame({"x": [low, high]}).pipe(
        dp_var, "x", lower=low, upper=high, epsilon=1.0, accountant=accountant(relation), dataset="d"
    )
    centre = (low + high) / 2
    extreme = max(abs(Fraction(low - centre)), abs(Fraction(high - centre)))  # the floats summed
    # the engines square by multiplication (numpy's square, Spark's y * y); libm's pow behind Python's
    # ** may round a tie the other way
    square = max(Fraction((v - centre) * (v - centre)) for v in (low, high))
    linear, quadratic, _ = PrivacyEvent.from_dict(out.attrs["cost"]).parts
    assert linear.sensitivity is not None and quadratic.sensitivity is not None
    factor = 2 if relation == "replace_one" else 1  # replace-one: one value leaves, another enters
    assert Fraction(linear.sensitivity) >= factor * extreme
    assert Fraction(quadratic.sensitivity) >= square
