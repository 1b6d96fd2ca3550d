"""The only code in dp-pipeline that draws randomness: a secure path (the default) and a fast path.

One package to review. Its modules follow the steps of the samplers: ``_sources`` (the generators),
``_fast`` (the fast path), ``_exact`` (random words, lazy uniforms, exact comparisons), ``_bounds``
(certified float bounds), ``_exponential`` (the exact exponential magnitude), ``_lattice`` (lattice cells
and rejection rounds), one module per noise family (``_laplace``, ``_gaussian``, ``_staircase``,
``_randomized_response``) and ``_choice`` (the exponential mechanism). The names below are the API the
mechanisms, transformers and pandas functions use; the modules are private.

Randomness sources (``rng`` everywhere)
---------------------------------------
``None``
    A fresh :func:`secure_rng`: numpy's ``Generator`` over randomgen's ``AESCounter`` (AES-128 in counter
    mode, a cryptographically secure generator) keyed with 128 bits from the operating system
    (:mod:`secrets`), drawn anew for every call. Nobody can predict or reproduce the noise, and no copy of
    any object holds it.
``secure_rng(seed)`` / ``fast_rng(seed)`` (a :class:`LabelledGenerator`)
    The explicit, labelled choices: used as given, without a warning. ``secure_rng(seed)`` keys the same
    AES-128 counter generator from the seed through numpy's ``SeedSequence``: reproducible, and exactly as
    secret as the seed. :class:`FastGenerator` (from :func:`fast_rng`) selects the fast path: textbook
    floating-point samplers (numpy's ``laplace``, ``normal``, inversion with ``log``) driven by PCG64.
    **Not floating-point safe**: the set of floats such a sampler can reach depends on the input, which can
    reveal it (Mironov 2012), and PCG64 is predictable from its output. For simulations and benchmarks only.
    The first release drawn with one raises a :class:`~dp_pipeline.exceptions.FastSamplerWarning` (once per
    process), and wherever the library charges and draws (the pandas functions, the transformers, and
    through them Airflow tasks) the charged event is marked ``sampler="fast"`` (:func:`drawn_event`), at
    the same price, and shown by ``history()``, ``dp-pipeline budget history`` and the dashboard.
``int``
    The same generator as ``secure_rng(seed)``, with a :class:`~dp_pipeline.exceptions.PrivacyLeakWarning`:
    a bare seed is reproducible noise that anyone who knows it can subtract, chosen without saying so.
``numpy.random.Generator`` (any other)
    Used as given, with the exact samplers of the secure path, and a PrivacyLeakWarning: its randomness is
    only as unpredictable as its bit generator (numpy's default PCG64 is not cryptographic), and every copy
    of it (pickling, ``deepcopy``, a worker process) repeats its noise.

The secure samplers
-------------------
The secure path never turns a floating-point approximation of a noise distribution into a release. Each
continuous mechanism releases a *post-processing of its ideal real-valued output*: the real number
Y = t + X (t the input as the real number its float denotes, X the noise with its exact distribution) is
located in a cell [mλ, (m + 1)λ) of a lattice of step λ = 2^k, and the centre (m + ½)λ of that cell is
released (for integer inputs: the nearest integer, λ = 1). Because m is a deterministic function of the
ideal output Y, the release has every privacy guarantee of the ideal mechanism (post-processing), for
every input and every shape of input, and the set of floats that can come out is the lattice, whatever
the input: the floating-point attack has nothing to read.

m is computed exactly. The noise is written through exact discrete quantities (a sign, a geometric
integer, Bernoulli variables) and *lazy uniforms*: a uniform real number of which only as many random bits
are drawn as are needed to decide a comparison. Every comparison ("is the uniform W below e^{−a}?", "is
the real Y above a lattice boundary?") is decided first in vectorised float arithmetic with a *certified*
error bound: the answer is taken only when the interval that provably contains the exact quantity lies
wholly on one side. The rare elements whose interval straddles the boundary (probability about 2⁻⁴⁰ per
comparison) continue in exact rational arithmetic (:class:`fractions.Fraction`, :mod:`decimal`, which
rounds ``exp`` correctly), drawing further random bits until the comparison is decided. So the output
distribution is exactly the ideal one; floating point only decides how fast.

The certified exponential (:func:`exp_neg_bounds`) uses no library ``exp``: e^{−a} = e^{−i}·e^{−j/1024}·
e^{−r} with tables correctly rounded from :mod:`decimal` and a degree-5 Taylor polynomial on
r ∈ [0, 2⁻¹⁰), whose truncation error is below 2⁻⁶⁹; with IEEE-754 arithmetic (each operation rounded to
nearest) the relative error is below 2⁻⁵⁰, and the bounds are widened by 2⁻⁴⁶.

References
----------
Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.
Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020 (exact
Bernoulli(e^{−γ}) and discrete samplers, which this module's exact arithmetic follows in spirit).
Karney, "Sampling exactly from the normal distribution", ACM TOMS 42(1), 2016 (lazy uniforms).
"""

from dp_pipeline.mechanisms.sampling._bounds import exp_neg_bounds
from dp_pipeline.mechanisms.sampling._choice import exponential_choice, uniform_index
from dp_pipeline.mechanisms.sampling._fast import (
    bernoulli,
    gaussian,
    geometric,
    laplace,
    randomized_response_offsets,
    uniform,
)
from dp_pipeline.mechanisms.sampling._gaussian import gaussian_cells, gaussian_integers
from dp_pipeline.mechanisms.sampling._laplace import laplace_cells, laplace_integers
from dp_pipeline.mechanisms.sampling._lattice import lattice_exponent
from dp_pipeline.mechanisms.sampling._randomized_response import other_offset, truthful
from dp_pipeline.mechanisms.sampling._sources import (
    FastGenerator,
    LabelledGenerator,
    RNGLike,
    drawn_event,
    fast_rng,
    is_fast,
    kept_rng,
    label_rng,
    make_rng,
    release_rng,
    secure_rng,
)
from dp_pipeline.mechanisms.sampling._staircase import staircase_cells, staircase_integers

__all__ = [
    "FastGenerator",
    "LabelledGenerator",
    "RNGLike",
    "bernoulli",
    "drawn_event",
    "exp_neg_bounds",
    "exponential_choice",
    "fast_rng",
    "gaussian",
    "gaussian_cells",
    "gaussian_integers",
    "geometric",
    "is_fast",
    "kept_rng",
    "label_rng",
    "laplace",
    "laplace_cells",
    "laplace_integers",
    "lattice_exponent",
    "make_rng",
    "other_offset",
    "randomized_response_offsets",
    "release_rng",
    "secure_rng",
    "staircase_cells",
    "staircase_integers",
    "truthful",
    "uniform",
    "uniform_index",
]
