"""PrivacyEvent: what a release did, as immutable plain data.

Events are facts; accountants do arithmetic. A mechanism describes its release as an event (its kind, its
noise parameters, its sensitivity and the guarantee it gives), so that spent budget can be recomputed later
under a tighter composition method or another group size. Events are stored as JSON through a fixed kind
table, never through import paths read from storage.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field, SerializeAsAny, field_serializer, field_validator

from dp_pipeline._validation import FiniteFloat, ValidatedModel
from dp_pipeline.guarantees import Guarantee, guarantee_from_dict

__all__ = ["EVENT_KINDS", "EventKind", "PrivacyEvent"]

EventKind = Literal[
    "laplace",
    "gaussian",
    "randomized_response",
    "staircase",
    "bounded_laplace",
    "bounded_staircase",
    "guarantee",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)


class PrivacyEvent(ValidatedModel):
    """An immutable description of one release.

    Parameters
    ----------
    kind : str
        One of :data:`EVENT_KINDS`. ``"guarantee"`` is a release known only by its guarantee.
    guarantee : Guarantee
        The guarantee the release gives to one individual (group size 1).
    sensitivity : float or None
        The sensitivity the noise was calibrated to (L1 for Laplace, L2 for Gaussian), if any.
    parameters : dict
        The noise parameters needed to recompute the privacy loss exactly: ``scale`` (Laplace), ``sigma``
        (Gaussian), ``probabilities`` of a report given the truth for randomized response
        (``p_true`` and ``p_other`` with ``categories``).
    """

    kind: EventKind
    guarantee: SerializeAsAny[Guarantee]
    sensitivity: FiniteFloat | None = Field(default=None, gt=0.0)
    parameters: dict[str, float | int | str] = Field(default_factory=dict)

    @field_validator("guarantee", mode="before")
    @classmethod
    def _load_guarantee(cls, value: Any) -> Any:
        return guarantee_from_dict(value) if isinstance(value, dict) else value

    @field_serializer("guarantee")
    def _dump_guarantee(self, value: Guarantee) -> dict[str, Any]:
        return value.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyEvent:
        """Rebuild an event from :meth:`to_dict` output."""
        return cls(**data)
