"""Shared validation of numbers and arrays, raising InvalidParameterError that names the parameter."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
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
]


def as_real(value: Any) -> float:
    """Return ``value`` as a finite float; reject bools, strings, NaN, infinities and numbers beyond the
    largest float (an int or a Fraction of magnitude ≥ 2¹⁰²⁴, whose ``float()`` raises OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"must be a real number, got {type(value).__name__}")
    try:
        result = float(value)
    except OverflowError:
        raise ValueError("must be finite, got a number beyond the largest float (about 1.8e308)") from None
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
