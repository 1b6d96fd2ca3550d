"""The frame functions on Spark DataFrames: the same functions, parameters and results as the pandas layer.

``sdf.transform(dp_mean, "age", lower=0, upper=120, by="region", keys=REGIONS, epsilon=0.5,
accountant=acct, dataset="patients")`` (``DataFrame.transform`` is Spark's ``.pipe``). The functions are
those of :mod:`dp_pipeline.frames`, which take a pandas or a Spark DataFrame: the privacy core (arguments,
sensitivity, noise plan, charge, result table) is one, and only the exact bounded aggregate is computed
per engine (:mod:`dp_pipeline.spark._engine`, found by the frames through the entry-point group
``dp_pipeline.frame_engines``, and registered when this package is imported):

* the aggregates (``dp_count``, ``dp_sum``, ``dp_mean``, ``dp_histogram``, ``dp_var``, ``dp_std``,
  ``dp_quantile``, ``dp_quantiles``, ``dp_median``) run one Spark job that clips, keeps a uniform random
  sample of at most ``max_contributions`` rows per person (a window over the person column), and sums per
  declared key; only one row per key reaches the driver, which charges the ledger once and adds the noise
  with the secure sampler. The result is the pandas function's table (value, standard error, interval)
  as a small Spark DataFrame, so that ``transform`` accepts it: ``.toPandas()`` brings it to the driver,
  ``.attrs`` holds the pandas result's attrs;
* ``add_noise`` and ``randomized_response`` return a Spark DataFrame whose rows were randomised by the
  executors, each partition from its own secure generator keyed from OS entropy.

The functions take a classic DataFrame or a Spark Connect one (``SparkSession.builder.remote(...)``;
:mod:`dp_pipeline.spark._api` builds each column with the DataFrame's own API). What can fail without
reading the data fails before the charge: the schema checks, the plan of a per-row release (analysed
before the charge), and the result's schema (the keys in their column's types; a declared key that no
value of its column's Spark type equals is refused). After the charge a function only reads the rows and
adds the noise.

Needs the ``spark`` extra: ``pip install "dp-pipeline[spark]"`` (and ``pyspark[connect]`` for Spark
Connect).
"""

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('dp_pipeline.spark needs PySpark: pip install "dp-pipeline[spark]"') from exc

from dp_pipeline.frames import (
    add_noise,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_median,
    dp_quantile,
    dp_quantiles,
    dp_std,
    dp_sum,
    dp_var,
    randomized_response,
)
from dp_pipeline.spark import _engine  # noqa: F401  (registers the Spark engine with the frames)

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
    "randomized_response",
]
