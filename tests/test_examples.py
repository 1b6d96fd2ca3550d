"""Every example script runs to completion and prints its result.

Examples under ``examples/airflow*`` need Airflow and are run by the Airflow tests; the bounded-mechanism
experiment takes arguments and an output directory and has its own test (tests/test_example_bounded.py).
Each script here runs as a subprocess from the repository root, as a user would run it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXCLUDED = {"bounded_staircase_vs_laplace.py"}

# What each script must print (regular expressions); scripts not listed must only exit 0 and print something.
EXPECTED: dict[str, list[str]] = {
    "dp_count_diabetics.py": [
        r"true count of diabetic patients: \d+",
        r"DP count \(Laplace, ε = 0\.5, scale 2\): [\d.]+, 95% interval \[[\d.]+, [\d.]+\]",
        r"spent on 'patients': ε = 0\.5",
        r"third count refused",
    ],
    "survey_yes_no.py": [
        r"estimated share of smokers: 0\.\d+ \(95% interval \[0\.\d+, 0\.\d+\]\)",
        r"spent on 'survey': ε = 1\b",
    ],
    "survey_multiple_choice.py": [
        r"k-RR over 5 answers at ε = 2\.0",
        r"(?m)^on foot\s+[-\d.]+\s+[\d.]+",
        r"remaining on 'commute-survey': ε = 0\b",
    ],
    "sklearn_pipeline.py": [
        r"after fit: spent on 'patients': ε = 4\b",
        r"after score: spent on 'patients': ε = 8\b",
        r"next fit refused: privacy budget of dataset 'patients' would be exceeded",
    ],
}


def scripts() -> list[str]:
    return sorted(
        p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("airflow") and p.name not in EXCLUDED
    )


def test_every_documented_example_exists() -> None:
    assert set(EXPECTED) <= set(scripts())


@pytest.mark.parametrize("name", scripts())
@pytest.mark.processes
def test_example_runs(name: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=EXAMPLES.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    for pattern in EXPECTED.get(name, []):
        assert re.search(pattern, result.stdout), f"{name}: no match for {pattern!r} in\n{result.stdout}"
