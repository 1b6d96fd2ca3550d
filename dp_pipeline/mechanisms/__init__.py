"""Noise mechanisms. Each one is vectorised, describes its release as a PrivacyEvent and never imports
the accounting."""

from dp_pipeline.mechanisms._base import ContinuousMechanism, Mechanism
from dp_pipeline.mechanisms.bounded import BoundedLaplace, BoundedStaircase
from dp_pipeline.mechanisms.composite import Composite
from dp_pipeline.mechanisms.exponential import Exponential
from dp_pipeline.mechanisms.gaussian import Gaussian
from dp_pipeline.mechanisms.laplace import Laplace
from dp_pipeline.mechanisms.randomized_response import BinaryRandomizedResponse, KRandomizedResponse
from dp_pipeline.mechanisms.sampling import FastGenerator, fast_rng, secure_rng
from dp_pipeline.mechanisms.staircase import Staircase, staircase_cdf, staircase_pdf

__all__ = [
    "BinaryRandomizedResponse",
    "BoundedLaplace",
    "BoundedStaircase",
    "Composite",
    "ContinuousMechanism",
    "Exponential",
    "FastGenerator",
    "Gaussian",
    "KRandomizedResponse",
    "Laplace",
    "Mechanism",
    "Staircase",
    "fast_rng",
    "secure_rng",
    "staircase_cdf",
    "staircase_pdf",
]
