"""PrivacyEvent: what a release did, as immutable plain data.

Events are facts; accountants do arithmetic. A mechanism describes its release as an event (its kind, its
noise parameters, its sensitivity and the guarantee it gives), so that spent budget can be recomputed later
under a tighter composition method or another group size. Events are stored as JSON through a fixed kind
table, never through import paths read from storage.

Every event states the neighbouring relation its noise was calibrated for (:data:`Relation`): one person's
rows added or removed (``"add_remove"``), or one person's rows replaced by another's (``"replace_one"``).
``None`` means "whatever relation the dataset declares": a mechanism built by hand, whose sensitivity its
user vouches for. A release of several parts (the columns of a transformer) is one ``"composite"`` event
whose ``parts`` are the per-part events, so that tight composition sees each part.

An event may also say how its noise was drawn (:data:`Sampler`): ``"fast"`` marks a release whose noise
came from the fast path (:func:`~dp_pipeline.mechanisms.fast_rng`), whose floating-point samplers are not
floating-point safe, so the ledger cannot vouch for its ε. The marker is a fact about the release, never
part of its price.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from pydantic import Field, SerializeAsAny, field_serializer, field_validator, model_validator

from dp_pipeline._validation import FiniteFloat, ValidatedModel, check_sequence
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import (
    ApproxDP,
    GaussianDP,
    Guarantee,
    PureDP,
    compose_basic,
    compose_gdp,
    guarantee_from_dict,
)

__all__ = [
    "DEFAULT_RELATION",
    "EVENT_KINDS",
    "RELATIONS",
    "SAMPLERS",
    "EventKind",
    "PrivacyEvent",
    "Relation",
    "Sampler",
    "check_events",
    "composite_event",
    "flatten_events",
    "sampler_of",
]

Relation = Literal["add_remove", "replace_one"]
RELATIONS: tuple[str, ...] = get_args(Relation)
DEFAULT_RELATION: Relation = "replace_one"
"""A dataset's relation unless declared: every row-level release is DP under it, and aggregates calibrate to
it (see the README, "What the library guarantees")."""

EventKind = Literal[
    "laplace",
    "gaussian",
    "randomized_response",
    "staircase",
    "bounded_laplace",
    "bounded_staircase",
    "exponential",
    "guarantee",
    "composite",
]
EVENT_KINDS: tuple[str, ...] = get_args(EventKind)

Sampler = Literal["fast"]
SAMPLERS: tuple[str, ...] = get_args(Sampler)
"""The markers of how a release's noise was drawn that the ledger records. ``"fast"``: drawn from a
:func:`~dp_pipeline.mechanisms.fast_rng` generator, i.e. by the fast path's textbook floating-point samplers
(numpy's ``laplace``, ``normal``, inversion with ``log``) over PCG64, whose stream is predictable from its
output. Those samplers are **not floating-point safe**: the set of floats they can output depends on the
input, so an output can rule an input out, an unbounded privacy loss (Mironov 2012) that no ε covers. The
ε charged is that of the ideal real-valued mechanism, not a bound on what the floats reveal. An event
without a marker
(None) had its noise drawn by the secure path, or by code the library does not see (a mechanism built and
spent by hand, the mechanism handed to an Airflow task), or was recorded before the marker existed."""


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
        (``p_true`` and ``p_other`` with ``categories``). An ``"add_remove"`` Laplace or Gaussian event may
        give ``replace_one_sensitivity`` (L1, resp. L2, under replace-one) so that it converts exactly.
    relation : {"add_remove", "replace_one"} or None
        The neighbouring relation the release was calibrated for; None: the relation of the dataset it is
        charged to.
    parts : tuple of PrivacyEvent
        Only for ``kind="composite"``: the events the release is made of (not composite themselves, with the
        composite's relation); its ``guarantee`` is their basic composition.
    sampler : {"fast"} or None
        ``"fast"`` when the library drew the release's noise with the fast path (see :data:`Sampler`): its
        guarantee holds for the ideal real-valued mechanism only, not for the floats released. Recorded
        for the reader of the ledger; it changes no price (every charge depends on :meth:`priced`).
    """

    kind: EventKind
    guarantee: SerializeAsAny[Guarantee]
    sensitivity: FiniteFloat | None = Field(default=None, gt=0.0)
    parameters: dict[str, float | int | str] = Field(default_factory=dict)
    relation: Relation | None = None
    parts: tuple[PrivacyEvent, ...] = ()
    sampler: Sampler | None = None

    @model_validator(mode="after")
    def _check_parts(self) -> PrivacyEvent:
        if self.kind != "composite":
            if self.parts:
                raise ValueError(f"only a composite event has parts, not a {self.kind!r} event")
            return self
        if not self.parts:
            raise ValueError("a composite event needs at least one part")
        for part in self.parts:
            if part.kind == "composite":
                raise ValueError("the parts of a composite event cannot be composite")
            if part.relation != self.relation:
                raise ValueError(
                    f"every part of a composite event states its relation {self.relation!r}, got "
                    f"{part.relation!r}"
                )
        return self

    @field_validator("guarantee", mode="before")
    @classmethod
    def _load_guarantee(cls, value: Any) -> Any:
        return guarantee_from_dict(value) if isinstance(value, dict) else value

    @field_serializer("guarantee")
    def _dump_guarantee(self, value: Guarantee) -> dict[str, Any]:
        return value.to_dict()

    def under(self, relation: Relation | None) -> PrivacyEvent:
        """This event (and its parts) stating ``relation``."""
        return self.model_copy(
            update={"relation": relation, "parts": tuple(p.under(relation) for p in self.parts)}
        )

    def drawn_by(self, sampler: Sampler | None) -> PrivacyEvent:
        """This event (and its parts) marked as drawn by ``sampler`` (None: no marker)."""
        return self.model_copy(
            update={"sampler": sampler, "parts": tuple(p.drawn_by(sampler) for p in self.parts)}
        )

    def priced(self) -> PrivacyEvent:
        """This event without its :attr:`sampler` marker: what its price depends on, and what a release
        paid from a plan is matched against."""
        return self.drawn_by(None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (``relation``, ``parts`` and ``sampler`` only when set, as events stored
        before them)."""
        data = self.model_dump(exclude={"parts", "relation", "sampler"})
        if self.relation is not None:
            data["relation"] = self.relation
        if self.parts:
            data["parts"] = [p.to_dict() for p in self.parts]
        if self.sampler is not None:
            data["sampler"] = self.sampler
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyEvent:
        """Rebuild an event from :meth:`to_dict` output."""
        return cls(**data)


def check_events(events: Any) -> list[PrivacyEvent]:
    """Return ``events`` (a list or a tuple of PrivacyEvent) as a list, or raise InvalidParameterError."""
    items = check_sequence(events, "events")
    for index, item in enumerate(items):
        if not isinstance(item, PrivacyEvent):
            raise InvalidParameterError(
                f"'events[{index}]' must be a PrivacyEvent, got {type(item).__name__}", "events"
            )
    return items


def composite_event(parts: Sequence[PrivacyEvent], relation: Relation | None) -> PrivacyEvent:
    """One release made of ``parts`` (each stating ``relation``), as a ``"composite"`` event.

    Its guarantee is the basic composition of the parts (:func:`~dp_pipeline.guarantees.compose_basic`,
    rounded up; μ-GDP composition when every part is μ-GDP); accountants and
    :func:`~dp_pipeline.accounting.compose_plan` see the parts themselves.
    """
    items = flatten_events(check_events(parts))
    guarantees = [e.guarantee for e in items]
    mus = [g for g in guarantees if isinstance(g, GaussianDP)]
    total: Guarantee = compose_gdp(mus) if len(mus) == len(guarantees) else compose_basic(guarantees)
    if isinstance(total, ApproxDP) and total.delta == 0.0:
        total = PureDP(total.epsilon)
    return PrivacyEvent(
        kind="composite", guarantee=total, relation=relation, parts=tuple(e.under(relation) for e in items)
    )


def sampler_of(events: Sequence[PrivacyEvent]) -> Sampler | None:
    """``"fast"`` when any of ``events`` (or of their parts) was drawn by the fast path, else None."""
    marked = [e.sampler for e in (*events, *flatten_events(events)) if e.sampler is not None]
    return marked[0] if marked else None


def flatten_events(events: Sequence[PrivacyEvent]) -> list[PrivacyEvent]:
    """The events with every ``"composite"`` event replaced by its parts."""
    return [part for event in events for part in (event.parts if event.kind == "composite" else (event,))]
