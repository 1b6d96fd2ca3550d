"""Errors about data never quote a data value: not in str(exc), repr(exc), nor in the exception chain.

Every mechanism, estimator, transformer and pandas function is fed a private sentinel value it must refuse;
the refusal names the column or parameter, the count and the kind of problem, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError
from dp_pipeline.estimation import krr_counts, ldp_mean, rr_count, rr_share
from dp_pipeline.frames import (
    add_noise,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_sum,
    krr_frequencies,
    randomized_response,
)
from dp_pipeline.frames import rr_share as frame_rr_share
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    KRandomizedResponseEncoder,
    LaplaceNoise,
    RandomizedResponseEncoder,
    StaircaseNoise,
)

NAME = "PATIENT-SECRET-NAME"
NUMBER = 987654.321
SECRETS = (NAME, "987654.321", "987654", "9.87654", "9.876543")
OFF: dict[str, Any] = {"accountant": "unaccounted"}

BINARY = BinaryRandomizedResponse(epsilon=1.0)
KRR = KRandomizedResponse(epsilon=1.0, categories=["a", "b", "c"])
KRR_NUMBERS = KRandomizedResponse(epsilon=1.0, categories=[1.0, 2.0, 3.0])
BOUNDED = [
    BoundedLaplace(epsilon=1.0, lower=0.0, upper=1.0),
    BoundedStaircase(epsilon=1.0, lower=0.0, upper=1.0, gamma=0.3),
]
CONTINUOUS = [
    Laplace(epsilon=1.0, sensitivity=1.0),
    Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0),
    Staircase(epsilon=1.0, sensitivity=1.0),
    *BOUNDED,
]
NAMES_ARRAY = np.array([["a", NAME]], dtype=object)
NUMBERS_ARRAY = np.array([[0.5], [NUMBER]])


def _unhashable_column() -> np.ndarray[Any, Any]:
    column = np.empty((2, 1), dtype=object)
    column[0, 0], column[1, 0] = [NAME], "a"
    return column


def _frame(values: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"answer": values, "ward": ["a"] * len(values), "person": range(len(values))})


MECHANISM_CALLS: list[tuple[str, Callable[[], Any]]] = [
    *[(f"{type(m).__name__}.randomize(name)", lambda m=m: m.randomize([1.0, NAME])) for m in CONTINUOUS],
    *[(f"{type(m).__name__}.randomize(str)", lambda m=m: m.randomize(NAME)) for m in CONTINUOUS],
    *[
        (f"{type(m).__name__}.randomize(out of range)", lambda m=m: m.randomize([0.5, NUMBER]))
        for m in BOUNDED
    ],
    *[
        (f"{type(m).__name__}.randomize(scalar out of range)", lambda m=m: m.randomize(NUMBER))
        for m in BOUNDED
    ],
    ("BinaryRandomizedResponse.randomize(number)", lambda: BINARY.randomize([0, 1, NUMBER])),
    ("BinaryRandomizedResponse.randomize(name)", lambda: BINARY.randomize([0, NAME])),
    ("BinaryRandomizedResponse.pmf(number)", lambda: BINARY.pmf([NUMBER], [1])),
    ("KRandomizedResponse.randomize(name)", lambda: KRR.randomize(["a", NAME])),
    ("KRandomizedResponse.randomize(array)", lambda: KRR.randomize(np.array(["a", NAME]))),
    ("KRandomizedResponse.randomize(scalar)", lambda: KRR.randomize(NAME)),
    ("KRandomizedResponse.randomize(number)", lambda: KRR_NUMBERS.randomize([1.0, NUMBER])),
    ("KRandomizedResponse.pmf(name)", lambda: KRR.pmf([NAME], ["a"])),
    ("KRandomizedResponse.tally(name)", lambda: KRR.tally(["a", NAME])),
    ("KRandomizedResponse.tally(number)", lambda: KRR_NUMBERS.tally(np.array([1.0, NUMBER]))),
    ("KRandomizedResponse.estimate_counts(name)", lambda: KRR.estimate_counts([NAME])),
]

ESTIMATION_CALLS: list[tuple[str, Callable[[], Any]]] = [
    ("rr_share(number)", lambda: rr_share([0, 1, NUMBER], BINARY)),
    ("rr_share(name)", lambda: rr_share([0, NAME], BINARY)),
    ("rr_count(number)", lambda: rr_count([1, NUMBER], BINARY)),
    ("krr_counts(name)", lambda: krr_counts(["a", NAME], KRR)),
    ("ldp_mean(out of range)", lambda: ldp_mean([0.5, NUMBER], BOUNDED[0])),
    ("ldp_mean(name)", lambda: ldp_mean([0.5, NAME], BOUNDED[1])),
]

TRANSFORMER_CALLS: list[tuple[str, Callable[[], Any]]] = [
    *[
        (f"{cls.__name__}.fit(names)", lambda cls=cls, kw=kw: cls(**kw, **OFF).fit(NAMES_ARRAY))
        for cls, kw in [
            (LaplaceNoise, {"sensitivity": 1.0}),
            (GaussianNoise, {"sensitivity": 1.0, "delta": 1e-6}),
            (StaircaseNoise, {"sensitivity": 1.0}),
            (BoundedLaplaceNoise, {"lower": 0.0, "upper": 1.0}),
            (BoundedStaircaseNoise, {"lower": 0.0, "upper": 1.0}),
        ]
    ],
    *[
        (
            f"{cls.__name__}.transform(names)",
            lambda cls=cls: cls(lower=0.0, upper=1.0, **OFF).fit([[0.5]]).transform(NAMES_ARRAY[:, 1:]),
        )
        for cls in (BoundedLaplaceNoise, BoundedStaircaseNoise)
    ],
    (
        "RandomizedResponseEncoder.transform(number)",
        lambda: RandomizedResponseEncoder(**OFF).fit([[0]]).transform(NUMBERS_ARRAY),
    ),
    (
        "RandomizedResponseEncoder.transform(name)",
        lambda: RandomizedResponseEncoder(**OFF).fit([[0]]).transform([[NAME]]),
    ),
    (
        "KRandomizedResponseEncoder.transform(name)",
        lambda: (
            KRandomizedResponseEncoder(categories=["a", "b"], **OFF).fit([["a"]]).transform([["a"], [NAME]])
        ),
    ),
    (
        "KRandomizedResponseEncoder(categories='data').transform(name)",
        lambda: KRandomizedResponseEncoder(categories="data", **OFF).fit([[NAME], ["a"]]).transform([["b"]]),
    ),
    (
        "KRandomizedResponseEncoder(categories='data').fit(one category)",
        lambda: KRandomizedResponseEncoder(categories="data", **OFF).fit([[NAME], [NAME]]),
    ),
    (
        "KRandomizedResponseEncoder(categories='data').fit(unhashable)",
        lambda: KRandomizedResponseEncoder(categories="data", **OFF).fit(_unhashable_column()),
    ),
    (
        "KRandomizedResponseEncoder.transform(number)",
        lambda: (
            KRandomizedResponseEncoder(categories=[0.5, 1.0], **OFF).fit([[0.5]]).transform(NUMBERS_ARRAY)
        ),
    ),
]

FRAME_CALLS: list[tuple[str, Callable[[], Any]]] = [
    (
        "add_noise(names)",
        lambda: add_noise(_frame([1.0, NAME]), "answer", sensitivity=1.0, epsilon=1.0, **OFF),
    ),
    (
        "randomized_response(number)",
        lambda: randomized_response(_frame([0, NUMBER]), "answer", epsilon=1.0, **OFF),
    ),
    (
        "randomized_response(name)",
        lambda: randomized_response(_frame([True, NAME]), "answer", epsilon=1.0, **OFF),
    ),
    (
        "randomized_response(categories='data', one category)",
        lambda: randomized_response(_frame([NAME, NAME]), "answer", categories="data", epsilon=1.0, **OFF),
    ),
    (
        "randomized_response(categories='data', unhashable)",
        lambda: randomized_response(_frame([[NAME], "a"]), "answer", categories="data", epsilon=1.0, **OFF),
    ),
    (
        "randomized_response(categories)",
        lambda: randomized_response(_frame(["a", NAME]), "answer", categories=["a", "b"], epsilon=1.0, **OFF),
    ),
    ("dp_sum(names)", lambda: dp_sum(_frame([1.0, NAME]), "answer", lower=0, upper=1, epsilon=1.0, **OFF)),
    ("dp_mean(names)", lambda: dp_mean(_frame([1.0, NAME]), "answer", lower=0, upper=1, epsilon=1.0, **OFF)),
    (
        "dp_histogram(names)",
        lambda: dp_histogram(_frame([["a"], NAME]), "answer", categories=["a"], epsilon=1.0, **OFF),
    ),
    (
        "dp_count(unhashable by)",
        lambda: dp_count(_frame([["a"], [NAME]]), by="answer", keys=["a"], epsilon=1.0, **OFF),
    ),
    ("frames.rr_share(number)", lambda: frame_rr_share(_frame([0, 1, NUMBER]), "answer", epsilon=1.0)),
    ("frames.rr_share(name)", lambda: frame_rr_share(_frame([True, NAME]), "answer", epsilon=1.0)),
    (
        "krr_frequencies(name)",
        lambda: krr_frequencies(_frame(["a", NAME]), "answer", categories=["a", "b"], epsilon=1.0),
    ),
]


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _assert_no_secret(exc: BaseException) -> None:
    for link in _chain(exc):
        for text in (str(link), repr(link), *map(repr, link.args)):
            for secret in SECRETS:
                assert secret not in text, f"{type(link).__name__} quotes the data: {text}"


@pytest.mark.parametrize(
    "call",
    [call for _, call in MECHANISM_CALLS + ESTIMATION_CALLS + TRANSFORMER_CALLS + FRAME_CALLS],
    ids=[name for name, _ in MECHANISM_CALLS + ESTIMATION_CALLS + TRANSFORMER_CALLS + FRAME_CALLS],
)
@pytest.mark.filterwarnings("ignore::dp_pipeline.exceptions.PrivacyLeakWarning")
def test_refusals_of_data_quote_no_value(call: Callable[[], Any]) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()
    _assert_no_secret(info.value)


def test_refusal_counts_the_bad_values_and_names_the_column() -> None:
    with pytest.raises(InvalidParameterError) as info:
        randomized_response(
            _frame(["a", NAME, NAME, "b"]), "answer", categories=["a", "b"], epsilon=1.0, **OFF
        )
    assert "'answer'" in str(info.value)
    assert "2 values" in str(info.value)
    with pytest.raises(InvalidParameterError) as info:
        BOUNDED[0].randomize([0.5, NUMBER, -NUMBER, 2.0])
    assert "3 values" in str(info.value)
