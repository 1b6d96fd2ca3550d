"""Shared behaviour of all mechanisms: validation, the privacy event, and the randomize entry point."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dp_pipeline._validation import ValidatedModel, check_array
from dp_pipeline.events import EventKind, PrivacyEvent
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import _sampling

__all__ = ["ContinuousMechanism", "Mechanism"]


class Mechanism(ValidatedModel, ABC):
    """A randomised release with a known privacy cost.

    The cost depends only on the constructor parameters, so it is known before any data is touched:
    ``guarantee`` and ``event`` never look at data.
    """

    event_kind: ClassVar[EventKind]

    @property
    @abstractmethod
    def guarantee(self) -> Guarantee:
        """The privacy guarantee one release gives to one individual."""

    @property
    def event(self) -> PrivacyEvent:
        """The release described as a :class:`~dp_pipeline.events.PrivacyEvent`."""
        return PrivacyEvent(
            kind=self.event_kind,
            guarantee=self.guarantee,
            sensitivity=self._event_sensitivity(),
            parameters=self._event_parameters(),
        )

    def _event_sensitivity(self) -> float | None:
        return getattr(self, "sensitivity", None)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {}

    @abstractmethod
    def randomize(self, values: Any, rng: _sampling.RNGLike = None) -> Any:
        """Randomise ``values`` (vectorised; the output has the input's shape)."""


class ContinuousMechanism(Mechanism):
    """A mechanism that releases real numbers with an exact output density ``pdf(y, t)``."""

    @abstractmethod
    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """Density of the output at ``y`` for the true value ``t`` (broadcast)."""

    @abstractmethod
    def _randomize(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """Randomise validated finite float values."""

    def randomize(self, values: Any, rng: _sampling.RNGLike = None) -> Any:
        """Release ``values`` with noise; arrays keep their shape, a scalar gives a float."""
        array = check_array(values)
        out = self._randomize(array, _sampling.make_rng(rng))
        return float(out) if np.ndim(values) == 0 else out
