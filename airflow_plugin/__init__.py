"""The former name of :mod:`dp_pipeline.airflow`, dp-pipeline's Apache Airflow 3 integration; kept so that
existing imports keep working.

``airflow_plugin`` is a generic top-level name, and Airflow loads every file of its plugins folder under
the file's own name (and puts the folder on ``sys.path``): a user's ``plugins/airflow_plugin.py`` takes the
name over. So the integration lives in :mod:`dp_pipeline.airflow`, which the entry points, the examples and
the docs use, and which no user file can shadow; the plugin names a shadowing file when it loads
(:func:`dp_pipeline.airflow.plugin.shadowing_module`).

Here ``airflow_plugin.X`` *is* the module ``dp_pipeline.airflow.X`` (one module object under two names,
so classes, exceptions and caches are the same), ``from airflow_plugin import PrivacyBudgetOperator``
is ``dp_pipeline.airflow.PrivacyBudgetOperator``, and ``python -m airflow_plugin.check`` runs
``dp_pipeline.airflow.check``. Nothing is imported before it is asked for, as in :mod:`dp_pipeline.airflow`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

import dp_pipeline.airflow as _home

if TYPE_CHECKING:
    from dp_pipeline.airflow import *  # noqa: F403

__all__ = list(_home.__all__)

_HOME = _home.__name__


def _home_name(alias: str) -> str:
    return _HOME + alias.removeprefix(__name__)


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``airflow_plugin.X`` as the already-imported (or now imported) ``dp_pipeline.airflow.X``."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(__name__ + ".") or sys.modules.get(__name__) is not _THIS:
            return None
        home = importlib.util.find_spec(_home_name(fullname))
        if home is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, self, is_package=home.submodule_search_locations is not None
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(_home_name(spec.name))
        self._specs[spec.name] = module.__spec__  # the import system overwrites it with the alias's
        return module

    def exec_module(self, module: ModuleType) -> None:
        if module.__spec__ is not None:  # the home module ran when it was imported: restore its spec
            module.__spec__ = self._specs.pop(module.__spec__.name)

    def get_code(self, fullname: str) -> CodeType | None:
        """The home module's code, for ``python -m airflow_plugin.X``."""
        home = importlib.util.find_spec(_home_name(fullname))
        loader = home.loader if home is not None else None
        if not isinstance(loader, importlib.abc.InspectLoader):
            return None
        return loader.get_code(_home_name(fullname))


_THIS = sys.modules[__name__]
if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.append(_AliasFinder())


def __getattr__(name: str) -> Any:
    return getattr(_home, name)


def __dir__() -> list[str]:
    return dir(_home)
