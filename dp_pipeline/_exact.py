"""Exact arithmetic, rounded toward more privacy loss: one module for the mechanisms and the accountant.

IEEE arithmetic rounds to nearest, which is below the exact result half of the time. A noise scale, a
sensitivity or a privacy loss derived from the user's parameters is instead rounded in the direction that
means more noise or more loss, by comparing with the exact value. Two kinds of function live here:

* **float results**, rounded in a stated direction: :func:`divide_up`, :func:`divide_down`,
  :func:`subtract_up`, :func:`times_up`, :func:`split_epsilon`, :func:`sqrt_up`, :func:`sqrt_down`,
  :func:`float_up`, :func:`float_down`, :func:`sum_up`, :func:`root_sum_squares_up`. Each compares with the
  exact rational (``fractions.Fraction``, which holds every double exactly) and moves by one unit in the
  last place when the float is on the wrong side.
* **exact decimal sums**, as the ledger keeps them: :func:`to_decimal` (a double's exact binary value),
  :func:`add`, :func:`subtract`, :func:`multiply`, :func:`square`, all exact (a result that would need
  rounding raises instead of being rounded), and :func:`decimal_up` (a rational rounded up to 40 digits).

A double's exact value has at most 309 digits before the point and 1074 after it, so a sum of them needs
under 1,400 digits and a sum of their squares (μ²) under 2,800, plus a few carries: the decimal context
holds 3,000 digits, with ``Inexact`` trapped.
"""

from __future__ import annotations

import decimal
import math
import sys
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from dp_pipeline.exceptions import InvalidParameterError

__all__ = [
    "add",
    "decimal_up",
    "divide_down",
    "divide_up",
    "float_down",
    "float_up",
    "multiply",
    "root_sum_squares_up",
    "split_epsilon",
    "sqrt_down",
    "sqrt_up",
    "square",
    "subtract",
    "subtract_up",
    "sum_up",
    "times_up",
    "to_decimal",
]

_EXACT = decimal.Context(
    prec=3000,
    Emax=100_000,
    Emin=-100_000,
    rounding=decimal.ROUND_HALF_EVEN,
    traps=[decimal.Inexact, decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero],
)
_APPROX_DIGITS = 40  # a first root or quotient, within an ulp of a double; corrected exactly afterwards
_LARGEST_DOUBLE = Fraction(sys.float_info.max)

Exact = float | int | Fraction | Decimal
"""A number whose exact value the functions read: a double's binary value, or an exact rational/decimal."""


# ------------------------------------------------------------------------------------------------------
# float results, rounded toward more privacy loss


def divide_up(numerator: float, denominator: float) -> float:
    """numerator/denominator rounded up: the least double not below the exact quotient (both > 0).

    An overflow gives +∞, which is not below any quotient.
    """
    quotient = numerator / denominator
    if math.isfinite(quotient) and Fraction(quotient) * Fraction(denominator) < Fraction(numerator):
        quotient = math.nextafter(quotient, math.inf)
    return quotient


def divide_down(numerator: float, denominator: float) -> float:
    """numerator/denominator rounded down: the greatest double not above the exact quotient (both > 0)."""
    quotient = numerator / denominator
    if Fraction(quotient) * Fraction(denominator) > Fraction(numerator):
        quotient = math.nextafter(quotient, 0.0)
    return quotient


def subtract_up(minuend: float, subtrahend: float) -> float:
    """minuend − subtrahend rounded up: the least double not below the exact difference (finite result)."""
    difference = minuend - subtrahend
    if Fraction(difference) < Fraction(minuend) - Fraction(subtrahend):
        difference = math.nextafter(difference, math.inf)
    return difference


def times_up(k: int, value: float) -> float:
    """k·value rounded up: the least double not below the exact product, for any int k (privacy loss never
    rounds down).

    A product beyond the largest double (a group of k people at a huge loss) is an InvalidParameterError
    naming k: no finite number bounds it.
    """
    exact = k * Fraction(value)
    if abs(exact) <= _LARGEST_DOUBLE:
        product = float(exact)
        if Fraction(product) < exact:
            product = math.nextafter(product, math.inf)
        if math.isfinite(product):
            return product
    raise InvalidParameterError(
        f"a group of k = {k} at {value!r} each: k × {value!r} exceeds the largest float, so no finite "
        "privacy loss bounds the group; lower the group size or the per-release loss",
        "k",
    )


def split_epsilon(epsilon: float, parts: int) -> float:
    """The largest float ε' ≤ ε/parts with parts·ε' ≤ ε exactly (basic composition never rounds up)."""
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


def _exactly(value: Exact) -> Any:
    """``value`` as an exact number to compare with: a Decimal stays one (the ledger's sums, compared
    without leaving decimal arithmetic), anything else becomes a Fraction."""
    return value if isinstance(value, Decimal) else Fraction(value)


