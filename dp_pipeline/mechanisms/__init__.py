"""Noise mechanisms. Each one is vectorised, describes its release as a PrivacyEvent and never imports
the accounting.

A charge covers one draw: a mechanism's ``event`` is the cost of one call of ``randomize`` (or
``select``), and every further call is a release of its own. ``mechanism.one_shot()`` gives a view that
draws once (:class:`OneShot`), the form handed to code whose draw was paid for.
"""

from dp_pipeline.mechanisms._base import ContinuousMechanism, Mechanism, OneShot
from dp_pipeline.mechanisms._bounded import BoundedLaplace, BoundedStaircase
from dp_pipeline.mechanisms._composite import Composite
from dp_pipeline.mechanisms._exponential import Exponential
from dp_pipeline.mechanisms._gaussian import Gaussian
from dp_pipeline.mechanisms._laplace import Laplace
from dp_pipeline.mechanisms._randomized_response import BinaryRandomizedResponse, KRandomizedResponse
from dp_pipeline.mechanisms._staircase import Staircase, staircase_cdf, staircase_pdf
from dp_pipeline.mechanisms.sampling import FastGenerator, fast_rng, secure_rng

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
    "OneShot",
    "Staircase",
    "fast_rng",
    "secure_rng",
    "staircase_cdf",
    "staircase_pdf",
]
