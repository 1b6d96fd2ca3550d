"""Shared behaviour of all mechanisms: validation, the privacy event, the randomize entry point, and the
one-shot view.

A charge covers one draw. A mechanism's ``event`` is the cost of **one** call of ``randomize`` (or of
another method that draws noise, such as ``Exponential.select``); every further call is a further release
that must be charged again. Code handed a mechanism whose draw was paid for (an Airflow task's
``mechanism``) is handed :meth:`Mechanism.one_shot`, which refuses a second draw.
"""

from __future__ import annotations

import inspect
import numbers
import os
import threading
import types
import typing
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dp_pipeline._validation import ValidatedModel, check_array
from dp_pipeline.events import EventKind, PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError, MechanismSpentError
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import sampling

__all__ = ["ContinuousMechanism", "Mechanism", "OneShot"]


class Mechanism(ValidatedModel, ABC):
    """A randomised release with a known privacy cost.

    The cost depends only on the constructor parameters, so it is known before any data is touched:
    ``guarantee`` and ``event`` never look at data. They are the cost of **one** draw (one call of
    ``randomize``): a charge of ``event`` pays for one draw, and each further draw is a release of its own.
    :meth:`one_shot` gives a view that draws once.
    """

    DRAWS: ClassVar[tuple[str, ...]] = ("randomize", "select")
    """The methods that draw noise (a release each): the ones a :class:`OneShot` view allows once."""

    event_kind: ClassVar[EventKind]
    event_relation: ClassVar[Relation | None] = None
    """The neighbouring relation of the event: None (the dataset's, for noise calibrated to a sensitivity the
    user vouches for) or ``"replace_one"`` (a local mechanism, ε-DP over its input domain per row)."""

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            name, required = type(self).__name__, _required(type(self))
            raise InvalidParameterError(
                f"{name} takes keyword arguments only, e.g. {name}({', '.join(f'{f}=…' for f in required)}); "
                f"got {len(args)} positional argument(s)",
                next(iter(type(self).model_fields)),
            )
        super().__init__(**data)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__signature__ = _signature(cls)  # help() shows plain types, not pydantic's validators

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
            relation=self.event_relation,
        )

    def _event_sensitivity(self) -> float | None:
        return getattr(self, "sensitivity", None)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {}

    @abstractmethod
    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """Randomise ``values`` (vectorised; the output has the input's shape)."""

    def one_shot(self) -> OneShot:
        """A view of this mechanism that draws noise once: the form to hand to code whose one draw was
        paid for (see :class:`OneShot`)."""
        return OneShot(self)


class OneShot:
    """A mechanism that draws once: the first successful call of one of its draws (``randomize``, or
    ``select`` where the mechanism has it) releases; any later draw raises
    :class:`~dp_pipeline.exceptions.MechanismSpentError` and releases nothing.

    **Guarantee.** A charge of the mechanism's ``event`` pays for one draw; the view makes at most one, so
    the charge covers everything released through the view. A copy cannot draw at all: ``copy.copy``,
    ``copy.deepcopy`` and unpickling give a spent view, and in a process other than the one that made the
    view (a forked child inherits its memory) every draw is refused. So one view in any number of copies
    and processes releases at most once. A draw that raises (invalid input) returns nothing and does not
    spend the view. A draw with a ``fast_rng`` generator is refused (``InvalidParameterError``): the charge
    was recorded before the draw, unmarked, and fast noise is not covered by its ε. Draws are serialised by a
    lock, so two threads cannot both make the first draw.

    Attributes other than the draws (``event``, ``guarantee``, ``epsilon``, ``scale``, ``pdf``, ...) are the
    mechanism's.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism whose draw was paid for.

    References
    ----------
    Dwork and Roth, *The Algorithmic Foundations of Differential Privacy* (2014), Theorem 3.16: k draws of
    an ε-DP mechanism cost kε under basic composition, so one charge covers one draw.
    """

    __slots__ = ("_lock", "_mechanism", "_pid", "_spent")

    def __init__(self, mechanism: Mechanism, *, spent: bool = False) -> None:
        if not isinstance(mechanism, Mechanism):
            raise InvalidParameterError(
                f"a one-shot view needs a Mechanism, got {type(mechanism).__name__}", "mechanism"
            )
        object.__setattr__(self, "_mechanism", mechanism)
        object.__setattr__(self, "_spent", spent)
        object.__setattr__(self, "_pid", os.getpid())
        object.__setattr__(self, "_lock", threading.Lock())

    @property
    def spent(self) -> bool:
        """Whether this view can no longer draw (it drew, it is a copy, or it is in another process)."""
        return self._spent or self._pid != os.getpid()

    @property
    def mechanism_type(self) -> type[Mechanism]:
        """The class of the mechanism this view draws from."""
        return type(self._mechanism)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._mechanism, name)
        if name in Mechanism.DRAWS and callable(attribute):
            return self._draw(attribute)
        return attribute

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a one-shot {type(self._mechanism).__name__} cannot be changed")

    def _draw(self, method: Any) -> Any:
        def draw(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                if self.spent:
                    raise MechanismSpentError(
                        f"this one-shot {type(self._mechanism).__name__} already drew, or is a copy of one "
                        "(copied, pickled or in another process): its charge paid for one draw. A further "
                        "release needs a charge of its own"
                    )
                if any(sampling.is_fast(arg) for arg in (*args, *kwargs.values())):
                    raise InvalidParameterError(
                        "a paid-for mechanism draws with the secure sampler only: its charge was recorded "
                        "before the draw, so a fast_rng release (not floating-point safe) could not be "
                        "marked on the ledger. Leave rng=None",
                        "rng",
                    )
                out = method(*args, **kwargs)
                object.__setattr__(self, "_spent", True)
                return out

        return draw

    def __copy__(self) -> OneShot:
        return OneShot(self._mechanism, spent=True)

    def __deepcopy__(self, memo: dict[int, Any]) -> OneShot:
        return OneShot(self._mechanism, spent=True)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_spent_view, (self._mechanism,))

    def __repr__(self) -> str:
        state = "spent" if self.spent else "unspent"
        return f"OneShot({self._mechanism!r}, {state})"


