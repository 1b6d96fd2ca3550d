"""PySpark is an extra: the pandas functions never import it; only a Spark DataFrame brings it in."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.processes]  # a fresh interpreter


def test_the_pandas_functions_do_not_import_pyspark() -> None:
    code = (
        "import sys, pandas as pd\n"
        "from dp_pipeline.frames import dp_mean\n"
        "df = pd.DataFrame({'x': [1.0, 2.0]})\n"
        "dp_mean(df, 'x', lower=0, upper=3, epsilon=1.0, accountant='unaccounted')\n"
        "print(any(m.split('.')[0] == 'pyspark' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
