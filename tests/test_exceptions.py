"""The exceptions: one module per package, and each one survives pickling with every attribute."""

from __future__ import annotations

import ast
import builtins
import inspect
import pickle
from pathlib import Path
from typing import Any

import pytest

import dp_pipeline.exceptions as core
from dp_pipeline import ApproxDP, GaussianDP

ROOT = Path(__file__).resolve().parents[1]

CORE_EXAMPLES: dict[str, BaseException] = {
    "InvalidParameterError": core.InvalidParameterError("'epsilon' must be > 0, got -1.0", "epsilon"),
    "BudgetExceededError": core.BudgetExceededError(
        "patients",
        ApproxDP(2.0, 1e-6),
        ApproxDP(0.5, 0.0),
        ApproxDP(1.0, 1e-6),
        ApproxDP(1.5, 1e-6),
        detail="The plan's tight total is larger.",
        group_size=2,
        single=ApproxDP(1.0, 5e-7),
    ),
    "UnknownDatasetError": core.UnknownDatasetError("typo", "sqlite:///ledger.db", True, "set one with ..."),
    "UnsupportedCompositionError": core.UnsupportedCompositionError("no μ exists"),
    "LedgerError": core.LedgerError("ledger tampered"),
    "LedgerURLError": core.LedgerURLError("not a database URL", "url"),
    "KeyAlreadyUsedError": core.KeyAlreadyUsedError("patients", "dag/task/run/1", "committed"),
    "PrivacyLeakWarning": core.PrivacyLeakWarning("bounds from the data"),
    "FastSamplerWarning": core.FastSamplerWarning("fast_rng is not floating-point safe"),
    "MechanismSpentError": core.MechanismSpentError("this one-shot Laplace already drew"),
}


def exception_classes(module: Any) -> set[str]:
    return {
        name
        for name in module.__all__
        if inspect.isclass(getattr(module, name)) and issubclass(getattr(module, name), BaseException)
    }


def assert_round_trip(error: BaseException) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)  # every attribute: dataset, requested, …, detail, group_size, single


def test_every_core_exception_has_an_example() -> None:
    assert set(CORE_EXAMPLES) == exception_classes(core)


@pytest.mark.parametrize("name", sorted(CORE_EXAMPLES))
def test_core_exceptions_survive_pickling(name: str) -> None:
    assert_round_trip(CORE_EXAMPLES[name])


def test_a_pickled_budget_refusal_keeps_its_detail() -> None:
    error = CORE_EXAMPLES["BudgetExceededError"]
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, core.BudgetExceededError)
    assert copy.detail == "The plan's tight total is larger." and copy.detail in str(copy)
    assert (copy.group_size, copy.single, copy.budget) == (2, ApproxDP(1.0, 5e-7), ApproxDP(1.5, 1e-6))


def test_airflow_exceptions_survive_pickling() -> None:
    pytest.importorskip("airflow")
    import dp_pipeline.airflow.exceptions as af

    refusal = core.BudgetExceededError(
        "d", GaussianDP(1.0), GaussianDP(0.5), GaussianDP(0.5), GaussianDP(1.0)
    )
    charged = af.AttemptAlreadyChargedError.from_error(
        core.KeyAlreadyUsedError("d", "dag/task/run/1", "open"), task="dag.task"
    )
    examples: dict[str, BaseException] = {
        "PrivacyBudgetExhausted": af.PrivacyBudgetExhausted.from_error(refusal, task="dag.task"),
        "PrivacyBudgetSkipped": af.PrivacyBudgetSkipped.from_error(refusal, task="dag.task"),
        "PrivacyCostError": af.PrivacyCostError("no budget for 'd'"),
        "AttemptAlreadyChargedError": charged,
        "LedgerConnectionError": af.LedgerConnectionError("conn type 'mysql' is not supported"),
    }
    assert set(examples) == exception_classes(af)
    for error in examples.values():
        assert_round_trip(error)


def _exception_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


@pytest.mark.parametrize("package", ["dp_pipeline", "dp_pipeline/airflow"])
def test_each_package_defines_its_exceptions_in_one_module(package: str) -> None:
    home = ROOT / package / "exceptions.py"
    integration = ROOT / "dp_pipeline" / "airflow"  # the Airflow integration has its own exceptions module
    known = _exception_names(ROOT / "dp_pipeline" / "exceptions.py") | _exception_names(home)
    known |= {
        n
        for n in dir(builtins)
        if isinstance(getattr(builtins, n), type) and n.endswith(("Error", "Exception"))
    }
    known |= {"AirflowException", "AirflowFailException", "AirflowSkipException", "UserWarning", "Warning"}
    elsewhere = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path == home or (package == "dp_pipeline" and path.is_relative_to(integration)):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue  # a private exception is control flow inside its module, not part of the API
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if bases & known:
                elsewhere.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert elsewhere == []