def _spent_view(mechanism: Mechanism) -> OneShot:
    """An unpickled one-shot view: spent (the original may draw)."""
    return OneShot(mechanism, spent=True)


def _required(cls: type[Mechanism]) -> list[str]:
    return [name for name, field in cls.model_fields.items() if field.is_required()]


def _type_name(annotation: Any) -> str:
    """``float``, ``float | None``, ``'a' | 'b'``: an annotation without pydantic's validators."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


class _Shown:
    """An annotation shown as written (``inspect`` quotes plain strings)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(cls: type[Mechanism]) -> inspect.Signature:
    """The constructor's signature as a reader wants it: keyword-only, plain types, the defaults."""
    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if field.is_required() else field.default,
            annotation=_Shown(_type_name(field.annotation)),
        )
        for name, field in cls.model_fields.items()
    ]
    return inspect.Signature(parameters, return_annotation=inspect.Signature.empty)


class ContinuousMechanism(Mechanism):
    """A mechanism that releases real numbers with an exact output density ``pdf(y, t)``.

    ``randomize(values, rng=None)`` takes the secure path unless ``rng`` is a
    :class:`~dp_pipeline.mechanisms.sampling.FastGenerator` (see :func:`randomize`).
    """

    @abstractmethod
    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """Density of the output at ``y`` for the true value ``t`` (broadcast)."""

    def _randomize(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """Randomise validated finite float values: the secure path, or the fast one for a FastGenerator."""
        if sampling.is_fast(rng):
            return self._randomize_fast(values, rng)
        return self._randomize_secure(values, rng)

    @abstractmethod
    def _randomize_fast(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """Textbook floating-point noise (not floating-point safe)."""

    @abstractmethod
    def _randomize_secure(
        self, values: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """The exact lattice release (floating-point safe)."""

    def _integer_noise(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        """Secure noise for integer inputs (only called when ``integer_queries``)."""
        raise NotImplementedError

    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """Release ``values`` with noise; arrays keep their shape.

        Parameters
        ----------
        values : array_like
            Finite numbers. Float input gives float output (a scalar gives a float). For mechanisms that
            add noise to a query (Laplace, Gaussian, staircase), integer input (an integer dtype, or a
            Python int) is an integer query such as a count: the output is the input plus the noise
            rounded to the nearest integer, as int64 (a scalar gives an int).
        rng : None, int or numpy.random.Generator
            ``None`` (default): secure path with a fresh AES-128 counter CSPRNG keyed from the operating
            system. :func:`~dp_pipeline.mechanisms.secure_rng` ``(seed)``: the same generator, seeded on
            purpose (reproducible, only as secret as the seed). A
            :class:`~dp_pipeline.mechanisms.sampling.FastGenerator` from
            :func:`~dp_pipeline.mechanisms.fast_rng`: the fast path, textbook float noise that is
            **not floating-point safe**. A bare int seed (as ``secure_rng(seed)``) or another numpy
            Generator (used as the randomness of the secure path) raises PrivacyLeakWarning.
        """
        generator = sampling.make_rng(rng)
        if self.integer_queries and _is_integer_input(values):
            array = np.asarray(values)
            if np.max(np.abs(array.astype(np.float64))) >= 2.0**62:
                raise InvalidParameterError("integer 'values' must lie within ±2⁶²", "values")
            ints = array.astype(np.int64)
            if sampling.is_fast(generator):  # fast path: float noise rounded to the nearest integer
                noise = np.rint(self._randomize_fast(np.zeros(ints.shape), generator)).astype(np.int64)
            else:
                noise = self._integer_noise(generator, int(ints.size)).reshape(ints.shape)
            counts = ints + noise
            return int(counts) if np.ndim(values) == 0 else counts
        array = check_array(values)
        out = self._randomize(array, generator)
        return float(out) if np.ndim(values) == 0 else out

    integer_queries: ClassVar[bool] = False
    """Whether integer input is an integer query released as integers (see :meth:`randomize`)."""


def _is_integer_input(values: Any) -> bool:
    """An integer query: a Python int (not a bool) or an array of an integer dtype."""
    if isinstance(values, bool):
        return False
    if isinstance(values, numbers.Integral):
        return True
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype.kind in "iu" and int(np.size(values)) > 0
    if isinstance(values, (list, tuple)):
        try:
            array = np.asarray(values)
        except (TypeError, ValueError):
            return False
        return array.dtype.kind in "iu" and array.size > 0
    return False
