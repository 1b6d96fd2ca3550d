"""Golden replay: the accounting core gives the verdicts, totals, reports and allocations it gave when
``data/golden/golden.json`` was recorded (see :mod:`tests.accounting.golden`).

The golden file was written by the code before the policy and the reducer were introduced; these tests are
the gate that the two implementations decide the same: ``verify()``'s verdict on every recorded ledger (a
problem's message included), every dataset's head totals (exact decimal strings) and reports, the history,
which calls the scenario saw refused, and every allocation bit for bit.

Bit for bit holds with the numerical libraries the file was recorded with (numpy and scipy as ``uv.lock``
pins them). Other builds round a plan's PLD and an allocation's root-finding a few ulps apart, so with them
(the newest-versions run) every number is compared to 10 significant digits instead; verdicts, kinds, keys
and every other field still compare exactly.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy

from tests.accounting import golden

EXPECTED: dict[str, Any] = json.loads(golden.GOLDEN_JSON.read_text(encoding="utf-8"))

_LOCK = tomllib.loads((Path(__file__).parents[2] / "uv.lock").read_text(encoding="utf-8"))
_LOCKED = {p["name"]: p["version"] for p in _LOCK["package"] if p["name"] in ("numpy", "scipy")}
RECORDED_LIBRARIES = {"numpy": np.__version__, "scipy": scipy.__version__} == _LOCKED
_HEX = re.compile(r"-?0x[0-9a-f]+(?:\.[0-9a-f]*)?p[+-]?\d+")
_DECIMAL = re.compile(r"-?\d+\.\d{10,}(?:[eE][+-]?\d+)?")


def _digits(value: float) -> str:
    return f"{value:.9e}"


def same(got: Any, expected: Any) -> bool:
    """``got == expected``: exactly with the recorded numerical libraries, else to 10 significant digits."""
    if RECORDED_LIBRARIES:
        return bool(got == expected)

    def rounded(data: Any) -> str:
        text = json.dumps(data, sort_keys=True)
        text = _HEX.sub(lambda m: _digits(float.fromhex(m.group())), text)
        return _DECIMAL.sub(lambda m: _digits(float(m.group())), text)

    return rounded(got) == rounded(expected)


def test_the_comparison_tells_ulps_from_a_change() -> None:
    """Within 10 digits: a few ulps pass; a change in the 9th digit, or of a word, does not."""
    a = {"std": [(1 / 3).hex()], "total": "0.33333333333333331", "verify": "ok"}
    ulps = {"std": [np.nextafter(1 / 3, 1).hex()], "total": "0.33333333333333337", "verify": "ok"}
    assert same(a, a) and not same(a, {**a, "verify": "failed"})
    assert not same(a, {**a, "total": "0.33333334333333331"})
    assert same(a, ulps) == (not RECORDED_LIBRARIES)


@pytest.mark.parametrize("name", sorted(EXPECTED["recorded"]))
def test_a_recorded_ledger_verifies_and_reports_as_before(name: str, tmp_path: Path) -> None:
    source = golden.GOLDEN / "scenario.db" if name == "golden/scenario.db" else golden.DATA / name
    assert same(golden.snapshot(golden._copy(source, tmp_path)), EXPECTED["recorded"][name])


def test_the_scenario_is_written_verified_and_allocated_as_before(tmp_path: Path) -> None:
    _, got = golden.fresh_scenario(tmp_path)
    assert same(got, EXPECTED["scenario"])


@pytest.mark.postgres
def test_the_scenario_on_postgresql_is_written_verified_and_allocated_as_on_sqlite(
    pg_url: str, tmp_path: Path
) -> None:
    _, got = golden.fresh_scenario(tmp_path, pg_url)
    assert same(got, EXPECTED["scenario"])
