"""Package hygiene: the public API, import direction, and no heavy imports in the core."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dp_pipeline


def imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_all_is_sorted_and_importable() -> None:
    assert list(dp_pipeline.__all__) == sorted(dp_pipeline.__all__)
    for name in dp_pipeline.__all__:
        assert hasattr(dp_pipeline, name), name


@pytest.mark.parametrize(
    "heavy", ["sqlalchemy", "alembic", "dp_accounting", "sklearn", "pandas", "airflow", "matplotlib"]
)
def test_core_import_needs_no_extra(heavy: str) -> None:
    modules = imported_after("import dp_pipeline, dp_pipeline.mechanisms, dp_pipeline.estimation")
    assert heavy not in {m.split(".")[0] for m in modules}


def test_accounting_never_imports_mechanisms() -> None:
    modules = imported_after("import dp_pipeline.accounting, dp_pipeline.accounting.composition")
    assert not any(m.startswith("dp_pipeline.mechanisms") for m in modules)


def test_dp_pipeline_never_imports_airflow_plugin() -> None:
    modules = imported_after("import dp_pipeline, dp_pipeline.accounting, dp_pipeline.transformers")
    assert not any(m.startswith("airflow_plugin") for m in modules)
