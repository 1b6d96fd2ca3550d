"""The randomized-response encoders report the truth as often as documented, and handle bad answers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PrivacyLeakWarning, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.estimation import krr_counts, rr_share
from dp_pipeline.transformers import KRandomizedResponseEncoder, RandomizedResponseEncoder

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
N = 20_000


def test_binary_flip_rate_is_one_over_one_plus_e_to_epsilon_over_d() -> None:
    truth = np.random.default_rng(1000).random((N, 2)) < 0.3
    t = RandomizedResponseEncoder(epsilon=2.0, random_state=0, **OPT_OUT)
    reports = t.fit_transform(truth)
    assert reports.dtype == bool
    p_true = math.exp(1.0) / (1.0 + math.exp(1.0))  # ε/d = 1 per feature
    for j in range(2):
        kept = int((reports[:, j] == truth[:, j]).sum())
        assert stats.binomtest(kept, N, p_true).pvalue > 1e-3
    assert t.cost_.guarantee == PureDP(2.0)
    share = rr_share(reports[:, 0], t.mechanisms_[0])
    assert abs(share.value - truth[:, 0].mean()) <= 4 * share.std_error


def test_binary_keeps_integer_and_float_dtypes() -> None:
    for dtype in (np.int32, np.float64):
        data = np.array([[0, 1], [1, 1], [0, 0]], dtype=dtype)
        out = RandomizedResponseEncoder(**OPT_OUT).fit_transform(data)
        assert out.dtype == dtype and set(np.unique(out)) <= {0, 1}


def test_binary_refuses_other_values_and_missing_ones_naming_the_feature() -> None:
    df = pd.DataFrame({"smoker": [0, 1, 1], "drinks": [1, 2, 0]})
    t = RandomizedResponseEncoder(**OPT_OUT).fit(df)
    with pytest.raises(InvalidParameterError, match="'drinks': 1 value is not 0/1"):
        t.transform(df)
    with pytest.raises(InvalidParameterError, match="'smoker': 1 value is missing"):
        t.transform(pd.DataFrame({"smoker": [0.0, np.nan, 1.0], "drinks": [1, 0, 0]}))


def test_binary_unknown_values_become_a_fair_coin() -> None:
    data = np.full((N, 1), np.nan)
    out = RandomizedResponseEncoder(handle_unknown="uniform", random_state=1, **OPT_OUT).fit_transform(data)
    assert stats.binomtest(int(out.sum()), N, 0.5).pvalue > 1e-3


def test_krr_reports_the_truth_with_probability_p() -> None:
    categories = ["a", "b", "c", "d"]
    truth = np.random.default_rng(1002).choice(categories, size=(N, 1))
    t = KRandomizedResponseEncoder(epsilon=1.0, categories=categories, random_state=2, **OPT_OUT)
    reports = t.fit_transform(truth)
    p = math.exp(1.0) / (math.exp(1.0) + 3)
    assert stats.binomtest(int((reports == truth).sum()), N, p).pvalue > 1e-3
    estimate = krr_counts(reports[:, 0], t.mechanisms_[0])
    true_counts = np.array([(truth == c).sum() for c in categories])
    assert np.all(np.abs(estimate.value - true_counts) <= 4 * estimate.std_error)  # |z| ≤ 4 for all four


def test_krr_categories_per_feature_and_output_dtype() -> None:
    data = pd.DataFrame({"colour": ["red", "blue"], "size": [1, 3]})
    t = KRandomizedResponseEncoder(categories=[["red", "blue"], [1, 2, 3]], **OPT_OUT).fit(data)
    assert t.categories_ == [("red", "blue"), (1, 2, 3)]
    out = t.transform(data)
    assert out.dtype == object and set(out[:, 0]) <= {"red", "blue"} and set(out[:, 1]) <= {1, 2, 3}
    single = KRandomizedResponseEncoder(categories=["x", "y"], **OPT_OUT).fit_transform(
        np.array([["x"], ["y"]])
    )
    assert single.dtype.kind == "U"


def test_krr_unseen_category_is_an_error_naming_the_feature_before_any_charge() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    data = pd.DataFrame({"blood": ["A", "B", "AB"]})
    t = KRandomizedResponseEncoder(categories=["A", "B", "O"], accountant=acct, dataset="d").fit(data)
    with pytest.raises(
        InvalidParameterError, match="'blood': 1 value is not a declared category"
    ):
        t.transform(data)
    with pytest.raises(InvalidParameterError, match="'blood': 1 value is missing"):
        t.transform(pd.DataFrame({"blood": ["A", None, "O"]}))
    assert [r.kind for r in ledger_entries(acct.store, "d")] == ["budget"]


def test_krr_unseen_categories_can_be_reported_uniformly() -> None:
    t = KRandomizedResponseEncoder(
        categories=["A", "B", "O"], handle_unknown="uniform", random_state=0, **OPT_OUT
    )
    out = t.fit_transform(np.array([["AB"]] * 3000 + [[None]] * 3000, dtype=object))
    counts = [(out == c).sum() for c in ["A", "B", "O"]]
    assert stats.chisquare(counts).pvalue > 1e-3


def test_krr_categories_must_be_declared_or_learned_with_a_warning() -> None:
    data = np.array([["x"], ["y"], ["x"]])
    with pytest.raises(InvalidParameterError) as info:
        KRandomizedResponseEncoder(**OPT_OUT).fit(data)
    assert info.value.parameter == "categories"
    with pytest.warns(PrivacyLeakWarning, match="categories='data'"):
        t = KRandomizedResponseEncoder(categories="data", **OPT_OUT).fit(data)
    assert t.categories_ == [("x", "y")]
