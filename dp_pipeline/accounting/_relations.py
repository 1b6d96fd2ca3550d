"""An event as it applies to a dataset's neighbouring relation.

A dataset declares one relation (:data:`~dp_pipeline.events.Relation`); every event charged to it is first
read under that relation by :func:`to_relation`:

* the same relation, or an event that states none (a mechanism built by hand, whose sensitivity its user
  vouches for under the dataset's relation): the event as it is;
* an ``"add_remove"`` event on a ``"replace_one"`` dataset: replacing a person is removing them and adding
  another, so the event is re-priced for that change. Exactly when it says how: a Laplace or Gaussian event
  with ``parameters["replace_one_sensitivity"]`` (Δ', L1 for Laplace, L2 for Gaussian) gives ε = Δ'/b, or
  μ = Δ'/σ (read at the event's δ through :meth:`~dp_pipeline.guarantees.GaussianDP.to_approx_dp` for an
  (ε, δ) event). Otherwise by group privacy with k = 2
  (:func:`~dp_pipeline.accounting.group_event`), valid for every event;
* a ``"replace_one"`` event on an ``"add_remove"`` dataset: refused. A release that is private only when one
  row is replaced by another (noise on each row, randomized response) shows how many rows there are, so
  adding or removing a person is not hidden at any ε.

A ``"composite"`` event is read part by part.
"""

from __future__ import annotations

from dp_pipeline._exact import divide_up
from dp_pipeline.accounting._composition import composite_event, group_event
from dp_pipeline.accounting._losses import _event_loss, _GaussianLoss, _LaplaceLoss
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError, UnsupportedCompositionError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

__all__ = ["to_relation"]

_OTHER = "replace_one_sensitivity"


def to_relation(event: PrivacyEvent, relation: Relation) -> PrivacyEvent:
    """The event as it applies under ``relation`` (see the module notes), stating that relation.

    Raises
    ------
    UnsupportedCompositionError
        A ``"replace_one"`` event on an ``"add_remove"`` dataset.
    InvalidParameterError
        A bad ``replace_one_sensitivity``, or an event whose guarantee its noise does not imply.
    """
    if event.relation is None or event.relation == relation:
        return event.under(relation)
    if event.kind == "composite":
        return composite_event([to_relation(part, relation) for part in event.parts], relation)
    if event.relation == "replace_one":
        raise UnsupportedCompositionError(
            f"a {event.kind!r} release calibrated for one person's row replaced (replace-one) cannot be "
            "charged to a dataset declared with relation='add_remove': a row-level release shows how many "
            "rows there are, so it hides no person added or removed. Declare the dataset with "
            "relation='replace_one' (set_budget(..., relation='replace_one'), before any spend), or "
            "release an aggregate (dp_count, dp_sum, dp_mean, dp_histogram), which calibrates to "
            "add/remove."
        )
    if _OTHER in event.parameters and event.kind in ("laplace", "gaussian"):
        return _repriced(event, relation)
    return group_event(event, 2).under(relation)


def _repriced(event: PrivacyEvent, relation: Relation) -> PrivacyEvent:
    """A Laplace or Gaussian event at its replace-one sensitivity Δ' (rounded up: ε = Δ'/b, μ = Δ'/σ)."""
    raw = event.parameters[_OTHER]
    if isinstance(raw, str) or not raw > 0:
        raise InvalidParameterError(f"the event's {_OTHER!r} must be a number > 0, got {raw!r}", _OTHER)
    other = float(raw)
    loss = _event_loss(event)
    guarantee: Guarantee
    if isinstance(loss, _LaplaceLoss):
        guarantee = PureDP(divide_up(other, loss.scale))
    else:
        assert isinstance(loss, _GaussianLoss)
        mu = GaussianDP(divide_up(other, loss.sigma))
        if isinstance(event.guarantee, GaussianDP):
            guarantee = mu
        else:  # an (ε, δ) Gaussian event: the same δ (its guarantee was checked by _event_loss)
            assert isinstance(event.guarantee, ApproxDP)
            guarantee = mu.to_approx_dp(event.guarantee.delta)
    parameters = {k: v for k, v in event.parameters.items() if k != _OTHER}
    return PrivacyEvent(
        kind=event.kind, guarantee=guarantee, sensitivity=other, parameters=parameters, relation=relation
    )
