"""The package's surface on real Airflow 3.3, without running DAGs: imports, the optional extra, the
connection conventions, the refusal exception, declared costs, provider info and plugin registration."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow_plugin._helpers import ledger_conn_uri

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )


def test_public_contract_imports() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_plugin import PrivacyBudgetExhausted, PrivacyBudgetOperator, dp_task
    from dp_pipeline import BudgetExceededError

    assert callable(dp_task)
    assert issubclass(PrivacyBudgetExhausted, AirflowFailException)
    assert issubclass(PrivacyBudgetExhausted, BudgetExceededError)
    assert PrivacyBudgetOperator.__module__ == "airflow_plugin.operators"


def test_import_without_airflow_names_the_extra() -> None:
    # sys.modules[name] = None is how Python marks a module as not importable
    result = _run_python("import sys; sys.modules['airflow'] = None; import airflow_plugin")
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert 'pip install "dp-pipeline[airflow]"' in result.stderr


# --------------------------------------------------------------------------------------------- hook


def test_sqlite_connection_with_path_as_host_reaches_the_ledger(ledger, tmp_path, monkeypatch) -> None:
    from airflow_plugin import PrivacyLedgerHook
    from dp_pipeline import PureDP

    ledger.set_budget("patients", PureDP(2.0))
    hook = PrivacyLedgerHook()
    assert hook.ledger_conn_id == "dp_ledger_default"
    assert hook.get_sqlalchemy_url() == f"sqlite:///{tmp_path / 'ledger.db'}"
    hook.get_accountant().spend("patients", PureDP(0.25), label="via hook")
    assert ledger.spent("patients").epsilon == pytest.approx(0.25)
    ok, message = hook.test_connection()
    assert ok, message
    assert "1 dataset" in message


def test_hook_signs_with_the_key_of_the_connection_extra_and_never_creates(ledger, tmp_path, monkeypatch):
    import json
    import urllib.parse

    from airflow_plugin import PrivacyLedgerHook
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.exceptions import LedgerError

    key = "a key kept in a secrets backend"
    ledger.set_budget("patients", PureDP(2.0))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    conn = {"conn_type": "dpledger", "extra": {"sqlalchemy_url": url, "ledger_key": key}}
    monkeypatch.setenv("AIRFLOW_CONN_SIGNED", json.dumps(conn))
    PrivacyLedgerHook("signed").get_accountant().spend("patients", PureDP(0.25))
    assert [r.sig is not None for r in ledger.store.records("patients")] == [False, True, True]
    assert PrivacyAccountant(url, key=key).verify().signatures
    dashboard = PrivacyLedgerHook("signed", read_only=True).get_accountant()
    with pytest.raises(LedgerError, match="read-only"):
        dashboard.spend("patients", PureDP(0.25))
    missing = tmp_path / "typo.db"
    monkeypatch.setenv("AIRFLOW_CONN_TYPO", "sqlite://" + urllib.parse.quote(str(missing), safe=""))
    with pytest.raises(LedgerError, match="no ledger at"):
        PrivacyLedgerHook("typo").get_accountant()
    assert not missing.exists()


def test_connection_conventions_from_real_connection_uris(monkeypatch) -> None:
    from airflow_plugin import PrivacyLedgerHook

    cases = {
        # the documented form: the path, URL-encoded, as host
        "sqlite://%2Fvar%2Flib%2Fdp%2Fledger.db": "sqlite:////var/lib/dp/ledger.db",
        # the URI form Airflow parses into the schema
        "sqlite:////srv/ledger.db": "sqlite:////srv/ledger.db",
        "postgres://dp:s%40cret%2F1@db.internal:5433/ledger?sslmode=require": (
            "postgresql+psycopg://dp:s%40cret%2F1@db.internal:5433/ledger?sslmode=require"
        ),
        "postgres://db.internal/ledger": "postgresql+psycopg://db.internal/ledger",
        "dpledger://?sqlalchemy_url=postgresql%2Bpsycopg%3A%2F%2Fu%3Ap%40h%2Fd": "postgresql+psycopg://u:p@h/d",
    }
    for uri, expected in cases.items():
        monkeypatch.setenv("AIRFLOW_CONN_LEDGER_CASE", uri)
        assert PrivacyLedgerHook("ledger_case").get_sqlalchemy_url() == expected, uri


def test_unusable_connections_are_refused_with_a_reason(monkeypatch) -> None:
    from airflow_plugin import PrivacyLedgerHook
    from airflow_plugin.hooks import LedgerConnectionError

    cases = {
        "sqlite:///relative/ledger.db": "relative",
        "sqlite://": "absolute path",
        "postgres://:5432/ledger": "needs a host",
        "mysql://u:p@h/db": "not a ledger connection",
    }
    for uri, reason in cases.items():
        monkeypatch.setenv("AIRFLOW_CONN_LEDGER_CASE", uri)
        with pytest.raises(LedgerConnectionError, match=reason):
            PrivacyLedgerHook("ledger_case").get_sqlalchemy_url()


# ----------------------------------------------------------------------------------------- refusal


def test_refusal_exception_names_the_numbers_and_survives_pickling(ledger) -> None:
    from airflow_plugin import PrivacyBudgetExhausted
    from dp_pipeline import BudgetExceededError, PureDP

    ledger.set_budget("patients", PureDP(1.0))
    ledger.spend("patients", PureDP(0.75))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve("patients", PureDP(0.5), key="k")
    refusal = PrivacyBudgetExhausted.from_error(caught.value, task="dag.task")
    text = str(refusal)
    for part in ("'patients'", "requested", "spent", "remaining", "0.5", "0.75", "0.25", "dag.task"):
        assert part in text, part
    copy = pickle.loads(pickle.dumps(refusal))
    assert type(copy) is PrivacyBudgetExhausted
    assert str(copy) == text
    assert (copy.dataset, copy.requested, copy.spent, copy.remaining) == (
        refusal.dataset,
        refusal.requested,
        refusal.spent,
        refusal.remaining,
    )
    path, args, kwargs = refusal.serialize()
    assert path == "airflow_plugin.exceptions.PrivacyBudgetExhausted"
    assert args[0] == "patients"
    assert "0.25" in str(PrivacyBudgetExhausted(*args, **kwargs))


# ----------------------------------------------------------------------------------- declared costs


def test_costs_are_declared_without_io_and_validated_at_definition(tmp_path, monkeypatch) -> None:
    from airflow.sdk import DAG

    from airflow_plugin import PrivacyBudgetOperator
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    # a connection that would fail if anything opened it while the DAG is defined
    monkeypatch.setenv("AIRFLOW_CONN_DP_LEDGER_DEFAULT", "mysql://nowhere/none")
    with DAG("defined_offline", schedule=None):
        op = PrivacyBudgetOperator(
            task_id="count",
            dataset="patients",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=len,
        )
    assert op.dp_cost.dataset == "patients"
    assert op.dp_cost.guarantee.epsilon == 0.5
    with DAG("bad_costs", schedule=None), pytest.raises(InvalidParameterError, match="mechanism"):
        PrivacyBudgetOperator(task_id="bad", dataset="patients", mechanism=0.5, python_callable=len)
    with DAG("bad_group", schedule=None), pytest.raises(InvalidParameterError, match="group_size"):
        PrivacyBudgetOperator(
            task_id="bad",
            dataset="patients",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            group_size=0,
            python_callable=len,
        )


def test_cost_specs_for_params() -> None:
    from airflow_plugin import DPCost
    from dp_pipeline import ApproxDP, GaussianDP, PureDP
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    assert DPCost.from_spec({"dataset": "d", "epsilon": 0.5}).cost == PureDP(0.5)
    assert DPCost.from_spec({"dataset": "d", "epsilon": 0.5, "delta": 1e-6}).cost == ApproxDP(0.5, 1e-6)
    assert DPCost.from_spec({"dataset": "d", "mu": 0.3, "group_size": 2}).group_size == 2
    assert DPCost.from_spec({"dataset": "d", "mu": 0.3}).cost == GaussianDP(0.3)
    event = Laplace(epsilon=0.5, sensitivity=1.0).event
    assert DPCost.from_spec({"dataset": "d", "event": event.to_dict()}).cost == event
    bad_specs = (
        {"dataset": "d"},
        {"dataset": "d", "epsilon": 1, "mu": 1},
        {"epsilon": 1},
        {"dataset": "d", "x": 1},
    )
    for bad in bad_specs:
        with pytest.raises(InvalidParameterError):
            DPCost.from_spec(bad)


# ------------------------------------------------------------------------------- provider and plugin


def test_provider_info_is_valid_and_registers_task_dp() -> None:
    import json

    import airflow
    import jsonschema
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import task
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from airflow_plugin.decorators import dp_task
    from airflow_plugin.provider_info import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)
    assert "dp-pipeline" in ProvidersManager().providers
    runtime = ProvidersManagerTaskRuntime()
    assert "dpledger" in runtime.hooks
    assert runtime.taskflow_decorators["dp"] is dp_task
    assert task.dp is dp_task


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


def test_ledger_conn_uri_helper_matches_design_example() -> None:
    assert ledger_conn_uri(Path("/path/to/ledger.db")) == "sqlite://%2Fpath%2Fto%2Fledger.db"


def test_attach_guard_chains_hooks_and_refuses_a_second_cost() -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from airflow_plugin import PrivacyBudgetOperator, attach_guard, dp_guard
    from airflow_plugin.guards import GuardChain, iter_guards
    from dp_pipeline import PureDP
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    def own_hook(context: object) -> None:
        return None

    with DAG("guards", schedule=None):
        plain = BashOperator(task_id="plain", bash_command="true", pre_execute=own_hook)
        mapped = BashOperator.partial(task_id="mapped").expand(bash_command=["true", "false"])
        dp_op = PrivacyBudgetOperator(
            task_id="dp", dataset="d", mechanism=Laplace(epsilon=0.1, sensitivity=1.0), python_callable=len
        )
    guard = dp_guard("d", PureDP(0.1))
    attach_guard(plain, guard)
    assert isinstance(plain._pre_execute_hook, GuardChain)
    assert plain._pre_execute_hook.then is own_hook  # the task's own hook still runs, after the guard
    assert list(iter_guards(plain)) == [guard]
    with pytest.raises(InvalidParameterError, match="already declares"):
        attach_guard(plain, dp_guard("d", PureDP(0.2)))
    with pytest.raises(InvalidParameterError, match="already declares"):
        attach_guard(dp_op, dp_guard("d", PureDP(0.2)))
    attach_guard(mapped, guard)  # a mapped operator keeps its hooks in its partial kwargs
    assert list(iter_guards(mapped)) == [guard]
    assert isinstance(mapped.partial_kwargs["pre_execute"], GuardChain)


def test_task_policy_attaches_a_guard_once_and_rejects_double_declarations() -> None:
    from airflow.exceptions import AirflowClusterPolicyViolation
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from airflow_plugin import PrivacyBudgetOperator
    from airflow_plugin.guards import iter_guards
    from airflow_plugin.policies import task_policy
    from dp_pipeline import PureDP
    from dp_pipeline.mechanisms import Laplace

    spec = {"dataset": "d", "epsilon": 0.3, "ledger_conn_id": "other_ledger"}
    with DAG("policy", schedule=None):
        declared = BashOperator(task_id="declared", bash_command="true", params={"dp_cost": spec})
        plain = BashOperator(task_id="plain", bash_command="true")
        twice = PrivacyBudgetOperator(
            task_id="twice",
            dataset="d",
            mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
            python_callable=len,
            params={"dp_cost": {"dataset": "d", "epsilon": 0.1}},
        )
        bad = BashOperator(task_id="bad", bash_command="true", params={"dp_cost": {"dataset": "d"}})
    task_policy(declared)
    task_policy(declared)  # the worker parses the DAG again: still one guard
    (guard,) = iter_guards(declared)
    assert (guard.cost.dataset, guard.cost.cost, guard.ledger_conn_id) == ("d", PureDP(0.3), "other_ledger")
    task_policy(plain)
    assert list(iter_guards(plain)) == []
    with pytest.raises(AirflowClusterPolicyViolation, match="twice"):
        task_policy(twice)
    with pytest.raises(AirflowClusterPolicyViolation, match="invalid params"):
        task_policy(bad)


PW = "S3CRET-PASSWORD-42"


@pytest.mark.parametrize(
    "conn",
    [
        f"postgres://alice:{PW}@127.0.0.1:1/ledger?connect_timeout=2",  # unreachable
        json.dumps({"conn_type": "dpledger", "extra": {"sqlalchemy_url": f"postgresql:/alice:{PW}@db/l"}}),
        json.dumps({"conn_type": "dpledger", "extra": {"sqlalchemy_url": f"postgresql://alice:{PW}@db:x/l"}}),
    ],
)
def test_test_connection_and_the_dashboard_never_show_the_password(monkeypatch, conn: str) -> None:
    from fastapi.testclient import TestClient

    from airflow_plugin import PrivacyLedgerHook
    from airflow_plugin.dashboard import create_app

    monkeypatch.setenv("AIRFLOW_CONN_LEDGER_SECRET", conn)
    ok, message = PrivacyLedgerHook("ledger_secret").test_connection()
    assert not ok and "S3CRET" not in message and "alice:***@" in message
    page = TestClient(create_app(lambda: PrivacyLedgerHook("ledger_secret").get_accountant())).get("/")
    assert page.status_code == 503 and "S3CRET" not in page.text and "alice:***@" in page.text
