"""Randomness sources: the labelled generators and the choice of the generator of a release."""

from __future__ import annotations

import numbers
import secrets
import warnings
from typing import Any

import numpy as np
from randomgen import AESCounter

from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import FastSamplerWarning, InvalidParameterError, PrivacyLeakWarning

__all__ = [
    "FastGenerator",
    "LabelledGenerator",
    "RNGLike",
    "drawn_event",
    "fast_rng",
    "is_fast",
    "kept_rng",
    "label_rng",
    "make_rng",
    "release_rng",
    "secure_rng",
]


class LabelledGenerator(np.random.Generator):
    """A numpy ``Generator`` whose choice is explicit: made by :func:`secure_rng` or :func:`fast_rng`.

    Passing one as ``rng`` (or ``random_state`` of a pandas function) is the labelled way to choose, or seed,
    the randomness of a release: it is used as given, without a PrivacyLeakWarning. Copies of it (pickling,
    ``deepcopy``, a worker process) keep the class and repeat its noise.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # numpy's own __reduce__ rebuilds a plain Generator, which would drop the label (and the fast path)
        return (type(self), (self.bit_generator,))


class FastGenerator(LabelledGenerator):
    """A numpy ``Generator`` over PCG64 that selects the fast, textbook floating-point samplers.

    Build it with :func:`fast_rng`. Mechanisms given one use numpy's float samplers, which are **not
    floating-point safe** (Mironov 2012) and whose PCG64 stream is predictable from its output.
    """


RNGLike = None | int | np.random.Generator


def _check_seed(seed: Any) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise InvalidParameterError(f"'seed' must be None or a non-negative int, got {seed!r}", "seed")


def fast_rng(seed: int | None = None) -> FastGenerator:
    """A :class:`FastGenerator` (PCG64) for the fast path: textbook float noise, **not floating-point safe**.

    Parameters
    ----------
    seed : int or None
        Seed of PCG64; ``None`` seeds it from the operating system. The call is the label: a seeded
        ``fast_rng`` does not warn.
    """
    _check_seed(seed)
    return FastGenerator(np.random.PCG64(None if seed is None else int(seed)))


def secure_rng(seed: int | None = None) -> LabelledGenerator:
    """numpy's Generator over AES-128 in counter mode (randomgen ``AESCounter``), a CSPRNG.

    Parameters
    ----------
    seed : int or None
        ``None`` (default): the key is 128 bits from :func:`secrets.randbits` (operating-system entropy).
        An int: the key is derived from it through ``SeedSequence``, for reproducible noise; the noise is
        then exactly as secret as the seed. The call is the label: a seeded ``secure_rng`` does not warn,
        where a bare int seed does.
    """
    _check_seed(seed)
    key = AESCounter(key=secrets.randbits(128)) if seed is None else AESCounter(int(seed))
    return LabelledGenerator(key)


def label_rng(
    rng: Any, call: str, name: str = "rng", *, kept: bool = False, stacklevel: int = 2
) -> LabelledGenerator:
    """The generator of a release for ``rng``; a PrivacyLeakWarning when the choice is not labelled.

    ``None`` gives a fresh :func:`secure_rng` (operating-system entropy, new for every call) and a
    :class:`LabelledGenerator` is returned as it is, both silently. An int seed gives ``secure_rng(seed)`` and
    another numpy Generator a labelled view of it (drawing from it advances it), both with a
    PrivacyLeakWarning naming ``call`` (see the module notes). With ``kept`` the generator is kept by an
    object that may be copied (a fitted transformer), so any ``rng`` but None warns: every copy repeats
    its noise. ``stacklevel`` counts from the caller, as for :func:`warnings.warn`.

    Raises
    ------
    InvalidParameterError
        Naming ``name``, for anything else (a negative int, a bool, a string).
    """
    if rng is None:
        return secure_rng()
    if isinstance(rng, FastGenerator):
        _warn_fast(stacklevel + 1)
    if isinstance(rng, LabelledGenerator):
        generator, problem = rng, ""
    elif isinstance(rng, np.random.Generator):
        generator = LabelledGenerator(rng.bit_generator)
        problem = (
            f"unlabelled randomness: {call}({name}=<a numpy Generator>) draws noise that is as predictable "
            "as its bit generator and that every copy of the generator repeats. Pass secure_rng(seed) (or "
            f"fast_rng(seed) for simulations) to choose it on purpose, or leave {name}=None for releases"
        )
    elif isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and int(rng) >= 0:
        generator = secure_rng(int(rng))
        problem = (
            f"seeded noise: {call}({name}={int(rng)}) draws reproducible noise, which anyone who knows the "
            f"seed can subtract. Pass {name}=secure_rng(seed) to seed on purpose (tests, examples), or "
            f"leave {name}=None for releases"
        )
    else:
        raise InvalidParameterError(
            f"{name!r} must be None, a non-negative int seed or a numpy.random.Generator, got {rng!r}", name
        )
    if kept:
        problem = (
            f"seeded noise: {call}({name}=...) keeps its generator in the fitted object, so every copy of it "
            "(pickling, deepcopy, clone, GridSearchCV, joblib workers, n_jobs > 1) adds the same noise and "
            f"their releases share it; a seed also lets anyone who knows it subtract the noise. Use {name} "
            f"in tests only; with {name}=None every release draws fresh OS entropy"
        )
    if problem:
        warnings.warn(problem, PrivacyLeakWarning, stacklevel=stacklevel + 1)
    return generator


_fast_warned: list[bool] = []
"""Whether this process has warned of the fast path (one FastSamplerWarning per process)."""


def _warn_fast(stacklevel: int) -> None:
    """The process's one FastSamplerWarning, at its first release drawn with a FastGenerator."""
    if _fast_warned:
        return
    _fast_warned.append(True)
    warnings.warn(
        "fast_rng draws noise with textbook floating-point samplers that are not floating-point safe: the "
        "floats they can output depend on the input, so a release can reveal it beyond its ε (Mironov "
        "2012). The ledger marks such releases (sampler 'fast' in their history); use them for simulations "
        "and benchmarks, and leave rng=None (the secure path) for releases",
        FastSamplerWarning,
        stacklevel=stacklevel + 1,
    )


