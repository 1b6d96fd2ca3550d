"""Noise mechanisms. Each one is vectorised, describes its release as a PrivacyEvent and never imports
the accounting."""

from dp_pipeline.mechanisms._base import ContinuousMechanism, Mechanism
from dp_pipeline.mechanisms.laplace import Laplace

__all__ = ["ContinuousMechanism", "Laplace", "Mechanism"]
