"""What every mechanism offers in the same form."""

from __future__ import annotations

import inspect

import pytest

import dp_pipeline.mechanisms as mechanisms
from dp_pipeline.mechanisms import Mechanism

CLASSES = [
    cls
    for cls in (getattr(mechanisms, name) for name in mechanisms.__all__)
    if inspect.isclass(cls) and issubclass(cls, Mechanism) and not inspect.isabstract(cls)
]


def test_the_mechanisms_are_all_listed() -> None:
    assert {cls.__name__ for cls in CLASSES} >= {"Laplace", "Gaussian", "Staircase", "BoundedLaplace"}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("member", ["variance", "guarantee", "event"])
def test_a_member_is_a_property_wherever_it_exists(cls: type[Mechanism], member: str) -> None:
    found = inspect.getattr_static(cls, member, None)
    assert found is None or isinstance(found, property), f"{cls.__name__}.{member} is {type(found).__name__}"


def test_the_additive_mechanisms_have_a_variance() -> None:
    for cls in (mechanisms.Laplace, mechanisms.Gaussian, mechanisms.Staircase):
        assert isinstance(inspect.getattr_static(cls, "variance"), property)
