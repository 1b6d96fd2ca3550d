"""The UI plugin: registered through the ``airflow.plugins`` entry point, with read-only routes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_plugin_is_registered_through_the_entry_point() -> None:
    from airflow import plugins_manager

    plugins, errors = plugins_manager._get_plugins()
    ours = [p for p in plugins if p.name == "dp_pipeline"]
    assert len(ours) == 1, [p.name for p in plugins]
    assert not any("dp_pipeline" in str(k) or "airflow_plugin" in str(v) for k, v in errors.items()), errors
    plugin = ours[0]
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/dp-budget"]
    view = plugin.external_views[0]
    assert (view["destination"], view["url_route"], view["href"]) == ("nav", "dp-budget", "dp-budget/")
    routes = {(route.path, tuple(sorted(route.methods))) for route in plugin.fastapi_apps[0]["app"].routes}
    assert routes == {("/", ("GET",)), ("/api/datasets", ("GET",)), ("/api/datasets/{dataset}", ("GET",))}
