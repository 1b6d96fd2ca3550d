"""Differentially private functions for ``DataFrame.pipe``: noisy columns, randomized response, aggregates.

Every function that reads private data is one release and charges the accountant exactly once per call,
before its noisy result exists; the estimators from randomised reports are post-processing and charge
nothing. The functions that read private data also take a Spark DataFrame (see :mod:`dp_pipeline.spark`):
the privacy core is shared, only the exact bounded aggregate is computed per engine
(:mod:`dp_pipeline.frames._engine`). pandas is imported when a function is called:
``import dp_pipeline.frames`` works without it, and a call without it raises ImportError naming
``pip install "dp-pipeline[pandas]"``.
"""

from dp_pipeline.frames._aggregates import dp_count, dp_histogram, dp_mean, dp_sum
from dp_pipeline.frames._estimates import krr_frequencies, rr_share
from dp_pipeline.frames._noise import add_noise, randomized_response
from dp_pipeline.frames._quantiles import dp_median, dp_quantile, dp_quantiles
from dp_pipeline.frames._spread import dp_std, dp_var

__all__ = [
    "add_noise",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_median",
    "dp_quantile",
    "dp_quantiles",
    "dp_std",
    "dp_sum",
    "dp_var",
    "krr_frequencies",
    "randomized_response",
    "rr_share",
]
