"""Golden replay: the accounting core gives the verdicts, totals, reports and allocations it gave when
``data/golden/golden.json`` was recorded (see :mod:`tests.accounting.golden`).

The golden file was written by the code before the policy and the reducer were introduced; these tests are
the gate that the two implementations decide the same: ``verify()``'s verdict on every recorded ledger (a
problem's message included), every dataset's head totals (exact decimal strings) and reports, the history,
which calls the scenario saw refused, and every allocation bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.accounting import golden

EXPECTED: dict[str, Any] = json.loads(golden.GOLDEN_JSON.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(EXPECTED["recorded"]))
def test_a_recorded_ledger_verifies_and_reports_as_before(name: str, tmp_path: Path) -> None:
    source = golden.GOLDEN / "scenario.db" if name == "golden/scenario.db" else golden.DATA / name
    assert golden.snapshot(golden._copy(source, tmp_path)) == EXPECTED["recorded"][name]


def test_the_scenario_is_written_verified_and_allocated_as_before(tmp_path: Path) -> None:
    _, got = golden.fresh_scenario(tmp_path)
    assert got == EXPECTED["scenario"]


@pytest.mark.postgres
def test_the_scenario_on_postgresql_is_written_verified_and_allocated_as_on_sqlite(
    pg_url: str, tmp_path: Path
) -> None:
    _, got = golden.fresh_scenario(tmp_path, pg_url)
    assert got == EXPECTED["scenario"]
