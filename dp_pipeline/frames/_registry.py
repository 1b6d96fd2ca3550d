"""Which engine reads a DataFrame: the engines registered, each asked whether it accepts the frame.

pandas is built in. Other engines register themselves under the entry-point group
``dp_pipeline.frame_engines`` (the Spark engine: ``spark = "dp_pipeline.spark._engine:SparkEngine"`` in
``pyproject.toml``), or by calling :func:`register_engine` when their module is imported (importing
:mod:`dp_pipeline.spark` registers the Spark engine, so it is found before the package's entry points are
installed). The entry points are loaded once, the first time a frame arrives that no engine registered so
far accepts (a pandas frame never loads them, so pandas users never import Spark); an entry point whose
package is missing (``ImportError``) is skipped.

This module imports no engine but pandas' own: the frames layer never imports an engine above it.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import Any, Protocol

from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._engine import Engine
from dp_pipeline.frames._pandas import PandasEngine

__all__ = ["ENTRY_POINT_GROUP", "EngineType", "engine_of", "register_engine"]

ENTRY_POINT_GROUP = "dp_pipeline.frame_engines"
"""The entry-point group an engine package registers its engine class under."""


class EngineType(Protocol):
    """An engine class as the registry uses it: it says whether it reads a frame, and wraps one."""

    def accepts(self, df: Any) -> bool:
        """Whether ``df`` is a frame of this engine (without reading it)."""

    def of(self, df: Any) -> Engine:
        """The engine reading ``df`` (a frame it accepts)."""


_ENGINES: list[EngineType] = [PandasEngine]


def register_engine(engine: EngineType) -> None:
    """Add ``engine`` to the engines asked (once; later registrations of it do nothing)."""
    if engine not in _ENGINES:
        _ENGINES.append(engine)


def engine_of(df: Any) -> Engine:
    """The engine of ``df``: the first registered engine that accepts it (loading the entry points of
    ``dp_pipeline.frame_engines`` when none does yet); InvalidParameterError naming ``df`` when no
    engine accepts it."""
    found = _accepting(df)
    if found is None:
        _load_entry_points()
        found = _accepting(df)
    if found is None:
        raise InvalidParameterError(
            f"'df' must be a pandas or Spark DataFrame, got {type(df).__name__}", "df"
        )
    return found.of(df)


def _accepting(df: Any) -> EngineType | None:
    return next((engine for engine in _ENGINES if engine.accepts(df)), None)


@functools.cache
def _load_entry_points() -> None:
    """Register the engines of the installed entry points (the first call only)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            register_engine(point.load())
        except ImportError:
            continue  # the engine's package (pyspark, ...) is not installed
