"""Airflow provider information of dp-pipeline (entry point ``apache_airflow_provider``).

It registers the hook and its connection type, the operator module, the ``@task.dp`` TaskFlow
decorator and the ``airflow dp-pipeline check`` command. The UI plugin is registered only through the
``airflow.plugins`` entry point, which Airflow always loads: a provider-info ``plugins`` entry is read only
with ``[core] lazy_discover_providers = False``, and then Airflow would record the second registration of
the same plugin as a plugin import error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """The provider-info dictionary, validated by Airflow against ``provider_info.schema.json``.

    Every Airflow process calls this while it reads its configuration, so it imports nothing heavy.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("dp-pipeline")
    except PackageNotFoundError:  # running from a source tree that is not installed
        __version__ = "0.0.0"

    return {
        "package-name": "dp-pipeline",
        "name": "dp-pipeline",
        "description": "Differential-privacy budgets for Airflow tasks: reserve a task's privacy cost on a "
        "ledger before it runs, refuse it when the budget would be exceeded.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "dp-pipeline privacy ledger",
                "external-doc-url": "https://pypi.org/project/dp-pipeline/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "dp-pipeline privacy ledger",
                "python-modules": ["dp_pipeline.airflow.operators", "dp_pipeline.airflow.runs"],
            }
        ],
        "hooks": [
            {
                "integration-name": "dp-pipeline privacy ledger",
                "python-modules": ["dp_pipeline.airflow.hooks"],
            }
        ],
        "connection-types": [
            {
                "connection-type": "dpledger",
                "hook-class-name": "dp_pipeline.airflow.hooks.PrivacyLedgerHook",
                "hook-name": "dp-pipeline privacy ledger",
                "conn-fields": {
                    "backend": {
                        "label": "Ledger database",
                        "schema": {
                            "type": ["string", "null"],
                            "enum": ["postgres", "sqlite"],
                            "default": "postgres",
                        },
                        "description": "postgres: host, port, login, password, schema (the database); "
                        "sqlite: the ledger file's absolute path as host",
                    },
                    "ledger_secret_key": {
                        "label": "Signing key",
                        "schema": {"type": ["string", "null"], "format": "password"},
                        "description": "Signs every record (HMAC-SHA256); Airflow shows it as ***",
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {
                        "host": "Host, or the SQLite ledger file's absolute path",
                        "schema": "Database",
                    },
                    "placeholders": {"host": "db.internal or /var/lib/dp/ledger.db", "port": "5432"},
                },
            }
        ],
        "task-decorators": [{"name": "dp", "class-name": "dp_pipeline.airflow.decorators.dp_task"}],
        "cli": ["dp_pipeline.airflow.cli_commands.get_cli_commands"],
    }
