"""The integration under its namespaced name ``dp_pipeline.airflow``: what entry points and docs use, what
a user's own ``airflow_plugin.py`` cannot shadow, and the former name ``airflow_plugin`` as the same
modules."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tests.airflow_plugin.conftest import REPO

pytestmark = pytest.mark.airflow

USER_FILE = """
from airflow.plugins_manager import AirflowPlugin

VALUE = "the user's own"


class UsersOwnPlugin(AirflowPlugin):
    name = "users_own"
"""


def _entry_points() -> dict[str, dict[str, str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]


def _installed_from_this_tree(root: Path) -> Path:
    """A dist-info with this tree's entry points, ahead of the shared environment's install (which may
    predate them): importlib.metadata reads the first distribution of a name on sys.path."""
    version = importlib.metadata.version("dp-pipeline")
    info = root / "dist" / f"dp_pipeline-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dp-pipeline\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for group, eps in _entry_points().items()
        )
    )
    return info.parent


def _run(code: str, root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    declared = _entry_points()
    ours = importlib.metadata.distribution("dp-pipeline").entry_points
    installed = {group: {e.name: e.value for e in ours.select(group=group)} for group in declared}
    ahead = None if installed == declared else str(_installed_from_this_tree(root))
    path = os.pathsep.join(filter(None, [ahead, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=180,
        check=False,
        env={**os.environ, **env, "PYTHONPATH": path},
    )


def test_former_name_is_the_same_modules_and_objects() -> None:
    import airflow_plugin.exceptions
    import airflow_plugin.hooks

    import airflow_plugin
    import dp_pipeline.airflow
    import dp_pipeline.airflow.exceptions
    import dp_pipeline.airflow.hooks

    assert airflow_plugin.hooks is dp_pipeline.airflow.hooks
    assert airflow_plugin.exceptions is dp_pipeline.airflow.exceptions
    assert airflow_plugin.hooks.__spec__.name == "dp_pipeline.airflow.hooks"  # its own spec, kept
    assert airflow_plugin.__all__ == dp_pipeline.airflow.__all__
    for name in dp_pipeline.airflow.__all__:
        assert getattr(airflow_plugin, name) is getattr(dp_pipeline.airflow, name), name
    from airflow_plugin import PrivacyBudgetExhausted

    assert PrivacyBudgetExhausted.__module__ == "dp_pipeline.airflow.exceptions"


def test_entry_points_name_the_namespaced_package() -> None:
    groups = _entry_points()
    declared = {
        (group, name): value
        for group in ("airflow.plugins", "apache_airflow_provider")
        for name, value in groups[group].items()
    }
    assert declared and all(value.startswith("dp_pipeline.airflow.") for value in declared.values())
    for (group, name), value in declared.items():
        assert importlib.metadata.EntryPoint(name, value, group).load() is not None


@pytest.mark.processes
def test_a_shadowing_file_on_sys_path_leaves_the_namespaced_package_working(tmp_path: Path) -> None:
    (tmp_path / "airflow_plugin.py").write_text(USER_FILE)
    result = _run(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import airflow_plugin
        assert airflow_plugin.VALUE == "the user's own"
        try:
            import airflow_plugin.hooks
        except ImportError as exc:
            print("former name broken:", exc)
        from dp_pipeline.airflow import PrivacyBudgetOperator, PrivacyLedgerHook, dp_task
        from dp_pipeline.airflow.plugin import shadowing_module
        assert PrivacyBudgetOperator.__module__ == "dp_pipeline.airflow.operators"
        print("shadow:", shadowing_module())
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "former name broken: No module named 'airflow_plugin.hooks'" in result.stdout
    assert f"shadow: {tmp_path / 'airflow_plugin.py'}" in result.stdout


@pytest.mark.processes
def test_plugin_load_names_a_plugins_folder_file_that_shadows_and_still_serves(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "airflow_plugin.py").write_text(USER_FILE)
    result = _run(
        """
        import importlib.metadata, logging, sys
        logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(name)s %(message)s")
        from airflow import plugins_manager
        plugins, errors = plugins_manager._get_plugins()  # loads the plugins folder first, as Airflow does
        assert "users_own" in [p.name for p in plugins], [p.name for p in plugins]
        assert sys.modules["airflow_plugin"].VALUE == "the user's own"
        ours = [p for p in plugins if p.name == "dp_pipeline"]
        # an install that predates this tree also declares the former entry point, which the file breaks
        assert len(ours) == 1 and set(errors) <= {"airflow_plugin.plugin"}, errors
        apps = ours[0].fastapi_apps
        print("mounted:", [app["url_prefix"] for app in apps])
        """,
        tmp_path,
        AIRFLOW__CORE__PLUGINS_FOLDER=str(plugins),
    )
    assert result.returncode == 0, result.stderr
    assert "mounted: ['/dp-budget']" in result.stdout
    warning = next(line for line in result.stdout.splitlines() if "shadows dp-pipeline's package" in line)
    assert str(plugins / "airflow_plugin.py") in warning and "dp_pipeline.airflow" in warning


def test_the_installed_package_is_not_reported_as_shadowing() -> None:
    from dp_pipeline.airflow.plugin import shadowing_module

    assert shadowing_module() is None
