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
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = ["URL_PREFIX", "PrivacyBudgetPlugin"]

URL_PREFIX = "/dp-budget"


def _ledger_accountant() -> PrivacyAccountant:
    from airflow.configuration import conf

    from airflow_plugin.declared import DEFAULT_CONN_ID
    from airflow_plugin.hooks import PrivacyLedgerHook

    conn_id = conf.get("dp_pipeline", "ledger_conn_id", fallback=DEFAULT_CONN_ID)
    return PrivacyLedgerHook(conn_id, shared=True, read_only=True).get_accountant()


@functools.cache
def _dashboard_apps() -> list[dict[str, Any]]:
    from airflow.configuration import conf

    from airflow_plugin.dashboard import create_app

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

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The dashboard app, mounted by the API server at ``/dp-budget``."""
        return _dashboard_apps()
