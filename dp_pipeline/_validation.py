"""Shared validation of numbers and arrays, raising InvalidParameterError that names the parameter."""

from __future__ import annotations

import decimal
import math
import numbers
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from dp_pipeline.exceptions import InvalidParameterError, data_value_error

__all__ = [
    "FiniteFloat",
    "ValidatedModel",
    "as_real",
    "check_array",
    "check_positive_int",
    "check_real",
    "check_sequence",
    "divide_down",
    "divide_up",
    "root_sum_squares_up",
    "round_up",
    "sqrt_up",
    "subtract_up",
    "sum_up",
    "times_up",
]


def as_real(value: Any) -> float:
    """Return ``value`` as a finite float; reject bools, strings, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"must be a real number, got {type(value).__name__}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"must be finite, got {result}")
    return result + 0.0  # -0.0 becomes 0.0: a parameter is recorded and printed as 0, never as -0


FiniteFloat = Annotated[float, BeforeValidator(as_real)]
"""A finite real number; ints and numpy scalars are accepted, strings and bools are not."""


def _message(exc: ValidationError, owner: str) -> tuple[str, str | None]:
    error = exc.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in error["loc"])
    text = str(error["msg"]).removeprefix("Value error, ")
    if loc:
        return f"{owner}: invalid parameter {loc!r}: {text}", loc
    return f"{owner}: {text}", None


M = TypeVar("M", bound="ValidatedModel")


class ValidatedModel(BaseModel):
    """Frozen pydantic model whose validation errors surface as InvalidParameterError."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def __init__(self, /, **data: Any) -> None:
        refusal: InvalidParameterError | None = None
        try:
            super().__init__(**data)
        except ValidationError as exc:
            refusal = InvalidParameterError(*_message(exc, type(self).__name__))
        if refusal is not None:  # raised outside the handler: the ValidationError quotes the input values
            raise refusal


def check_array(values: Any, name: str = "values", *, allow_empty: bool = False) -> NDArray[np.float64]:
    """Return ``values`` as a float64 array with only finite entries, or raise InvalidParameterError."""
    if isinstance(values, (str, bytes)):
        raise InvalidParameterError(f"{name!r} must be numeric array-like, got a string", name)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name!r} must be numeric array-like (not ragged)", name) from None
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.number)):
        raise InvalidParameterError(f"{name!r} must be numeric, got dtype {array.dtype}", name)
    if np.iscomplexobj(array):
        raise InvalidParameterError(f"{name!r} must be real, got complex values", name)
    array = array.astype(np.float64, copy=False)
    if array.size == 0 and not allow_empty:
        raise InvalidParameterError(f"{name!r} is empty", name)
    finite = np.isfinite(array)
    if not np.all(finite):
        bad = int(finite.size - np.count_nonzero(finite))
        raise data_value_error(repr(name), bad, "NaN or infinite", name)
    return array


def check_positive_int(value: Any, name: str) -> int:
    """Return ``value`` as a positive int, or raise InvalidParameterError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise InvalidParameterError(f"{name!r} must be a positive integer, got {value!r}", name)
    return int(value)


def check_real(value: Any, name: str) -> float:
    """Return ``value`` as a finite float, or raise InvalidParameterError naming ``name``."""
    try:
        return as_real(value)
    except ValueError as exc:
        raise InvalidParameterError(f"{name!r} {exc}", name) from None


def check_sequence(values: Any, name: str) -> list[Any]:
    """Return ``values`` (a list or a tuple, not a string) as a list, or raise InvalidParameterError."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidParameterError(
            f"{name!r} must be a sequence (list or tuple), got {type(values).__name__}", name
        )
    return list(values)


# Directed rounding of derived privacy parameters. IEEE arithmetic rounds to nearest, which is below the
# exact result half of the time; a noise scale, a sensitivity or a privacy loss derived from the user's
# parameters is instead rounded toward more noise or more loss, by comparing with the exact rational.


def round_up(exact: Fraction) -> float:
    """The least double not below ``exact``; +∞ beyond the largest."""
    try:
        value = float(exact)
    except OverflowError:
        return math.inf
    if math.isfinite(value) and Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    return value


def sum_up(values: Sequence[float]) -> float:
    """Σ values, summed exactly at the doubles' binary values and rounded up.

    A mechanism calibrated with the double 0.1 can lose 0.1000000000000000055…, so ten of them cost
    1.0000000000000002, not 1.
    """
    return round_up(sum((Fraction(v) for v in values), Fraction(0)))


def root_sum_squares_up(values: Sequence[float]) -> float:
    """√(Σ vᵢ²) of the exact values, rounded up: the least double whose exact square is ≥ the sum."""
    exact = sum((Fraction(v) ** 2 for v in values), Fraction(0))
    with decimal.localcontext() as context:
        context.prec = 40
        root = float((decimal.Decimal(exact.numerator) / decimal.Decimal(exact.denominator)).sqrt())  # ±1 ulp
    while root > 0.0 and Fraction(math.nextafter(root, -math.inf)) ** 2 >= exact:
        root = math.nextafter(root, -math.inf)
    while Fraction(root) ** 2 < exact:
        root = math.nextafter(root, math.inf)
    return root


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


def sqrt_up(value: float | Fraction) -> float:
    """√value rounded up to a double (value ≥ 0, a float or an exact Fraction): the 60-digit root rounded
    up, then the double not below it. Decimal arithmetic, so tiny and huge values neither underflow nor
    overflow on the way."""
    exact = Fraction(value)
    with decimal.localcontext() as context:
        context.prec = 60
        context.rounding = decimal.ROUND_CEILING
        root = (decimal.Decimal(exact.numerator) / decimal.Decimal(exact.denominator)).sqrt()
    result = float(root)
    if math.isfinite(result) and Fraction(result) < Fraction(root):
        result = math.nextafter(result, math.inf)
    return result


_LARGEST_DOUBLE = Fraction(sys.float_info.max)


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