def _exact_double(x: float, like: Any) -> Any:
    """The double ``x``'s exact value, of the same kind as ``like`` (Decimal or Fraction)."""
    return Decimal(x) if isinstance(like, Decimal) else Fraction(x)


def _exact_square(x: float, like: Any) -> Any:
    """x², exactly, of the same kind as ``like``."""
    return square(Decimal(x)) if isinstance(like, Decimal) else Fraction(x) ** 2


def float_up(value: Exact) -> float:
    """The least double whose exact value is ≥ ``value``; +∞ beyond the largest double."""
    exact = _exactly(value)
    try:
        result = float(exact)  # correctly rounded
    except OverflowError:
        return math.inf
    if math.isfinite(result) and _exact_double(result, exact) < exact:
        result = math.nextafter(result, math.inf)
    return result


def float_down(value: Exact) -> float:
    """The greatest double whose exact value is ≤ ``value``, and 0.0 for ``value`` ≤ 0: an amount of privacy
    loss left over is never negative."""
    exact = _exactly(value)
    if exact <= 0:
        return 0.0
    try:
        result = min(float(exact), sys.float_info.max)
    except OverflowError:
        return sys.float_info.max
    if _exact_double(result, exact) > exact:
        result = math.nextafter(result, 0.0)
    return result


def _approximate_root(exact: Any) -> float:
    """√exact to 40 digits as a double (within an ulp of the root; +∞ when the root overflows)."""
    context = decimal.Context(prec=_APPROX_DIGITS, Emax=100_000, Emin=-100_000)
    if isinstance(exact, Fraction):
        exact = context.divide(Decimal(exact.numerator), Decimal(exact.denominator))
    return float(context.sqrt(exact))


def sqrt_up(value: Exact) -> float:
    """The least double whose exact square is ≥ ``value`` (0.0 for ``value`` ≤ 0; +∞ beyond the largest).

    A first root from 40-digit decimal arithmetic (so that tiny and huge values neither underflow nor
    overflow on the way) is moved ulp by ulp until the exact squares bracket ``value``.
    """
    exact = _exactly(value)
    if exact <= 0:
        return 0.0
    root = _approximate_root(exact)
    if math.isinf(root):
        return root
    while root > 0.0 and _exact_square(math.nextafter(root, 0.0), exact) >= exact:
        root = math.nextafter(root, 0.0)
    while _exact_square(root, exact) < exact:
        root = math.nextafter(root, math.inf)
    return root


def sqrt_down(value: Exact) -> float:
    """The greatest double whose exact square is ≤ ``value`` (0.0 for ``value`` ≤ 0)."""
    exact = _exactly(value)
    if exact <= 0:
        return 0.0
    root = min(_approximate_root(exact), sys.float_info.max)
    while _exact_square(root, exact) > exact:
        root = math.nextafter(root, 0.0)
    while math.isfinite(after := math.nextafter(root, math.inf)) and _exact_square(after, exact) <= exact:
        root = after
    return root


def sum_up(values: Iterable[float]) -> float:
    """Σ values, summed exactly at the doubles' binary values and rounded up (:func:`float_up`).

    A mechanism calibrated with the double 0.1 can lose 0.1000000000000000055…, so ten of them cost
    1.0000000000000002, not 1.
    """
    return float_up(sum((Fraction(v) for v in values), Fraction(0)))


def root_sum_squares_up(values: Iterable[float]) -> float:
    """√(Σ vᵢ²) of the exact values, rounded up (:func:`sqrt_up`): the least double whose exact square is ≥
    the sum."""
    return sqrt_up(sum((Fraction(v) ** 2 for v in values), Fraction(0)))


# ------------------------------------------------------------------------------------------------------
# exact decimal sums


def to_decimal(value: float) -> Decimal:
    """A double's exact binary value as a decimal (0.1 → 0.1000000000000000055511151231257827…).

    A mechanism calibrated with the double ε = 0.1 can lose exactly that much, which is more than the 1/10
    that its shortest repr reads; the ledger records and compares amounts at this exact value.
    """
    return Decimal(float(value))


def add(a: Decimal, b: Decimal) -> Decimal:
    """a + b, exactly (``decimal.Inexact`` if the sum needed more than 3,000 digits)."""
    return _EXACT.add(a, b)


def subtract(a: Decimal, b: Decimal) -> Decimal:
    """a − b, exactly."""
    return _EXACT.subtract(a, b)


def multiply(a: Decimal, b: Decimal) -> Decimal:
    """a · b, exactly."""
    return _EXACT.multiply(a, b)


def square(a: Decimal) -> Decimal:
    """a², exactly."""
    return _EXACT.multiply(a, a)


def decimal_up(value: Fraction) -> Decimal:
    """``value`` rounded up to a 40-digit decimal: never below it, and exact when 40 digits hold it."""
    context = decimal.Context(prec=_APPROX_DIGITS, rounding=decimal.ROUND_CEILING)
    return context.divide(Decimal(value.numerator), Decimal(value.denominator))
