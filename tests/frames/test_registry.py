"""The engine registry: engines are asked whether they accept a frame; the frames never import an engine
above them, and build each release from explicit arguments (no ``locals()``)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError
from dp_pipeline.frames import _registry as registry
from dp_pipeline.frames import dp_count
from dp_pipeline.frames._pandas import PandasEngine
from dp_pipeline.frames._registry import ENTRY_POINT_GROUP, engine_of, register_engine

ROOT = Path(__file__).resolve().parents[2]
FRAMES = ROOT / "dp_pipeline" / "frames"


class _Rows(list):  # type: ignore[type-arg]
    """A frame type no built-in engine reads."""


class _RowsEngine(PandasEngine):
    """An engine for :class:`_Rows`: it reads them as a pandas frame."""

    @classmethod
    def accepts(cls, df: Any) -> bool:
        return isinstance(df, _Rows)

    @classmethod
    def of(cls, df: Any) -> PandasEngine:
        return cls(pd.DataFrame({"x": list(df)}))


@pytest.fixture
def registered() -> Iterator[None]:
    before = list(registry._ENGINES)
    yield
    registry._ENGINES[:] = before


def test_a_pandas_frame_is_read_by_the_built_in_engine() -> None:
    assert isinstance(engine_of(pd.DataFrame({"x": [1]})), PandasEngine)


def test_a_registered_engine_is_asked_and_reads_its_frames(registered: None) -> None:
    with pytest.raises(InvalidParameterError) as info:
        engine_of(_Rows([1, 2]))
    assert info.value.parameter == "df"
    register_engine(_RowsEngine)
    register_engine(_RowsEngine)  # once
    assert registry._ENGINES.count(_RowsEngine) == 1
    out = dp_count(_Rows([1.0, 2.0, 3.0]), epsilon=50.0, accountant="unaccounted")
    assert out["value"] == pytest.approx(3, abs=2)  # Laplace scale 1/50: |noise| < 2 all but ~e^-100


def test_no_engine_accepts_anything_else() -> None:
    with pytest.raises(InvalidParameterError, match="pandas or Spark DataFrame") as info:
        dp_count([1, 2, 3], epsilon=1.0, accountant="unaccounted")
    assert info.value.parameter == "df"


def test_the_spark_engine_is_declared_as_an_entry_point() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[ENTRY_POINT_GROUP] == {"spark": "dp_pipeline.spark._engine:SparkEngine"}


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _by_name(path: Path) -> Iterator[str]:
    """The modules ``path`` imports by name (``importlib.import_module("...")``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            yield ast.literal_eval(node.args[0])


def test_the_frames_import_no_engine_above_them_nor_any_of_the_package_by_name() -> None:
    for path in FRAMES.glob("*.py"):
        assert not [m for m in _imports(path) if m.startswith("dp_pipeline.spark")], path.name
        assert [m for m in _by_name(path) if m != "pandas"] == [], path.name  # pandas: an optional extra


def test_the_frames_build_releases_from_explicit_arguments() -> None:
    for path in FRAMES.glob("*.py"):
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals"
        ]
        assert calls == [], path.name


@pytest.mark.processes
def test_a_pandas_release_imports_no_spark() -> None:
    code = (
        "import sys, pandas as pd\n"
        "from dp_pipeline.frames import dp_count\n"
        "dp_count(pd.DataFrame({'x': [1]}), epsilon=1.0, accountant='unaccounted')\n"
        "assert not [m for m in sys.modules if m.startswith(('pyspark', 'dp_pipeline.spark'))]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)
