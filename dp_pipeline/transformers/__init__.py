"""scikit-learn transformers that release data with differential privacy, charging a ledger on every release.

Each transformer wraps one mechanism. ``fit`` checks the declared bounds, sensitivity and categories and
calibrates the noise; every ``transform`` is a release, charged to the configured accountant and dataset
before the noisy output is returned. Needs the ``sklearn`` extra: ``pip install "dp-pipeline[sklearn]"``.
"""

try:
    import sklearn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        'dp_pipeline.transformers needs scikit-learn: pip install "dp-pipeline[sklearn]"'
    ) from exc

from dp_pipeline.accounting import UNACCOUNTED
from dp_pipeline.transformers._bounded import BoundedLaplaceNoise, BoundedStaircaseNoise
from dp_pipeline.transformers._composite import AllOrNothing, reserve_search, search_cost
from dp_pipeline.transformers._noise import GaussianNoise, LaplaceNoise, StaircaseNoise
from dp_pipeline.transformers._randomized_response import (
    KRandomizedResponseEncoder,
    RandomizedResponseEncoder,
)

__all__ = [
    "UNACCOUNTED",
    "AllOrNothing",
    "BoundedLaplaceNoise",
    "BoundedStaircaseNoise",
    "GaussianNoise",
    "KRandomizedResponseEncoder",
    "LaplaceNoise",
    "RandomizedResponseEncoder",
    "StaircaseNoise",
    "reserve_search",
    "search_cost",
]
