"""Package hygiene: the public API, import direction, and no heavy imports in the core."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
@pytest.mark.processes
def test_core_import_needs_no_extra(heavy: str) -> None:
    modules = imported_after("import dp_pipeline, dp_pipeline.mechanisms, dp_pipeline.estimation")
    assert heavy not in {m.split(".")[0] for m in modules}


@pytest.mark.processes
def test_accounting_never_imports_mechanisms() -> None:
    modules = imported_after("import dp_pipeline.accounting, dp_pipeline.accounting._composition")
    assert not any(m.startswith("dp_pipeline.mechanisms") for m in modules)


@pytest.mark.processes
def test_dp_pipeline_never_imports_airflow_plugin() -> None:
    modules = imported_after("import dp_pipeline, dp_pipeline.accounting, dp_pipeline.transformers")
    assert not any(m.startswith(("airflow_plugin", "dp_pipeline.airflow")) for m in modules)


ROOT = Path(__file__).resolve().parents[1]


def _private_imports(path: Path) -> list[tuple[str, str]]:
    """(what is imported, the package it is private to) for each private module or name of this project
    that ``path`` imports: a private module ``P._m`` or a private name of a module of P is P's."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] not in ("dp_pipeline", "airflow_plugin"):
                continue
            private = next((i for i, p in enumerate(parts) if p[:1] == "_" and p[:2] != "__"), None)
            if private is not None:
                owner = parts[:private]
                if not ROOT.joinpath(*owner).is_dir():  # a name of a module: private to the module's package
                    owner = owner[:-1]
                found.append((name, ".".join(owner)))
    return found


# (importer, private module of another package) for each module that shares an
# implementation across the library's packages; made private by issue 24 (they were public modules).
# A pair goes when its importer uses a public name instead; the list only shrinks.
KNOWN_PRIVATE_IMPORTS = frozenset(
    {
        ("dp_pipeline._allocation", "dp_pipeline.accounting._policy"),
        ("dp_pipeline._allocation", "dp_pipeline.accounting._pricing"),
        ("dp_pipeline._spending", "dp_pipeline.accounting._spender"),
        ("dp_pipeline.accounting._accountant", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._incremental", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._payments", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._policy", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._pricing", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._records", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._reports", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting._verify", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.accounting.testing", "dp_pipeline.accounting.ledger._base"),
        ("dp_pipeline.cli._ledger", "dp_pipeline.accounting.ledger._privileges"),
        ("dp_pipeline.estimation", "dp_pipeline.mechanisms._randomized_response"),
        ("dp_pipeline.frames._core", "dp_pipeline.accounting._partitions"),
        ("dp_pipeline.spark._bounding", "dp_pipeline.frames._engine"),
        ("dp_pipeline.spark._engine", "dp_pipeline.frames._common"),
        ("dp_pipeline.spark._engine", "dp_pipeline.frames._engine"),
        ("dp_pipeline.spark._engine", "dp_pipeline.frames._registry"),
        ("dp_pipeline.spark._keys", "dp_pipeline.frames._common"),
        ("dp_pipeline.transformers._bounded", "dp_pipeline.mechanisms._staircase"),
    }
)


def _foreign_private_imports(package: str) -> set[tuple[str, str]]:
    """(importer, private module) for each private module (or name in one) of another package imported."""
    found = set()
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        is_package = path.name == "__init__.py"
        importer = module.removesuffix(".__init__") if is_package else module.rpartition(".")[0]
        for name, owner in _private_imports(path):
            if not (importer == owner or importer.startswith(owner + ".")):
                parts = name.split(".")
                private = next(i for i, p in enumerate(parts) if p[:1] == "_" and p[:2] != "__")
                found.add((module.removesuffix(".__init__"), ".".join(parts[: private + 1])))
    return found


@pytest.mark.parametrize("package", ["dp_pipeline", "airflow_plugin"])
def test_no_package_imports_another_packages_private_module_or_name(package: str) -> None:
    assert sorted(_foreign_private_imports(package) - KNOWN_PRIVATE_IMPORTS) == []


def test_every_known_private_import_is_still_made() -> None:
    found = _foreign_private_imports("dp_pipeline") | _foreign_private_imports("airflow_plugin")
    assert sorted(KNOWN_PRIVATE_IMPORTS - found) == [], "gone: remove them from KNOWN_PRIVATE_IMPORTS"



@pytest.mark.processes
def test_the_wheel_carries_both_type_markers_one_license_and_the_project_urls(tmp_path: Path) -> None:
    """What users install: py.typed in both packages, the SPDX license expression and no license
    classifier beside it, and the project's URLs (read from the built wheel's METADATA)."""
    import shutil
    import zipfile

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed (make env installs it)")
    root = Path(__file__).resolve().parents[1]
    build = [uv, "build", "--wheel", "--quiet", "-o", str(tmp_path), str(root)]
    subprocess.run(build, check=True, timeout=300)
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode("utf-8").splitlines()
    assert {"dp_pipeline/py.typed", "airflow_plugin/py.typed"} <= names
    assert "License-Expression: Apache-2.0" in lines
    assert not [line for line in lines if line.startswith("Classifier: License ::")]
    assert {line.split(",")[0] for line in lines if line.startswith("Project-URL:")} >= {
        "Project-URL: Homepage",
        "Project-URL: Changelog",
    }
