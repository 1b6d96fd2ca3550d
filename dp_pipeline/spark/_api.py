"""The PySpark API a DataFrame belongs to: classic (a JVM in this process) or Spark Connect (a client).

A classic DataFrame and a Spark Connect one share the ``pyspark.sql.DataFrame`` interface, but their
columns and windows are different classes: a classic column in a Connect plan (or the reverse) fails when
the plan is built. ``pyspark.sql.functions`` picks the Connect functions only when the process is in
Connect mode (``SPARK_CONNECT_MODE_ENABLED``), which a Connect client made with an ``sc://`` address in a
process that also runs a classic session is not. So the Spark engine takes its functions and its window
from the DataFrame (or column) it works on, never from the process.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from pyspark.sql import functions as classic_functions
from pyspark.sql.window import Window as ClassicWindow

__all__ = ["functions_of", "is_connect", "window_of"]

_CONNECT_CLASSES = (("pyspark.sql.connect.dataframe", "DataFrame"), ("pyspark.sql.connect.column", "Column"))


def is_connect(value: Any) -> bool:
    """Whether ``value`` is a Spark Connect DataFrame or column (a Connect object exists only once its
    module was imported, so an unimported module answers no without importing the Connect client)."""
    for module_name, class_name in _CONNECT_CLASSES:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(value, getattr(module, class_name)):
            return True
    return False


def functions_of(value: Any) -> ModuleType:
    """The ``functions`` module that builds columns for ``value``'s API."""
    if is_connect(value):
        from pyspark.sql.connect import functions

        return functions
    return classic_functions


def window_of(value: Any) -> Any:
    """The ``Window`` class that builds window specifications for ``value``'s API."""
    if is_connect(value):
        from pyspark.sql.connect.window import Window

        return Window
    return ClassicWindow
