"""The package surface on real Airflow 3.3: the public names, and the optional extra named when Airflow
is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.airflow_plugin.conftest import REPO

pytestmark = pytest.mark.airflow


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )


def test_public_contract_imports() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from dp_pipeline import BudgetExceededError
    from dp_pipeline.airflow import PrivacyBudgetExhausted, PrivacyBudgetOperator, dp_task

    assert callable(dp_task)
    assert issubclass(PrivacyBudgetExhausted, AirflowFailException)
    assert issubclass(PrivacyBudgetExhausted, BudgetExceededError)
    assert PrivacyBudgetOperator.__module__ == "dp_pipeline.airflow.operators"


@pytest.mark.processes
def test_import_without_airflow_names_the_extra() -> None:
    # sys.modules[name] = None is how Python marks a module as not importable
    for name in ("dp_pipeline.airflow", "airflow_plugin"):
        result = _run_python(f"import sys; sys.modules['airflow'] = None; import {name}")
        assert result.returncode != 0
        assert "ImportError" in result.stderr
        assert 'pip install "dp-pipeline[airflow]"' in result.stderr
