"""Statistical checks of fresh (unseeded) randomness that fail by chance about once in a million runs.

A test of operating-system randomness at level α fails by chance with probability α, so thirty such
tests at α = 1e-3 fail a CI run about once in thirty. :func:`assert_not_rejected` tests at α = 1e-3 and,
only when that rejects, draws a second, independent sample and fails only if it is rejected too: under
the null hypothesis the two draws are independent, so a chance failure has probability α² = 1e-6, while a
real bug (a wrong scale, a wrong distribution) that the test detects gives p ≪ α on every draw and still
fails both. Tests whose randomness is seeded need none of this: they pass or fail the same way every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

ALPHA = 1e-3


def assert_not_rejected(draw: Callable[[], float | Sequence[float]], alpha: float = ALPHA) -> None:
    """Fail if ``draw()`` is rejected at level ``alpha`` on a first draw and on a second, fresh draw.

    Parameters
    ----------
    draw : callable
        Draws a new sample with fresh randomness on each call and returns its p-value, or the p-values of
        k tests of that sample, each then tested at ``alpha / k`` (Bonferroni: a draw is still rejected by
        chance with probability at most ``alpha``).
    alpha : float
        Level of each draw: the chance failure rate of the check is at most ``alpha ** 2``.
    """

    def rejected() -> float | None:
        pvalues = np.atleast_1d(np.asarray(draw(), dtype=float))
        smallest = float(pvalues.min())
        return smallest if smallest <= alpha / pvalues.size else None

    first = rejected()
    if first is None:
        return
    second = rejected()
    assert second is None, f"rejected on two independent draws: p = {first:.3g}, then p = {second:.3g}"

