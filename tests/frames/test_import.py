"""pandas is an extra: importing dp_pipeline.frames does not import it; a call without it names the extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes  # every test runs a fresh interpreter


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_does_not_import_pandas() -> None:
    result = run("import sys, dp_pipeline.frames; print('pandas' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_call_without_pandas_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "from dp_pipeline.frames import dp_count\n"
        "try:\n"
        "    dp_count(None, epsilon=1.0, accountant='unaccounted')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = run(code)
    assert result.returncode == 0, result.stderr
    assert 'pip install "dp-pipeline[pandas]"' in result.stdout
