"""Pessimistic privacy-loss distributions (PLDs) on a grid: built from privacy profiles, composed by FFT.

A deliberate hand-write, replacing the few dp-accounting functions dp-pipeline used at run time
(``from_laplace_mechanism``, ``from_gaussian_mechanism``, ``create_pmf_pessimistic_connect_dots``,
``compose``/``self_compose`` and ``get_epsilon_for_delta``), so that the runtime does not depend on
dp-accounting (whose releases pin attrs and numpy against Airflow 3). Written from the papers below, following
dp-accounting's design (Apache-2.0, Google) without copying its code; dp-accounting stays in the tests as an
independent reference.

A PLD here is a measure on the losses ``(lo + i)·h`` (mass ``probs[i]``) plus a mass at +∞, with an upper
bound ``error`` on the ℓ2 distance between the stored masses and a measure that dominates the exact one.

**Soundness.** Write δ_A(ε) = P_∞ + Σᵢ pᵢ·φ_ε(ℓᵢ), φ_ε(ℓ) = (1 − e^{ε−ℓ})₊, for the hockey-stick curve of
a PLD A. Every step below errs only toward a larger curve of every later composition:

1. *Connect the dots* (Doroshenko et al. 2022, Algorithm 1): for grid points ε₀ < … < ε_k the PLD with
   δ(ε_j) at each point, P_∞ = δ(ε_k) and mass 1 is the pair whose curve, as a function of x = e^ε, is
   the broken line through (0, 1) and (e^{ε_j}, δ(ε_j)), flat after the last point. The true curve is
   convex in x (a mixture of the convex (1 − x·e^{−ℓ})₊), non-increasing, equal to 1 at x = 0, so it
   lies below that line; the pair is valid (its Q-mass is (1 − δ(ε₀))e^{−ε₀} ≤ 1). A pair whose curve is
   above another's for every ε dominates it, and domination is kept by composition (Zhu, Dong & Wang
   2022, Lemma 9; Dong, Roth & Su 2022, Lemma 3.2 for trade-off functions). The profile values are
   raised by 1e-10 relative before use (their own rounding is far smaller), so the nodes are at or above
   the exact curve. Each mass is then raised by 4u times its two quotients (below), more than their
   rounding, so the stored masses are at least those of the broken line.
2. *Mass moved up or added*: the curve of a composition is Σᵢⱼ pᵢqⱼ·φ_ε(ℓᵢ + mⱼ) (+ the ∞ terms), a
   positive bilinear form in the masses in which φ_ε is non-decreasing in the loss. So adding mass
   (a negative connect-the-dots mass from rounding clipped to 0, a mass raised by its rounding bound;
   P_∞ of a composition taken as P_∞(A) + P_∞(B) ≥ 1 − (1 − P_∞(A))(1 − P_∞(B))) or moving mass to a
   larger loss (the upper tail to +∞, the lower tail to the first kept grid point, each raised by the
   bound on its own error, √m·E for m bins) never lowers a later curve.
3. *Floating point*: each stored mass vector differs from a dominating one of steps 1–2 by a vector e
   with ‖e‖₂ ≤ ``error`` = E, so δ_exact(ε) ≤ δ_stored(ε) + √K·E, K the number of grid losses above ε
   (0 ≤ φ ≤ 1 and Cauchy–Schwarz). An FFT convolution of a and b of length N adds at most
   c_N·(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂) to E, c_N = 4ρ/(1 − ρ), ρ = (log₂N + 1)·η, η = 16u (u = 2⁻⁵³), from the
   normwise bound of the floating-point FFT (Higham 2002, Thm 24.2, with a generous constant for the
   twiddle factors and the mixed-radix pocketfft) applied to the forward transforms, the pointwise
   product (‖F a‖_∞ ≤ ‖a‖₁) and the inverse; the inputs' errors propagate by Young's inequality as
   E_a·‖b‖₁ + ‖a‖₁·E_b (masses bounded by the stored sums plus √n·E). A direct convolution, used where
   it is cheap (|a|·|b| ≤ 2²⁶: non-negative sums of products), is raised by its relative bound γ_{n+1}
   instead and adds nothing to E. Clipping a
   negative result to 0 only moves it toward the dominating (non-negative) value.
4. *The ε search* sums the masses with relative error below κ = 1e-9 (≤ 2²³ terms, non-negative, in
   ordered cumulative sums), treated pessimistically, and solves the exact curve of the stored masses
   on the segment where the target is crossed.

References
----------
Meiser & Mohammadi, "Tight on budget? Tight bounds for r-fold approximate differential privacy", CCS 2018.
Koskela, Jälkö & Honkela, "Computing tight differential privacy guarantees using FFT", AISTATS 2020.
Doroshenko, Ghazi, Kamath, Kumar & Manurangsi, "Connect the dots: tighter discrete approximations of
privacy loss distributions", PoPETs 2022.
Zhu, Dong & Wang, "Optimal accounting of differential privacy via characteristic function", AISTATS 2022.
Higham, "Accuracy and stability of numerical algorithms", 2nd ed., SIAM 2002, §24.1.
Google, dp-accounting, ``dp_accounting/pld`` (Apache-2.0): the design this module follows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import fft, special

__all__ = ["GridPLD", "connect_dots", "gaussian_profile", "laplace_profile", "rounded_down"]

_U = 2.0**-53  # unit roundoff of binary64
_PROFILE_RAISE = 1e-10  # profile values are raised by this (relative) before connect-the-dots
_SUM_REL = 1e-9  # relative error bound of sequential sums of ≤ 2²³ non-negative terms (2²³·u < 1e-9)
_FFT_ETA = 16.0 * _U  # per-stage error of one FFT butterfly, generous (Higham 2002, Thm 24.2)
_DIRECT_WORK = 1 << 26  # inputs with |a|·|b| up to this are convolved directly (relative γ_n per bin)


def laplace_profile(loss: float) -> Callable[[float], float]:
    """The privacy profile of Laplace noise whose exact loss is L = Δ/b.

    δ(ε) = 1 − e^{(ε−L)/2} for |ε| ≤ L, 0 above, 1 − e^ε below: for P = Lap(0, b), Q = Lap(Δ, b) the
    optimal set is {x < x*} with ln(P/Q)(x*) = ε, x* = (Δ − εb)/2, and P − e^εQ on it is
    1 − ½e^{−x*/b} − ½e^{ε + (x*−Δ)/b} = 1 − e^{(ε−L)/2}.
    """

    def profile(epsilon: float) -> float:
        if epsilon >= loss:
            return 0.0
        if epsilon <= -loss:
            return -math.expm1(epsilon)
        return -math.expm1((epsilon - loss) / 2.0)

    return profile


def gaussian_profile(mu: float) -> Callable[[float], float]:
    """The privacy profile of μ-GDP (Gaussian noise of σ at sensitivity S, μ = S/σ).

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13),
    evaluated as Φ(a)·(1 − exp(ε + ln Φ(b) − ln Φ(a))) so that it keeps its relative accuracy in the tail.
    """

    def profile(epsilon: float) -> float:
        a, b = -epsilon / mu + mu / 2.0, -epsilon / mu - mu / 2.0
        log_a = float(special.log_ndtr(a))
        return max(0.0, math.exp(log_a) * -math.expm1(epsilon + float(special.log_ndtr(b)) - log_a))

    return profile


@dataclass(frozen=True)
class GridPLD:
    """A PLD on the grid h·ℤ: mass ``probs[i]`` at loss (lo + i)·h, ``infinity`` at +∞, and ``error``
    bounding the ℓ2 floating-point error of ``probs`` (see the module notes).

    ``upper`` (the default): the PLD dominates the exact one and every reading errs toward more loss.
    ``upper=False`` (from :func:`rounded_down`): it is dominated by the exact one and every reading errs
    toward less loss, for a proven lower bound: losses rounded down to the grid, tails dropped, the
    floating-point error and the sums' rounding subtracted (module notes, mirrored).
    """

    interval: float
    lo: int
    probs: np.ndarray
    infinity: float
    error: float
    upper: bool = True

    def mass_bound(self) -> float:
        """An upper bound on the total finite mass of the dominating measure."""
        total = float(np.sum(self.probs)) * (1.0 + self.probs.size * _U)
        return total + math.sqrt(self.probs.size) * self.error

    def compose(self, other: GridPLD, tail_mass: float) -> GridPLD:
        """The composition with ``other`` (same grid), the tails of mass ≤ ``tail_mass`` each moved up."""
        if self.interval != other.interval or self.upper != other.upper:
            raise ValueError("PLDs on different grids or bounding from different sides")
        probs, conv_error = _convolve(self.probs, other.probs, self.upper)
        error = self.error * other.mass_bound() + self.mass_bound() * other.error + conv_error
        lo = self.lo + other.lo
        if not self.upper:  # exact ∞ mass, rounded down; both tails dropped
            infinity = (self.infinity + other.infinity - self.infinity * other.infinity) * (1.0 - 4.0 * _U)
            return GridPLD(self.interval, lo, probs, infinity, error, upper=False)
        infinity = min(1.0, self.infinity + other.infinity)
        return _truncated(self.interval, lo, probs, infinity, error, tail_mass)

    def self_compose(self, count: int, tail_mass: float) -> GridPLD:
        """The composition of ``count`` ≥ 1 copies, by repeated squaring."""
        result: GridPLD | None = None
        power: GridPLD = self
        while True:
            if count & 1:
                result = power if result is None else result.compose(power, tail_mass)
            count >>= 1
            if not count:
                assert result is not None
                return result
            power = power.compose(power, tail_mass)

    def _positive(self) -> tuple[np.ndarray, np.ndarray]:
        """The losses > 0 and their masses."""
        losses = (self.lo + np.arange(self.probs.size)) * self.interval
        keep = losses > 0.0
        return losses[keep], self.probs[keep]

    def delta_for_epsilon(self, epsilon: float) -> float:
        """An upper bound on δ(ε) of the exact composition this PLD bounds, for ε ≥ 0."""
        losses, probs = self._positive()
        above = losses > epsilon
        terms = probs[above] * -np.expm1(epsilon - losses[above])
        slack = math.sqrt(terms.size) * self.error
        if not self.upper:
            return max(0.0, float(np.sum(terms)) * (1.0 - _SUM_REL) + self.infinity - slack)
        value = float(np.sum(terms)) * (1.0 + _SUM_REL) + self.infinity
        return min(1.0, value + slack)

    def epsilon_for_delta(self, delta: float) -> float:
        """The least ε ≥ 0 whose bound on δ(ε) is at most ``delta`` (+∞ if none): an upper bound on the
        exact composition's ε (``upper``), else a lower bound.

        On the segment between consecutive grid losses ℓ_j < ε ≤ ℓ_{j+1} the stored curve is
        A − e^ε·B with A = Σ_{i>j} pᵢ and B = Σ_{i>j} pᵢe^{−ℓᵢ}. For an upper bound A is raised by κ and
        B lowered by 4κ (its running log-sum-exp has at most twice the plain sums' error per term), and
        √K·E is added to P_∞ (K: the grid losses above the segment's start); for a lower bound each the
        other way. Then ε = ln((A' − t)/B') with t = δ − P_∞ ∓ √K·E.
        """
        side = 1.0 if self.upper else -1.0
        losses, probs = self._positive()
        if losses.size == 0:
            return 0.0 if delta >= self.infinity else math.inf
        above = np.arange(losses.size, 0, -1)
        budgets = delta - self.infinity - side * np.sqrt(above) * self.error
        if budgets[-1] < 0.0:
            return math.inf
        # suffix sums from the top: A_j (mass above loss j) and ln B_j (ln Σ pᵢe^{−ℓᵢ} above it)
        mass_above = np.cumsum(probs[::-1])[::-1] * (1.0 + side * _SUM_REL)
        with np.errstate(divide="ignore"):
            log_weighted = np.logaddexp.accumulate((np.log(probs) - losses)[::-1])[::-1]
        log_weighted += math.log1p(-4.0 * side * _SUM_REL)
        # the curve at the start of each segment: ε = 0, then each grid loss
        starts = np.concatenate(([0.0], losses[:-1]))
        crossing = np.nonzero(mass_above - np.exp(starts + log_weighted) > budgets)[0]
        if crossing.size == 0:
            return 0.0
        j = int(crossing[-1])  # the segment (starts[j], losses[j]] where the target is crossed
        if budgets[j] < 0.0:
            return math.inf
        epsilon = math.log(float(mass_above[j]) - float(budgets[j])) - float(log_weighted[j])
        return min(max(epsilon, float(starts[j])), float(losses[j]))


def rounded_down(interval: float, losses: np.ndarray, masses: np.ndarray, infinity: float) -> GridPLD:
    """A PLD dominated by the one with ``masses`` at ``losses`` (and ``infinity`` at +∞): each loss rounded
    down to the grid, each mass lowered by 4u relative (it may carry a few ulps of rounding).

    Moving mass to a smaller loss, or removing mass, lowers every later curve (module notes, 2, mirrored),
    so its compositions bound the exact ε from below.
    """
    index = np.floor(np.asarray(losses) / interval).astype(np.int64)
    lo = int(index.min())
    probs = np.zeros(int(index.max()) - lo + 1)
    np.add.at(probs, index - lo, np.maximum(np.asarray(masses) * (1.0 - 4.0 * _U), 0.0))
    return GridPLD(interval, lo, probs, infinity * (1.0 - 4.0 * _U), 0.0, upper=False)


def connect_dots(points: Sequence[int], interval: float, profile: Callable[[float], float]) -> GridPLD:
    """The pessimistic connect-the-dots PLD with support ``points``·``interval`` of a privacy profile.

    Masses (Doroshenko et al. 2022, Algorithm 1, written in the quotients that keep their accuracy):
    pⱼ = (δ_{j+1} − δ_j)/(e^{ε_{j+1}−ε_j} − 1) + (δ_{j−1} − δ_j)/(1 − e^{ε_{j−1}−ε_j}), with δ₋₁ = 1 at
    ε₋₁ = −∞ and no first quotient for the last point; P_∞ = δ_k. See the module notes for why its curve
    is above the profile everywhere.
    """
    grid = np.asarray(sorted(points), dtype=np.int64)
    if grid.size == 0 or np.any(np.diff(grid) <= 0):
        raise ValueError("connect_dots needs distinct grid points")
    eps = grid * interval
    deltas = np.minimum(1.0, np.array([profile(float(x)) for x in eps]) * (1.0 + _PROFILE_RAISE))
    deltas = np.minimum.accumulate(deltas)  # non-increasing against rounding in the last place
    gaps = np.diff(eps)
    falls = deltas[:-1] - deltas[1:]  # ≥ 0
    down = np.concatenate((-falls / np.expm1(gaps), [0.0]))  # the quotient toward the next point
    up = np.concatenate(([1.0 - deltas[0]], falls / -np.expm1(-gaps)))  # toward the previous one
    probs = np.maximum(down + up, 0.0) + 4.0 * _U * (np.abs(down) + np.abs(up))
    lo = int(grid[0])
    dense = np.zeros(int(grid[-1]) - lo + 1)
    dense[grid - lo] = probs
    return GridPLD(interval, lo, dense, float(deltas[-1]), 0.0)


def _fft_constant(n: int) -> float:
    stages = math.log2(n) + 1.0
    rho = stages * _FFT_ETA
    return 4.0 * rho / (1.0 - rho)


def _convolve(a: np.ndarray, b: np.ndarray, upper: bool) -> tuple[np.ndarray, float]:
    """a * b and a bound on the ℓ2 error it adds (module notes, 3); a direct result is raised (``upper``)
    or lowered by its relative bound."""
    out = a.size + b.size - 1
    if a.size * b.size <= _DIRECT_WORK:
        # each output is a sum of at most min(|a|, |b|) non-negative products: relative error ≤ γ_{n+1}
        n = min(a.size, b.size) + 1
        return np.convolve(a, b) * (1.0 + (2.0 if upper else -2.0) * n * _U), 0.0
    size = fft.next_fast_len(out, real=True)
    result = fft.irfft(fft.rfft(a, size) * fft.rfft(b, size), size)[:out]
    bound = _fft_constant(size) * (
        float(np.linalg.norm(a)) * float(np.sum(b)) + float(np.sum(a)) * float(np.linalg.norm(b))
    )
    return np.maximum(result, 0.0), bound


def _truncated(
    interval: float, lo: int, probs: np.ndarray, infinity: float, error: float, tail_mass: float
) -> GridPLD:
    """Move the upper tail of mass ≤ ``tail_mass`` to +∞ and the lower one to the first kept point."""
    if tail_mass > 0.0 and probs.size > 1:
        head = np.cumsum(probs)
        first = int(np.searchsorted(head, tail_mass, side="right"))  # bins [0, first) hold ≤ tail_mass
        tail = np.cumsum(probs[::-1])
        cut = int(np.searchsorted(tail, tail_mass, side="right"))  # the last `cut` bins hold ≤ tail_mass
        last = probs.size - cut  # keep [first, last)
        if first < last:
            grow = 1.0 + probs.size * _U
            moved_down = float(head[first - 1]) * grow + math.sqrt(first) * error if first else 0.0
            moved_up = float(tail[cut - 1]) * grow + math.sqrt(cut) * error if cut else 0.0
            kept = probs[first:last].copy()
            kept[0] += moved_down
            return GridPLD(interval, lo + first, kept, min(1.0, infinity + moved_up), error)
    return GridPLD(interval, lo, probs, infinity, error)
