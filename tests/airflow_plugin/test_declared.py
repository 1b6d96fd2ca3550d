"""What a task declares (``dp_pipeline.airflow.declared``): one reading of a task's own cost, its params
spec and its ledger connection, in a leaf module that keeps the package's imports free of cycles."""

from __future__ import annotations

import ast
import datetime as dt
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow_plugin.conftest import REPO

pytestmark = pytest.mark.airflow

PACKAGE = REPO / "dp_pipeline" / "airflow"
PREFIX = "dp_pipeline.airflow."
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _package_imports(path: Path) -> set[str]:
    """The modules of the integration a file imports at run time, at module level or inside functions
    (imports under ``if TYPE_CHECKING:`` are for annotations only)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking_block(node):
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.add(node.module.removeprefix(PREFIX).split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix(PREFIX).split(".")[0] for a in node.names if a.name.startswith(PREFIX)
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, or None."""
    state: dict[str, str] = {}

    def walk(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state:
                found = walk(target, [*path, target])
                if found:
                    return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = walk(module, [module])
            if found:
                return found
    return None


def test_cycle_finder_finds_a_cycle_through_function_level_imports() -> None:
    assert _cycle({"planning": {"guards"}, "policies": {"planning"}, "guards": set()}) is None
    assert _cycle({"planning": {"policies"}, "policies": {"planning"}}) == [
        "planning",
        "policies",
        "planning",
    ]


def test_the_package_has_no_import_cycle_not_even_inside_functions() -> None:
    """planning and policies once imported each other inside functions (spec parsing one way, the
    operator cost the other); what a task declares now lives in one leaf module both import."""
    graph = {path.stem: _package_imports(path) for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert _cycle(graph) is None, _cycle(graph)
    assert graph["declared"] == {"costs", "keys"} and graph["keys"] == set()
    assert "declared" in graph["planning"] and "declared" in graph["policies"]
    assert "policies" not in graph["planning"]


def _every_import(path: Path) -> set[str]:
    """Every module (and ``module.name``) a file imports: at module level, inside functions and under
    ``if TYPE_CHECKING:`` alike."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.processes
def test_no_cycle_even_for_annotations_planning_below_the_provider_and_no_private_imports() -> None:
    """Counting ``TYPE_CHECKING`` imports too, the provider's modules import one another without a cycle;
    ``dp_pipeline.planning`` imports nothing of the provider nor of Airflow; and the provider imports no
    private module (nor private name) of ``dp_pipeline`` outside itself."""
    graph = {
        path.stem: {m.removeprefix(PREFIX).split(".")[0] for m in _every_import(path) if m.startswith(PREFIX)}
        for path in PACKAGE.glob("*.py")
        if path.stem != "__init__"
    }
    assert _cycle(graph) is None, _cycle(graph)
    for path in (REPO / "dp_pipeline" / "planning").glob("*.py"):
        upward = {m for m in _every_import(path) if m.startswith(("airflow", "dp_pipeline.airflow"))}
        assert not upward, (path.name, upward)
    for path in PACKAGE.glob("*.py"):
        private = {
            m
            for m in _every_import(path)
            if m.startswith("dp_pipeline.")
            and not m.startswith(PREFIX)
            and any(part.startswith("_") for part in m.split(".")[1:])
        }
        assert not private, (path.name, private)


def _loaded_after(statement: str) -> list[str]:
    ours = "m.startswith(('airflow', 'dp_pipeline.airflow'))"
    code = f"import sys\n{statement}\nprint(' '.join(sorted(m for m in sys.modules if {ours})))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_declared_imports_nothing_of_airflow_and_the_policies_no_task_module() -> None:
    """``airflow_local_settings.py`` imports the policies, and through them this module, while Airflow is
    still importing itself: the policies may not import the modules that reach Airflow's task SDK, and
    this module nothing of Airflow at all."""
    assert _loaded_after("import dp_pipeline.airflow.declared") == [
        "dp_pipeline.airflow",
        "dp_pipeline.airflow.costs",
        "dp_pipeline.airflow.declared",
        "dp_pipeline.airflow.keys",
    ]
    loaded = set(_loaded_after("import dp_pipeline.airflow.policies"))
    assert "dp_pipeline.airflow.declared" in loaded
    assert not loaded & {f"{PREFIX}hooks", f"{PREFIX}guards", f"{PREFIX}planning"}


def test_spec_to_cost_strips_the_guard_options_and_validates() -> None:
    from dp_pipeline import ApproxDP
    from dp_pipeline.airflow.costs import DPCost
    from dp_pipeline.airflow.declared import spec_to_cost
    from dp_pipeline.exceptions import InvalidParameterError

    spec = {"dataset": "d", "epsilon": 0.3, "delta": 1e-7, "ledger_conn_id": "other", "on_exhausted": "skip"}
    assert spec_to_cost(spec) == DPCost(dataset="d", cost=ApproxDP(0.3, 1e-7))
    with pytest.raises(InvalidParameterError, match="unknown keys"):
        spec_to_cost({"dataset": "d", "epsilon": 0.3, "retries": 2})


def test_params_spec_reads_only_a_mapping_under_dp_cost() -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow.declared import params_spec

    spec = {"dataset": "d", "mu": 0.2}
    with DAG("params_specs", schedule=None):
        declared = BashOperator(task_id="declared", bash_command="true", params={"dp_cost": spec})
        plain = BashOperator(task_id="plain", bash_command="true", params={"other": 1})
        not_a_spec = BashOperator(task_id="not_a_spec", bash_command="true", params={"dp_cost": 0.5})
    assert params_spec(declared) == spec
    assert params_spec(plain) is None and params_spec(not_a_spec) is None


def test_operator_cost_of_plain_and_mapped_dp_tasks_and_of_other_operators() -> None:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, attach_guard, dp_guard, dp_task
    from dp_pipeline.airflow.costs import DPCost
    from dp_pipeline.airflow.declared import operator_cost
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    mechanism = Laplace(epsilon=0.2, sensitivity=1.0)

    @dp_task(dataset="d", mechanism=mechanism, group_size=2, label="decorated")
    def count(value: int, mechanism: object) -> int:
        return value

    with DAG("operator_costs", schedule=None, start_date=START, catchup=False):
        plain = PrivacyBudgetOperator(task_id="plain", dataset="d", mechanism=mechanism, python_callable=len)
        mapped = PrivacyBudgetOperator.partial(
            task_id="mapped", dataset="d", mechanism=mechanism, python_callable=len
        ).expand(op_args=[[1], [2]])
        decorated = count.partial().expand(value=[1, 2, 3])
        other = PythonOperator.partial(task_id="other", python_callable=len).expand(op_args=[[1]])
    assert operator_cost(plain) == DPCost(dataset="d", cost=mechanism)
    assert operator_cost(mapped) == DPCost(dataset="d", cost=mechanism)
    assert operator_cost(decorated.operator) == DPCost(
        dataset="d", cost=mechanism, group_size=2, label="decorated"
    )
    assert operator_cost(other) is None
    # the guard reads the same declaration: a mapped DP task already declares its cost
    with pytest.raises(InvalidParameterError, match="already declares"):
        attach_guard(decorated.operator, dp_guard("d", PureDP(0.1)))
    attach_guard(other, dp_guard("d", PureDP(0.1)))


def test_a_dp_task_mapped_over_its_cost_is_refused_by_the_plan_not_left_out(ledger, caplog) -> None:
    """A PrivacyBudgetOperator mapped over an argument of its cost (its mechanism, its group size, its
    dataset) has no one cost the DAG check could count: the plan refuses it, naming the task and the
    argument, rather than checking the DAG without it (no check at all) or with the default group size of 1
    (a fifth of what its second map index costs). Mapping over the callable's arguments stays planned."""
    from airflow.exceptions import AirflowClusterPolicyViolation
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag
    from dp_pipeline.airflow.planning import plan_dag
    from dp_pipeline.airflow.policies import make_dag_policy
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("visits", PureDP(1.0))
    mechanism = Laplace(epsilon=0.4, sensitivity=1.0)
    mapped = {
        "mechanism": ({"dataset": "visits"}, {"mechanism": [mechanism, mechanism]}),
        "group_size": ({"dataset": "visits", "mechanism": mechanism}, {"group_size": [1, 5]}),
        "dataset": ({"mechanism": mechanism}, [{"dataset": "visits"}, {"dataset": "visits"}]),
    }
    for argument, (partial, expanded) in mapped.items():
        with DAG(f"dp_mapped_{argument}", schedule=None, start_date=START) as dag:
            task = PrivacyBudgetOperator.partial(task_id="count", python_callable=len, **partial)
            task.expand(**expanded) if isinstance(expanded, dict) else task.expand_kwargs(expanded)
        refused = f"'count' maps its privacy cost.*{argument}"
        with pytest.raises(InvalidParameterError, match=refused):
            plan_dag(dag)
        with pytest.raises(InvalidParameterError, match=refused):
            check_dag(dag, ledger)
        with pytest.raises(AirflowClusterPolicyViolation, match=refused):  # the policy refuses it as a DAG
            make_dag_policy(mode="refuse")(dag)
        with caplog.at_level(logging.WARNING, logger="dp_pipeline.airflow.policies"):
            make_dag_policy(mode="warn")(dag)  # only logs: the DAG still loads
        assert re.search(refused, caplog.text)
        caplog.clear()
    with DAG("dp_mapped_callable", schedule=None, start_date=START) as dag:
        PrivacyBudgetOperator.partial(
            task_id="count", dataset="visits", mechanism=mechanism, python_callable=len
        ).expand(op_args=[[1], [2]])
    (check,) = check_dag(dag, ledger)
    assert check.total is not None and check.total.epsilon == pytest.approx(0.8)


def test_a_task_mapped_over_its_guard_is_refused_by_the_plan_not_left_out(ledger) -> None:
    """``.expand(pre_execute=[guard, guard])`` puts a privacy guard on each map index where the plan reads
    only ``.partial()``: the task charged per map index but was missing from the check. The plan refuses
    it, naming the task; the guard given in ``.partial()`` is counted per map index."""
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag, dp_guard
    from dp_pipeline.airflow.planning import plan_dag
    from dp_pipeline.exceptions import InvalidParameterError

    ledger.set_budget("visits", PureDP(1.0))
    guard = dp_guard("visits", PureDP(0.1))
    with DAG("dp_mapped_guard", schedule=None, start_date=START) as dag:
        BashOperator.partial(task_id="export", bash_command="echo hi").expand(pre_execute=[guard, guard])
    with pytest.raises(InvalidParameterError, match="'export' maps over pre_execute"):
        plan_dag(dag)
    with pytest.raises(InvalidParameterError, match="'export' maps over pre_execute"):
        check_dag(dag, ledger)
    with DAG("dp_partial_guard", schedule=None, start_date=START) as dag:
        BashOperator.partial(task_id="export", pre_execute=guard).expand(bash_command=["echo 1", "echo 2"])
    (check,) = check_dag(dag, ledger)
    assert check.total is not None and check.total.epsilon == pytest.approx(0.2)


def test_a_dataset_template_that_renders_differently_each_time_is_refused_by_the_check(ledger) -> None:
    """A name that changes on each render (here a counter macro: v1, v2, …) cannot be checked: the check
    would vouch for one dataset and the run charge another. The check does not pass it, and says why."""
    import itertools

    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, check_dag
    from dp_pipeline.mechanisms import Laplace

    ledger.set_budget("v1", PureDP(1.0))
    macros = {"draw": itertools.count(1).__next__}
    with DAG("dp_drawn_name", schedule=None, start_date=START, user_defined_macros=macros) as dag:
        PrivacyBudgetOperator(
            task_id="count",
            dataset="v{{ draw() }}",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=len,
        )
    (check,) = check_dag(dag, ledger, logical_date="2026-11-24")
    assert not check.ok
    assert any("renders to a different name each time" in warning for warning in check.warnings)


def test_every_default_ledger_connection_is_the_one_constant(ledger, monkeypatch, capsys) -> None:
    import inspect

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, PrivacyLedgerHook, dp_guard
    from dp_pipeline.airflow.check import main
    from dp_pipeline.airflow.declared import DEFAULT_CONN_ID
    from dp_pipeline.airflow.guards import PrivacyBudgetGuard
    from dp_pipeline.airflow.plugin import _ledger_accountant
    from dp_pipeline.airflow.policies import make_dag_policy

    assert DEFAULT_CONN_ID == "dp_ledger_default"  # the name the documentation gives
    for function in (PrivacyLedgerHook.__init__, PrivacyBudgetGuard.__init__, dp_guard, make_dag_policy):
        assert inspect.signature(function).parameters["ledger_conn_id"].default == DEFAULT_CONN_ID, function
    assert PrivacyLedgerHook.default_conn_name == DEFAULT_CONN_ID
    assert (
        inspect.signature(PrivacyBudgetOperator.__init__).parameters["ledger_conn_id"].default
        == DEFAULT_CONN_ID
    )
    ledger.set_budget("dashboard_default", PureDP(1.0))  # the dashboard reads the default connection
    assert "dashboard_default" in set(_ledger_accountant().datasets())
    monkeypatch.delenv("AIRFLOW_CONN_DP_LEDGER_DEFAULT")  # the DAG check names it when it is not defined
    assert main([str(PACKAGE)]) == 2
    assert "no Airflow connection 'dp_ledger_default'" in capsys.readouterr().err
