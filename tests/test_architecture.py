"""Architecture ratchets (issue 24, "One way to pay"): module size, the import graph, frame inspection, the
pinned public surface, and the complexity limit.

Each check reads the source with :mod:`ast` (nothing is imported), so it sees what a reader sees:
function-level imports, imports under ``if TYPE_CHECKING:`` and ``importlib.import_module("...")`` strings
count as much as module-level imports. Every allowlist below names the slice of the redesign
(``/work/shared/notes/redesign.md``, section 5.5) that removes its entries; an entry that no longer matches
the tree fails the test too, so that an allowlist only ever shrinks.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dp_pipeline", "airflow_plugin")
MAX_LINES = 700
MAX_COMPLEXITY = 25

# module -> the most lines it may have while it is still over MAX_LINES
LONG_MODULES: dict[str, int] = {}

# every import cycle of today, one strongly connected component each; a component may shrink, never grow
KNOWN_CYCLES: dict[str, frozenset[str]] = {}

# module -> the frame inspection it may still do (what frame_inspection reports, without line numbers)
KNOWN_FRAME_INSPECTION: dict[str, frozenset[str]] = {}


# --------------------------------------------------------------------------------------------------
# reading the tree


@dataclass(frozen=True)
class Module:
    name: str
    source: str
    is_package: bool


def tree_modules() -> dict[str, Module]:
    """Every module of the project's packages, by dotted name."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = Module(name, path.read_text(encoding="utf-8"), is_package)
    return modules