def drawn_event(event: PrivacyEvent, rng: np.random.Generator | None) -> PrivacyEvent:
    """The event to charge for a release of ``event`` whose noise ``rng`` draws: marked ``"fast"`` (see
    :data:`~dp_pipeline.events.Sampler`) when ``rng`` is a :class:`FastGenerator`, else ``event`` itself.
    The price is the same (the marker is no part of it)."""
    return event.drawn_by("fast") if rng is not None and is_fast(rng) else event


def release_rng(random_state: Any, owner: str) -> np.random.Generator:
    """The generator of one release of ``owner`` (a transformer, a pandas function) for its
    ``random_state``: fresh OS entropy for None, new at every call.

    An int seed or an unlabelled numpy Generator warns (PrivacyLeakWarning): anyone who knows the seed can
    regenerate the noise and subtract it, and releases seeded alike add the same noise, so their difference
    shows the data's. ``secure_rng(seed)`` and ``fast_rng(seed)`` are the labelled choices and do not warn.
    The warning points at the caller of ``owner``.
    """
    return label_rng(random_state, owner, "random_state", stacklevel=3)


def kept_rng(random_state: Any, owner: str) -> np.random.Generator | None:
    """The generator a fitted object keeps for its releases: None for ``random_state=None``.

    With None nothing is kept: each release draws its own generator from :func:`release_rng`, keyed from OS
    entropy at release time, so copies of the object (pickling, ``deepcopy``, joblib workers, ``n_jobs > 1``)
    never share noise. Any other ``random_state`` is kept, with a PrivacyLeakWarning: every copy of the
    object repeats its noise. Seeds are for tests; real releases leave ``random_state=None``.
    """
    if random_state is None:
        return None
    return label_rng(random_state, owner, "random_state", kept=True, stacklevel=3)


def make_rng(rng: Any = None) -> np.random.Generator:
    """The generator of ``randomize(values, rng)``: :func:`label_rng`, warning at its caller."""
    return label_rng(rng, "randomize", stacklevel=3)


def is_fast(rng: np.random.Generator) -> bool:
    """True when ``rng`` selects the fast path (a :class:`FastGenerator`)."""
    return isinstance(rng, FastGenerator)
