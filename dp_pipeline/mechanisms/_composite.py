"""Several mechanisms released together: one release, one event."""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, model_validator

from dp_pipeline._exact import sqrt_up
from dp_pipeline._validation import FiniteFloat
from dp_pipeline.events import PrivacyEvent, Relation, composite_event
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import Mechanism
from dp_pipeline.mechanisms._bounded import _BoundedMechanism
from dp_pipeline.mechanisms._gaussian import Gaussian
from dp_pipeline.mechanisms._laplace import Laplace
from dp_pipeline.mechanisms._staircase import Staircase

__all__ = ["Composite"]

PartT = TypeVar("PartT", bound=Mechanism, covariant=True)

_MSE_GRID = 101  # points of a bounded part's range at which its mean-squared error is read


class Composite(Mechanism, Generic[PartT]):
    """Mechanisms released together as one release of d parts, described by one privacy event.

    Part j randomises entry j along the last axis of the values (a column of a table, or one of the
    statistics behind a mean). The release is charged once, as one event, so that an accountant sees what
    the whole call costs one person and a tight composition of a plan still sees every part.

    Parameters
    ----------
    parts : sequence of Mechanism
        The parts' mechanisms, in order (at least one; none of them composite).
    relation : {"add_remove", "replace_one"} or None
        The neighbouring relation the event states (None: the dataset's, for parts calibrated to a
        sensitivity the user vouches for). A part whose event states a relation (randomized response and the
        bounded mechanisms state ``"replace_one"``) is released only under that relation.
    joint : Gaussian or None
        For Gaussian parts calibrated together: the one Gaussian mechanism that the release is a
        post-processing of (see Notes). The release costs its event instead of the composition of the
        parts' events. Checked: every part is Gaussian and Σⱼ(Δⱼ/σⱼ)² ≤ (S/σ)², with S and σ the
        sensitivity and noise of ``joint``.
    replace_one : sequence of float or None
        Only with ``relation="add_remove"``: each part's sensitivity under replace-one (same norm). The
        event states it (``parameters["replace_one_sensitivity"]``: each Laplace part's own; for ``joint``,
        √Σ(Δ'ⱼ/Δⱼ)² in the units Δⱼ of the parts, rounded up), so that a dataset whose relation is
        replace-one charges the release exactly instead of through group privacy.

    Notes
    -----
    **Guarantee.** Parts that are (εⱼ, δⱼ)-DP on the same data are together (Σεⱼ, Σδⱼ)-DP, also when each
    part is chosen after the earlier ones are known (basic composition, Dwork & Roth 2014, Thm 3.16), and
    μⱼ-GDP parts are √(Σμⱼ²)-GDP (Dong, Roth & Su 2022, Cor. 3.3). :attr:`event` is the ``"composite"``
    event whose parts are the parts' events (one part: that part's own event); its guarantee is that
    composition, each sum exact and rounded up (:func:`~dp_pipeline.guarantees.compose_basic`,
    :func:`~dp_pipeline.guarantees.compose_gdp`), and an accountant composing a plan tightly reads each
    part.

    **Joint Gaussian.** The release adds N(0, σⱼ²) to each xⱼ, where xⱼ changes by at most Δⱼ. With
    yⱼ = xⱼ·σ/σⱼ it is y + N(0, σ²I) rescaled coordinate by coordinate, a post-processing of the Gaussian
    mechanism on y, whose L2 sensitivity is √Σ(Δⱼσ/σⱼ)² ≤ S. So it has every guarantee of ``joint``
    ((ε, δ)-DP of the analytic calibration, Balle & Wang 2018, or μ = S/σ GDP): tighter than composing d
    separate Gaussians at the same noise under (ε, δ) accounting.

    The design follows OpenDP's composition combinators (``make_composition``): a composed release is used
    like any other measurement.

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Thm 3.16.
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022, Cor. 3.3.
    Balle & Wang, "Improving the Gaussian mechanism for differential privacy: analytical calibration and
    optimal denoising", ICML 2018.

    Examples
    --------
    >>> from dp_pipeline.mechanisms import Laplace
    >>> parts = [Laplace(epsilon=0.25, sensitivity=1.0), Laplace(epsilon=0.75, sensitivity=10.0)]
    >>> m = Composite(parts=parts)
    >>> m.guarantee
    PureDP(epsilon=1.0)
    >>> m.event.kind, len(m.event.parts)
    ('composite', 2)
    """

    parts: tuple[PartT, ...] = Field(min_length=1)
    relation: Relation | None = None
    joint: Gaussian | None = None
    replace_one: tuple[Annotated[FiniteFloat, Field(gt=0.0)], ...] | None = None

    @model_validator(mode="after")
    def _check_parts(self) -> Composite[PartT]:
        for index, part in enumerate(self.parts):
            if isinstance(part, Composite):
                raise ValueError(f"parts[{index}] is composite: give its parts instead")
            stated = part.event.relation
            if stated is not None and stated != self.relation:
                raise ValueError(
                    f"parts[{index}] ({type(part).__name__}) is private under the relation {stated!r}; "
                    f"release it with relation={stated!r}"
                )
        if self.joint is not None:
            self._check_joint(self.joint)
        if self.replace_one is not None:
            self._check_replace_one(self.replace_one)
        return self

    def _check_joint(self, joint: Gaussian) -> None:
        gaussians = [part for part in self.parts if isinstance(part, Gaussian)]
        if len(gaussians) != len(self.parts):
            raise ValueError("'joint' needs Gaussian parts")
        load = sum(((Fraction(p.sensitivity) / Fraction(p.sigma)) ** 2 for p in gaussians), Fraction(0))
        if load > (Fraction(joint.sensitivity) / Fraction(joint.sigma)) ** 2:
            raise ValueError(
                "the parts add less noise than 'joint' accounts for: Σ(Δⱼ/σⱼ)² must be at most (S/σ)² of "
                "'joint'"
            )

    def _check_replace_one(self, replace_one: tuple[float, ...]) -> None:
        if self.relation != "add_remove":
            raise ValueError("'replace_one' states the replace-one sensitivities of an add_remove release")
        if len(replace_one) != len(self.parts):
            raise ValueError(f"'replace_one' has {len(replace_one)} entries for {len(self.parts)} part(s)")
        if self.joint is None and not all(isinstance(part, Laplace) for part in self.parts):
            raise ValueError("'replace_one' is stated by Laplace parts or a joint Gaussian only")

    @property
    def event(self) -> PrivacyEvent:
        """The whole release as one :class:`~dp_pipeline.events.PrivacyEvent` (see Notes)."""
        if self.joint is not None:
            event = self.joint.event
            if self.replace_one is not None:
                units = (
                    Fraction(other) / Fraction(part.sensitivity)
                    for other, part in zip(self.replace_one, self.parts, strict=True)
                    if isinstance(part, Gaussian)
                )
                event = _stating(event, sqrt_up(sum((u * u for u in units), Fraction(0))))
            return event.under(self.relation)
        events = [part.event for part in self.parts]
        if self.replace_one is not None:
            events = [_stating(e, other) for e, other in zip(events, self.replace_one, strict=True)]
        return events[0].under(self.relation) if len(events) == 1 else composite_event(events, self.relation)

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee of the whole release: that of :attr:`event`."""
        return self.event.guarantee

    @property
    def noise_std(self) -> NDArray[np.float64]:
        """The standard deviation of each part's noise (parts that add noise to real values).

        √variance for additive noise; for a bounded part, whose error depends on its input t, the root of
        the largest mean-squared error E[(Y − t)² | t] over 101 evenly spaced points of its range.
        """
        return np.sqrt(np.array([_noise_variance(part) for part in self.parts], dtype=np.float64))

    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """Randomise entry j along the last axis of ``values`` with part j, all from one generator.

        Parameters
        ----------
        values : array_like
            Shape (..., d) for d parts; each part takes its slice as it takes values on its own.
        rng : None, int or numpy.random.Generator
            As for every mechanism (see :meth:`ContinuousMechanism.randomize
            <dp_pipeline.mechanisms.ContinuousMechanism.randomize>`).

        Returns
        -------
        ndarray
            The parts' outputs stacked along the last axis, the shape of ``values``.
        """
        generator = sampling.make_rng(rng)
        array = np.asarray(values)
        if array.ndim == 0 or array.shape[-1] != len(self.parts):
            raise InvalidParameterError(
                f"'values' must have {len(self.parts)} entries along its last axis (one per part), got shape "
                f"{array.shape}",
                "values",
            )
        outputs = [np.asarray(part.randomize(array[..., j], generator)) for j, part in enumerate(self.parts)]
        return np.stack(outputs, axis=-1)


def _stating(event: PrivacyEvent, replace_one: float) -> PrivacyEvent:
    """An add/remove event that also gives its sensitivity under replace-one (so that it converts exactly)."""
    parameters = {**event.parameters, "replace_one_sensitivity": replace_one}
    return event.model_copy(update={"parameters": parameters})


def _noise_variance(part: Mechanism) -> float:
    if isinstance(part, _BoundedMechanism):
        grid = np.linspace(part.lower, part.upper, _MSE_GRID)
        return float(np.max(part.mse(grid)))
    if isinstance(part, (Laplace, Gaussian, Staircase)):
        return part.variance
    raise InvalidParameterError(
        f"a {type(part).__name__} part adds no noise to real values, so it has no noise_std", "parts"
    )
