"""Estimates from randomised reports agree with dp_pipeline.estimation and cover the truth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import InvalidParameterError
from dp_pipeline.estimation import krr_counts
from dp_pipeline.estimation import rr_share as rr_share_array
from dp_pipeline.frames import krr_frequencies, randomized_response, rr_share
from dp_pipeline.mechanisms import BinaryRandomizedResponse, KRandomizedResponse

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}


def test_rr_share_is_the_estimation_modules_and_covers_the_truth() -> None:
    truth = pd.DataFrame({"yes": np.random.default_rng(1000).random(5000) < 0.35})
    hits = 0
    for seed in range(100):
        reports = truth.pipe(randomized_response, "yes", epsilon=1.0, random_state=seed, **OPT_OUT)
        estimate = reports.pipe(rr_share, "yes", epsilon=1.0)
        hits += estimate["ci_low"] <= truth["yes"].mean() <= estimate["ci_high"]
    reference = rr_share_array(reports["yes"].to_numpy(), BinaryRandomizedResponse(epsilon=1.0))
    assert estimate["value"] == pytest.approx(reference.value)
    assert estimate["std_error"] == pytest.approx(reference.std_error)
    assert estimate.attrs["n"] == 5000
    assert stats.binomtest(hits, 100, 0.95).pvalue > 1e-3


def test_krr_frequencies_counts_and_shares() -> None:
    categories = ["bus", "car", "bike"]
    truth = pd.DataFrame({"mode": np.random.default_rng(1001).choice(categories, 6000, p=[0.2, 0.5, 0.3])})
    reports = truth.pipe(
        randomized_response, "mode", categories=categories, epsilon=2.0, random_state=1, **OPT_OUT
    )
    counts = reports.pipe(krr_frequencies, "mode", epsilon=2.0, categories=categories)
    reference = krr_counts(
        reports["mode"].to_numpy(), KRandomizedResponse(epsilon=2.0, categories=categories)
    )
    assert list(counts.index) == categories
    assert counts["value"].to_numpy() == pytest.approx(reference.value)
    true_counts = truth["mode"].value_counts().reindex(categories).to_numpy()
    assert (np.abs(counts["value"] - true_counts) <= 4 * counts["std_error"]).all()  # |z| ≤ 4 for all three
    shares = reports.pipe(krr_frequencies, "mode", epsilon=2.0, categories=categories, normalize=True)
    assert shares["value"].to_numpy() == pytest.approx(counts["value"].to_numpy() / 6000)
    assert shares["value"].sum() == pytest.approx(1.0)


def test_reports_outside_the_categories_are_an_error() -> None:
    reports = pd.DataFrame({"mode": ["bus", "tram"]})
    with pytest.raises(InvalidParameterError, match="column 'mode'"):
        reports.pipe(krr_frequencies, "mode", epsilon=1.0, categories=["bus", "car"])
    with pytest.raises(InvalidParameterError, match="column 'mode'"):
        reports.pipe(rr_share, "mode", epsilon=1.0)


def test_randomized_response_records_epsilon_and_rr_share_reads_it() -> None:
    """A wrong ε gives a silently biased share (0.392 for 0.322 in the reported case), so the ε recorded
    in attrs is used by default and a different one is refused."""
    truth = pd.DataFrame({"yes": np.random.default_rng(7).random(3000) < 0.3, "id": np.arange(3000)})
    reports = truth.pipe(randomized_response, "yes", epsilon=1.0, random_state=3, **OPT_OUT)
    assert reports.attrs["randomized_response"] == {"yes": {"epsilon": 1.0}}
    assert truth.attrs == {}  # the input is left as it was
    recorded = reports.pipe(rr_share, "yes")
    explicit = rr_share_array(reports["yes"].to_numpy(), BinaryRandomizedResponse(epsilon=1.0))
    assert recorded["value"] == pytest.approx(explicit.value)
    assert reports.pipe(rr_share, "yes", epsilon=1.0)["value"] == recorded["value"]
    with pytest.raises(InvalidParameterError, match=r"randomised with epsilon = 1\.0") as info:
        reports.pipe(rr_share, "yes", epsilon=1.5)
    assert info.value.parameter == "epsilon"
    assert reports[["yes"]].pipe(rr_share, "yes")["value"] == recorded["value"]  # attrs survive selection
    with pytest.raises(InvalidParameterError, match="carries no recorded epsilon"):
        pd.DataFrame({"yes": reports["yes"].to_numpy()}).pipe(rr_share, "yes")


def test_krr_frequencies_reads_the_recorded_epsilon_and_categories() -> None:
    categories = ["bus", "car", "bike"]
    truth = pd.DataFrame({"mode": np.random.default_rng(8).choice(categories, 2000)})
    reports = truth.pipe(
        randomized_response, "mode", categories=categories, epsilon=2.0, random_state=1, **OPT_OUT
    )
    counts = reports.pipe(krr_frequencies, "mode")
    reference = krr_counts(
        reports["mode"].to_numpy(), KRandomizedResponse(epsilon=2.0, categories=categories)
    )
    assert list(counts.index) == categories and counts["value"].to_numpy() == pytest.approx(reference.value)
    with pytest.raises(InvalidParameterError, match="'categories' do not match"):
        reports.pipe(krr_frequencies, "mode", categories=["bus", "car"])
    with pytest.raises(InvalidParameterError, match=r"epsilon = 2\.0"):
        reports.pipe(krr_frequencies, "mode", epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="krr_frequencies"):
        reports.pipe(rr_share, "mode")
