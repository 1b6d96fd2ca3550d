"""The Airflow UI plugin: a privacy-budget dashboard under *Browse → Privacy budgets*.

Registered through the ``airflow.plugins`` entry point, so installing dp-pipeline with the airflow extra is
enough. The API server mounts the dashboard app at ``/dp-budget`` and the UI shows it in an iframe at
``/plugin/dp-budget``.

Configuration (Airflow config, e.g. environment variables):

- ``[dp_pipeline] ledger_conn_id`` (``AIRFLOW__DP_PIPELINE__LEDGER_CONN_ID``), default
  ``dp_ledger_default``: the ledger the dashboard reads;
- ``[dp_pipeline] dashboard_requires_auth``, default ``True``: every dashboard route requires an
  authenticated Airflow user. The dashboard is read-only in any case: it has no route that writes to the
  ledger.

When it loads, the plugin checks that the name ``airflow_plugin`` (the integration's former name, kept for
old imports) is dp-pipeline's, and logs a warning naming the file that took it over, such as a user's
``plugins/airflow_plugin.py`` (:func:`shadowing_module`). The plugin itself imports only
:mod:`dp_pipeline.airflow`, so the dashboard loads either way.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant

__all__ = ["URL_PREFIX", "PrivacyBudgetPlugin", "shadowing_module"]

URL_PREFIX = "/dp-budget"
LEGACY_NAME = "airflow_plugin"
_LEGACY_INIT = Path(__file__).resolve().parents[2] / LEGACY_NAME / "__init__.py"

log = logging.getLogger(__name__)


def shadowing_module() -> str | None:
    """The file that holds the name ``airflow_plugin`` instead of dp-pipeline's package, or ``None``.

    The module already imported under that name if there is one (Airflow imports a plugins-folder file
    under its own name before it loads entry points), else the file an import would find on ``sys.path``.
    """
    module = sys.modules.get(LEGACY_NAME)
    if module is not None:
        origin = getattr(module, "__file__", None)
    else:
        spec = importlib.util.find_spec(LEGACY_NAME)
        origin = spec.origin if spec is not None else None
    if origin is None or Path(origin).resolve() == _LEGACY_INIT:
        return None
    return str(origin)


def _ledger_accountant() -> PrivacyAccountant:
    from airflow.configuration import conf

    from dp_pipeline.airflow.dashboard import ledger_accountant
    from dp_pipeline.airflow.declared import DEFAULT_CONN_ID

    conn_id = conf.get("dp_pipeline", "ledger_conn_id", fallback=DEFAULT_CONN_ID)
    return ledger_accountant(conn_id)


@functools.cache
def _dashboard_apps() -> list[dict[str, Any]]:
    from airflow.configuration import conf

    from dp_pipeline.airflow.dashboard import create_app

    requires_auth = conf.getboolean("dp_pipeline", "dashboard_requires_auth", fallback=True)
    app = create_app(_ledger_accountant, require_auth=requires_auth)
    return [{"app": app, "url_prefix": URL_PREFIX, "name": "dp-pipeline privacy budgets"}]


class PrivacyBudgetPlugin(AirflowPlugin):
    """Adds the read-only privacy-budget dashboard (a FastAPI app and a nav entry) to the Airflow UI.

    Airflow loads every ``airflow.plugins`` entry point in every task process too (for macros and
    listeners), so the dashboard app, with FastAPI and Airflow's API security, is built only when the API
    server asks for ``fastapi_apps``.
    """

    name = "dp_pipeline"
    external_views: list[Any] = [  # noqa: RUF012 - Airflow reads these class attributes
        {
            "name": "Privacy budgets",
            "href": URL_PREFIX.lstrip("/") + "/",
            "destination": "nav",
            "category": "browse",
            "url_route": "dp-budget",
        }
    ]

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        """Warn, naming the file, when a module shadows the name ``airflow_plugin``."""
        shadow = shadowing_module()
        if shadow is not None:
            log.warning(
                "%s shadows dp-pipeline's package %r: DAGs that import %r get that file instead. Import "
                "the Airflow integration from 'dp_pipeline.airflow', or rename the file.",
                shadow,
                LEGACY_NAME,
                LEGACY_NAME,
            )

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The dashboard app, mounted by the API server at ``/dp-budget``."""
        return _dashboard_apps()
