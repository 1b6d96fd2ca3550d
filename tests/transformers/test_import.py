"""scikit-learn is an extra: without it, importing dp_pipeline.transformers names what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes  # every test runs a fresh interpreter


def test_import_without_sklearn_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['sklearn'] = None\n"
        "try:\n"
        "    import dp_pipeline.transformers\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 'pip install "dp-pipeline[sklearn]"' in result.stdout
