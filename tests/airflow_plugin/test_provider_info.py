"""The provider info: valid against Airflow's schema, and registering the hook and ``@task.dp``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow


def test_provider_info_is_valid_and_registers_task_dp() -> None:
    import json

    import airflow
    import jsonschema
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import task
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from dp_pipeline.airflow.decorators import dp_task
    from dp_pipeline.airflow.provider_info import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)
    assert "dp-pipeline" in ProvidersManager().providers
    runtime = ProvidersManagerTaskRuntime()
    assert "dpledger" in runtime.hooks
    assert runtime.taskflow_decorators["dp"] is dp_task
    assert task.dp is dp_task
