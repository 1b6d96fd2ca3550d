"""Every bad number given to a guarantee, a mechanism or the command is a library error, never a raw one.

Python's ``float()`` raises OverflowError for an int or a Fraction beyond the largest float (10**400), not a
ValueError; a constructor that let it through raised a bare OverflowError, and the command showed it as an
"unexpected" error with exit 1. The fuzz below feeds huge and tiny ints, floats, Decimals, Fractions, strings
and None to every public constructor, and accepts only a valid object or an InvalidParameterError.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, GaussianDP, PureDP
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    Exponential,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)

HUGE = 10**400  # float(HUGE) raises OverflowError
AMOUNTS = st.one_of(
    st.integers(min_value=-(10**500), max_value=10**500),
    st.sampled_from([HUGE, -HUGE, 2**1024, -(2**1024), Fraction(HUGE, 3), Fraction(1, HUGE)]),
    st.sampled_from([Decimal("1e400"), Decimal("-1e400"), Decimal("1e-400"), Decimal("NaN")]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.0, max_value=1e-300),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
)

CONSTRUCTORS: dict[str, Callable[[Any, Any, Any], object]] = {
    "PureDP": lambda a, b, c: PureDP(a),
    "ApproxDP": lambda a, b, c: ApproxDP(a, b),
    "GaussianDP": lambda a, b, c: GaussianDP(a),
    "GaussianDP.delta": lambda a, b, c: GaussianDP(1.0).delta(a),
    "GaussianDP.to_approx_dp": lambda a, b, c: GaussianDP(1.0).to_approx_dp(a),
    "PureDP.group": lambda a, b, c: PureDP(1.0).group(a),
    "Laplace": lambda a, b, c: Laplace(epsilon=a, sensitivity=b),
    "Gaussian": lambda a, b, c: Gaussian(epsilon=a, delta=c, sensitivity=b),
    "Staircase": lambda a, b, c: Staircase(epsilon=a, sensitivity=b),
    "BoundedLaplace": lambda a, b, c: BoundedLaplace(epsilon=a, sensitivity=1.0, lower=b, upper=c),
    "BoundedStaircase": lambda a, b, c: BoundedStaircase(epsilon=a, sensitivity=1.0, lower=b, upper=c),
    "BinaryRandomizedResponse": lambda a, b, c: BinaryRandomizedResponse(epsilon=a),
    "KRandomizedResponse": lambda a, b, c: KRandomizedResponse(epsilon=a, categories=[1, 2, 3]),
    "Exponential": lambda a, b, c: Exponential(epsilon=a, sensitivity=b, candidates=[1, 2]),
}


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_a_number_beyond_the_largest_float_is_an_invalid_parameter(name: str) -> None:
    with pytest.raises(InvalidParameterError, match=r"largest float|must be"):
        CONSTRUCTORS[name](HUGE, HUGE, HUGE)


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=AMOUNTS, b=AMOUNTS, c=AMOUNTS)
def test_constructors_accept_or_refuse_with_a_library_error(name: str, a: Any, b: Any, c: Any) -> None:
    with contextlib.suppress(InvalidParameterError):
        CONSTRUCTORS[name](a, b, c)


def test_an_overlong_sqlite_path_is_a_ledger_url_error(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from dp_pipeline import PrivacyAccountant
    from dp_pipeline.exceptions import LedgerError

    for path in (tmp_path / ("a" * 300) / "ledger.db", tmp_path / ("b" * 5000)):
        with pytest.raises(InvalidParameterError, match=r"cannot use the ledger file .*File name too long"):
            PrivacyAccountant(f"sqlite:///{path}", create=True)
        with pytest.raises(LedgerError):
            PrivacyAccountant(f"sqlite:///{path}", create=None)
    assert list(tmp_path.iterdir()) == []


def _run(*argv: str) -> Any:
    from typer.testing import CliRunner

    from dp_pipeline.cli import app

    return CliRunner().invoke(app, list(argv))


def test_the_command_exits_2_for_bad_input_it_cannot_use(tmp_path: Path) -> None:
    pytest.importorskip("typer")
    long_path = tmp_path / ("a" * 300) / "ledger.db"
    result = _run("ledger", "init", "--ledger", f"sqlite:///{long_path}")
    assert result.exit_code == 2, result.output
    assert "File name too long" in result.output and "unexpected" not in result.output

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert _run("ledger", "init", "--ledger", url).exit_code == 0
    assert _run("budget", "set", "d", "--epsilon", "1", "--ledger", url).exit_code == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"mechanism": "laplace", "epsilon": HUGE, "sensitivity": 1}]))
    result = _run("plan", "check", "d", str(plan), "--ledger", url)
    assert result.exit_code == 2, result.output
    assert "beyond the largest float" in result.output and "unexpected" not in result.output
