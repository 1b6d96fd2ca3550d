"""dp-pipeline: keep data pipelines inside a differential-privacy budget."""

from dp_pipeline._allocation import AllocatedRelease, Allocation, PlannedRelease, allocate
from dp_pipeline.accounting import PrivacyAccountant
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    PrivacyLeakWarning,
    UnsupportedCompositionError,
)
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

__all__ = [
    "AllocatedRelease",
    "Allocation",
    "ApproxDP",
    "BudgetExceededError",
    "GaussianDP",
    "Guarantee",
    "InvalidParameterError",
    "KeyAlreadyUsedError",
    "LedgerError",
    "PlannedRelease",
    "PrivacyAccountant",
    "PrivacyEvent",
    "PrivacyLeakWarning",
    "PureDP",
    "UnsupportedCompositionError",
    "allocate",
]
__version__ = "0.1.0"