def _string_import(call: ast.Call) -> str | None:
    """The module a call ``importlib.import_module("m")``, ``import_module("m")`` or ``__import__("m")``
    names, when it is a string constant."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _absolute(module: Module, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    parts = module.name.split(".")
    base = parts if module.is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imported_names(module: Module) -> Iterator[str]:
    """Every dotted name the module imports, anywhere in it. ``from a import b`` gives ``a.b``, which
    :func:`_resolve` reads as the module ``a.b`` if there is one, else as ``a``; the parent packages that
    Python imports first are not edges (every module would otherwise import its package's ``__init__``)."""
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.level, node.module)
            yield from (base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and (target := _string_import(node)) is not None:
            yield target


def _resolve(name: str, known: Mapping[str, Module]) -> str:
    """The longest prefix of a dotted name that is a module of the tree (or the name's top level)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return parts[0]


def import_graph(modules: Mapping[str, Module]) -> dict[str, set[str]]:
    """module -> the modules it imports: the project's own by full name, any other by its top level."""
    return {
        name: {_resolve(target, modules) for target in imported_names(module)} - {name, ""}
        for name, module in modules.items()
    }


def cycles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


_FRAME_ATTRIBUTES = {"_getframe", "f_locals", "f_back", "f_globals"}  # on sys or on any frame object
_INSPECT_FUNCTIONS = {"stack", "currentframe", "getouterframes", "trace"}
_LOCAL_SCOPES = {"locals", "vars"}  # vars() without an argument is locals()


def _frame_finding(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        if node.attr in _FRAME_ATTRIBUTES:
            return node.attr
        on_inspect = isinstance(node.value, ast.Name) and node.value.id == "inspect"
        return f"inspect.{node.attr}" if on_inspect and node.attr in _INSPECT_FUNCTIONS else None
    if isinstance(node, ast.ImportFrom) and node.module in ("sys", "inspect"):
        hit = sorted(a.name for a in node.names if a.name in _FRAME_ATTRIBUTES | _INSPECT_FUNCTIONS)
        return f"from {node.module} import {', '.join(hit)}" if hit else None
    called = node.func if isinstance(node, ast.Call) and not node.args else None
    return f"{called.id}()" if isinstance(called, ast.Name) and called.id in _LOCAL_SCOPES else None


def frame_inspection(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of the call stack or of a function's local variables as data:
    ``sys._getframe``, ``f_locals``/``f_back``/``f_globals``, ``inspect.stack``/``currentframe``/
    ``getouterframes``/``trace``, and every ``locals()`` or argument-less ``vars()`` call."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = _frame_finding(node)
        if what is not None:
            found.append((getattr(node, "lineno", 0), what))
    return sorted(found)


def _layer_of(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "dp_pipeline" and len(parts) > 1 else parts[0]


# what a layer may never import (directly, counting every kind of import)
FORBIDDEN = {
    "dp_pipeline.accounting": (
        "dp_pipeline.mechanisms",
        "dp_pipeline.frames",
        "dp_pipeline.transformers",
        "dp_pipeline.spark",
        "dp_pipeline.cli",
        "dp_pipeline.airflow",
        "dp_pipeline.planning",
        "airflow_plugin",
    ),
    "dp_pipeline.mechanisms": ("dp_pipeline.accounting",),
}
AIRFLOW_ONLY = ("dp_pipeline.airflow", "airflow")  # imported only from dp_pipeline.airflow and airflow_plugin


def _forbidden(importer: str, target: str) -> bool:
    banned = FORBIDDEN.get(_layer_of(importer), ())
    if any(target == b or target.startswith(b + ".") for b in banned):
        return True
    in_airflow = _layer_of(importer) in ("dp_pipeline.airflow", "airflow_plugin")
    return not in_airflow and any(target == a or target.startswith(a + ".") for a in AIRFLOW_ONLY)


def layer_violations(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(
        f"{importer} imports {target}"
        for importer, targets in graph.items()
        for target in targets
        if _forbidden(importer, target)
    )


# --------------------------------------------------------------------------------------------------
# the ratchets


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return tree_modules()


@pytest.fixture(scope="module")
def graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    return import_graph(modules)


def test_no_module_is_over_the_line_limit() -> None:
    too_long = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            relative = path.relative_to(ROOT).as_posix()
            if lines > LONG_MODULES.get(relative, MAX_LINES):
                too_long[relative] = lines
    assert too_long == {}, f"over {MAX_LINES} lines (or over their allowlisted size): split them"


def test_the_long_module_allowlist_only_names_modules_still_over_the_limit() -> None:
    stale = {}
    for relative in LONG_MODULES:
        path = ROOT / relative
        lines = len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
        if lines <= MAX_LINES:
            stale[relative] = lines
    assert stale == {}, "these modules are within the limit now: remove them from LONG_MODULES"


def test_no_import_cycle_beyond_the_known_ones(graph: dict[str, set[str]]) -> None:
    new = [sorted(c) for c in cycles(graph) if not any(c <= known for known in KNOWN_CYCLES.values())]
    assert new == [], "a new import cycle (counting function-level, TYPE_CHECKING and string imports)"


def test_every_known_cycle_still_exists(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    gone = [name for name, known in KNOWN_CYCLES.items() if not any(c <= known for c in found)]
    assert gone == [], "these cycles are gone: remove them from KNOWN_CYCLES"


def test_the_layers_import_only_downwards(graph: dict[str, set[str]]) -> None:
    assert layer_violations(graph) == []


def test_no_frame_inspection_beyond_the_known_uses(modules: dict[str, Module]) -> None:
    new = {}
    for name, module in modules.items():
        found = {what for _, what in frame_inspection(module.source)}
        extra = found - KNOWN_FRAME_INSPECTION.get(name, frozenset())
        if extra:
            new[name] = sorted(extra)
    assert new == {}, "call-stack or locals() inspection: pass what is needed as arguments instead"


def test_every_known_frame_inspection_is_still_there(modules: dict[str, Module]) -> None:
    gone = {}
    for name, allowed in KNOWN_FRAME_INSPECTION.items():
        found = {what for _, what in frame_inspection(modules[name].source)} if name in modules else set()
        if allowed - found:
            gone[name] = sorted(allowed - found)
    assert gone == {}, "these uses are gone: remove them from KNOWN_FRAME_INSPECTION"


# every module of dp_pipeline is a package (__init__), a __main__, private (a "_" name, or inside a
# private package), in an exempt package, or one of these public import paths, each with its reason (issue 24)
PUBLIC_MODULES = {
    "dp_pipeline.exceptions": "the exceptions users catch (the README's error handling names this path)",
    "dp_pipeline.guarantees": "the guarantee types and conversions every other layer imports",
    "dp_pipeline.events": "PrivacyEvent and the event constructors that third-party mechanisms return",
    "dp_pipeline.testing": "the public privacy audit (audit) of users' own mechanisms",
    "dp_pipeline.estimation": "estimates from randomized-response reports (README: part of the core)",
    "dp_pipeline.accounting.testing": "the contract suites for new ledger stores and budget rules",
}
# Airflow names hook, operator and plugin classes by module path (provider_info, serialized DAGs);
# alembic loads the migrations by path
EXEMPT_PACKAGES = ("dp_pipeline.airflow", "dp_pipeline.accounting.ledger.migrations")


def _is_private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _is_exempt(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in EXEMPT_PACKAGES)


def test_every_module_is_private_or_a_listed_public_one(modules: dict[str, Module]) -> None:
    unlisted = sorted(
        name
        for name, module in modules.items()
        if name.startswith("dp_pipeline")
        and not (module.is_package or name.endswith(".__main__") or _is_private(name) or _is_exempt(name))
        and name not in PUBLIC_MODULES
    )
    assert unlisted == [], "make these private (a leading _) or list them in PUBLIC_MODULES with a reason"


def test_every_listed_public_module_is_a_public_module_of_the_tree(modules: dict[str, Module]) -> None:
    wrong = sorted(n for n in PUBLIC_MODULES if n not in modules or _is_private(n) or modules[n].is_package)
    assert wrong == [], "remove these from PUBLIC_MODULES"


def test_the_private_module_checker_reads_names() -> None:
    assert _is_private("dp_pipeline.accounting._analysis.pld")
    assert not _is_private("dp_pipeline.cli.__main__")
    assert _is_exempt("dp_pipeline.airflow.hooks") and not _is_exempt("dp_pipeline.airflowish")


PUBLIC = {
    "dp_pipeline": [
        "AllocatedRelease",
        "Allocation",
        "ApproxDP",
        "BudgetExceededError",
        "GaussianDP",
        "Guarantee",
        "InvalidParameterError",
        "KeyAlreadyUsedError",
        "LedgerError",
        "PlannedRelease",
        "PrivacyAccountant",
        "PrivacyEvent",
        "PrivacyLeakWarning",
        "PureDP",
        "UnsupportedCompositionError",
        "allocate",
    ],
    "dp_pipeline.accounting": [
        "AttemptShare",
        "BudgetPolicy",
        "BudgetReport",
        "Composition",
        "DatasetHandle",
        "LedgerEntry",
        "PrivacyAccountant",
        "Quote",
        "ReleaseEntry",
        "Request",
        "Reservation",
        "Spender",
        "UNACCOUNTED",
        "UnknownDatasetError",
        "VerifyReport",
        "anchor",
        "as_approx_dp",
        "as_gdp",
        "compose_basic",
        "compose_gdp",
        "compose_plan",
        "compose_plan_gdp",
        "event_gdp",
        "group_event",
        "group_plan",
        "ledger_entries",
        "open_reservations",
        "partition_reading",
        "partition_spending",
    ],
    "dp_pipeline.frames": [
        "add_noise",
        "dp_count",
        "dp_histogram",
        "dp_mean",
        "dp_median",
        "dp_quantile",
        "dp_quantiles",
        "dp_std",
        "dp_sum",
        "dp_var",
        "krr_frequencies",
        "randomized_response",
        "rr_share",
    ],
    "dp_pipeline.mechanisms": [
        "BinaryRandomizedResponse",
        "BoundedLaplace",
        "BoundedStaircase",
        "Composite",
        "ContinuousMechanism",
        "Exponential",
        "FastGenerator",
        "Gaussian",
        "KRandomizedResponse",
        "Laplace",
        "Mechanism",
        "OneShot",
        "Staircase",
        "fast_rng",
        "secure_rng",
        "staircase_cdf",
        "staircase_pdf",
    ],
    "dp_pipeline.spark": [
        "add_noise",
        "dp_count",
        "dp_histogram",
        "dp_mean",
        "dp_median",
        "dp_quantile",
        "dp_quantiles",
        "dp_std",
        "dp_sum",
        "dp_var",
        "randomized_response",
    ],
    "dp_pipeline.transformers": [
        "AllOrNothing",
        "BoundedLaplaceNoise",
        "BoundedStaircaseNoise",
        "GaussianNoise",
        "KRandomizedResponseEncoder",
        "LaplaceNoise",
        "RandomizedResponseEncoder",
        "StaircaseNoise",
        "UNACCOUNTED",
        "reserve_search",
        "search_cost",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_surface_is_pinned(package: str, modules: dict[str, Module]) -> None:
    """``__all__`` of each package root, as a literal list without duplicates, is exactly the pinned list.
    Adding or removing a public name is a decision: change the list here with it."""
    tree = ast.parse(modules[package].source)
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
    ]
    names = ast.literal_eval(value)
    assert len(names) == len(set(names)), "a name is listed twice in __all__"
    assert sorted(names) == PUBLIC[package]


def test_the_complexity_limit_is_enforced_by_ruff() -> None:
    """No function over 25 decision points: ruff's C90 (McCabe) runs with that limit on the whole tree."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C90" in config["select"]
    assert config["mccabe"]["max-complexity"] <= MAX_COMPLEXITY


# --------------------------------------------------------------------------------------------------
# the checkers find what they must (synthetic modules)


def _synthetic(**sources: str) -> dict[str, Module]:
    return {
        name.replace("__", "."): Module(name.replace("__", "."), text, False)
        for name, text in sources.items()
    }


def test_a_cycle_through_a_function_level_import_is_found() -> None:
    modules = _synthetic(
        pkg__a="from pkg import b\n",
        pkg__b="def f():\n    import pkg.c\n",
        pkg__c="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n",
        pkg__d="import pkg.a\n",
    )
    assert cycles(import_graph(modules)) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]


def test_a_cycle_through_a_string_import_is_found() -> None:
    modules = _synthetic(
        pkg__a="import importlib\n\ndef load():\n    return importlib.import_module('pkg.b')\n",
        pkg__b="from . import a\n",
    )
    assert cycles(import_graph(modules)) == [frozenset({"pkg.a", "pkg.b"})]
    assert cycles(import_graph(_synthetic(pkg__a="import pkg.b\n", pkg__b="import os\n"))) == []


def test_a_forbidden_import_is_found() -> None:
    modules = _synthetic(
        dp_pipeline__accounting__x="def f():\n    from dp_pipeline.mechanisms._laplace import Laplace\n",
        dp_pipeline__mechanisms___laplace="import dp_pipeline.events\n",
        dp_pipeline__frames__y="import airflow.models\n",
        dp_pipeline__airflow__z="import airflow.models\n",
        dp_pipeline__events="",
    )
    assert layer_violations(import_graph(modules)) == [
        "dp_pipeline.accounting.x imports dp_pipeline.mechanisms._laplace",
        "dp_pipeline.frames.y imports airflow",
    ]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import sys\nframe = sys._getframe(1)\n", "_getframe"),
        ("from sys import _getframe\n", "from sys import _getframe"),
        ("def f(frame):\n    return frame.f_locals['self']\n", "f_locals"),
        ("import inspect\nstack = inspect.stack()\n", "inspect.stack"),
        ("import inspect\nframe = inspect.currentframe()\n", "inspect.currentframe"),
        ("def f(a, b):\n    return g('name', locals())\n", "locals()"),
        ("def f(a, b):\n    return {k: v for k, v in vars().items()}\n", "vars()"),
    ],
)
def test_frame_inspection_is_found(source: str, what: str) -> None:
    assert [w for _, w in frame_inspection(source)] == [what]


def test_plain_code_has_no_frame_inspection() -> None:
    assert frame_inspection("import sys\n\ndef f(obj):\n    return vars(obj), sys.argv, obj.f_lineno\n") == []
