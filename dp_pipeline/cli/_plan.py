"""``dp-pipeline plan``: check a plan of releases against what remains of a budget, and calibrate the noise
of planned releases to it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import typer
from rich.table import Table

from dp_pipeline.accounting import partition_spending
from dp_pipeline.cli._app import (
    EXIT_INVALID,
    EXIT_REFUSED,
    DatasetArgument,
    JsonOption,
    LedgerOption,
    _accountant,
    _CommandError,
    _console,
    _errors,
    _number,
    _print_json,
    _typer,
)
from dp_pipeline.cli._shapes import _RULES, _amount, _report_json
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError, printable
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

plan_app = _typer("Check a plan of releases against a budget before anything runs.")

_MECHANISMS = (
    "laplace",
    "gaussian",
    "staircase",
    "randomized_response",
    "bounded_laplace",
    "bounded_staircase",
)
_ITEM_KEYS = {"group_size", "label"}


def _mechanism(name: str, params: dict[str, Any]) -> Callable[[], Any]:
    from dp_pipeline import mechanisms as m

    if name == "randomized_response":
        if "categories" not in params:
            return lambda: m.BinaryRandomizedResponse(**params)
        categories = params["categories"]
        if isinstance(categories, int) and not isinstance(categories, bool):
            params = {**params, "categories": list(range(categories))}
        return lambda: m.KRandomizedResponse(**params)
    if name == "gaussian" and "mu" in params:
        return lambda: m.Gaussian.from_mu(**params)
    classes: dict[str, Any] = {
        "laplace": m.Laplace,
        "gaussian": m.Gaussian,
        "staircase": m.Staircase,
        "bounded_laplace": m.BoundedLaplace,
        "bounded_staircase": m.BoundedStaircase,
    }
    return lambda: classes[name](**params)


def _plan_item(item: Any, where: str) -> tuple[PrivacyEvent, int, str | None]:
    """One plan entry as (event, group size, label)."""
    if not isinstance(item, dict):
        raise _CommandError(f"{where} must be a JSON object, got a JSON {_json_kind(item)}", EXIT_INVALID)
    params = {k: v for k, v in item.items() if k not in _ITEM_KEYS and k != "mechanism"}
    k = item.get("group_size", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise _CommandError(
            f"{where}: 'group_size' must be a positive integer, got {json.dumps(k)}", EXIT_INVALID
        )
    label = item.get("label")
    if label is not None and not isinstance(label, str):
        raise _CommandError(f"{where}: 'label' must be a string", EXIT_INVALID)
    try:
        if "mechanism" in item:
            name = item["mechanism"]
            if name not in _MECHANISMS:
                raise _CommandError(
                    f"{where}: unknown mechanism {json.dumps(name)}; one of {', '.join(_MECHANISMS)}",
                    EXIT_INVALID,
                )
            return _mechanism(name, params)().event, k, label
        if set(params) == {"mu"}:
            return PrivacyEvent(kind="guarantee", guarantee=GaussianDP(params["mu"])), k, label
        if "epsilon" in params and set(params) <= {"epsilon", "delta"}:
            g: Guarantee = (
                PureDP(params["epsilon"])
                if "delta" not in params
                else ApproxDP(params["epsilon"], params["delta"])
            )
            return PrivacyEvent(kind="guarantee", guarantee=g), k, label
    except InvalidParameterError as err:
        raise _CommandError(f"{where}: {err}", EXIT_INVALID) from None
    raise _CommandError(
        f"{where}: expected a 'mechanism' with its parameters, 'epsilon' (and 'delta'), or 'mu'; got keys "
        f"{sorted(item)}",
        EXIT_INVALID,
    )


def _json_kind(value: Any) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number")


def _read_plan(source: str) -> list[Any]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as err:
        raise _CommandError(f"cannot read the plan {source}: {err.strerror or err}", EXIT_INVALID) from None
    except UnicodeDecodeError as err:
        raise _CommandError(
            f"the plan {source} is not UTF-8 text (byte {err.start} cannot be decoded)", EXIT_INVALID
        ) from None

    def no_constants(name: str) -> NoReturn:
        raise ValueError(f"{name} is not a number")

    try:
        data = json.loads(text, parse_constant=no_constants)
    except ValueError as err:
        raise _CommandError(f"the plan {source} is not valid JSON: {err}", EXIT_INVALID) from None
    except RecursionError:
        raise _CommandError(f"the plan {source} is nested too deeply to be a plan", EXIT_INVALID) from None
    if not isinstance(data, list) or not data:
        raise _CommandError(f"the plan {source} must be a non-empty JSON list of releases", EXIT_INVALID)
    return data


@plan_app.command("check")
def plan_check(
    dataset: DatasetArgument,
    plan_file: Annotated[
        str, typer.Argument(metavar="PLAN.json", help="A JSON list of releases ('-': standard input).")
    ],
    delta: Annotated[
        str | None,
        typer.Option(
            "--delta",
            metavar="FLOAT",
            help="Read the plan's ε at this δ ((ε, δ) budgets; default 0 for a pure plan, else the δ left).",
            show_default=False,
        ),
    ] = None,
    partition: Annotated[
        list[str] | None,
        typer.Option(
            "--partition",
            metavar="NAME",
            help="On a partitioned dataset, a partition the plan reads (repeat for several; none: the "
            "whole dataset).",
            show_default=False,
        ),
    ] = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Whether a plan fits what remains of a dataset's budget, at its tight total; exit 1 if not.

    PLAN.json is a JSON list of releases (not a DAG folder: for DAGs use the DAG check,
    'airflow dp-pipeline check-dags'). Each item is one of:

      {"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}
      {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-6, "sensitivity": 1}
      {"mechanism": "gaussian", "mu": 0.5, "sensitivity": 1}
      {"mechanism": "randomized_response", "epsilon": 1, "categories": 3}
      {"epsilon": 0.5, "delta": 1e-6}    a release known by its guarantee
      {"mu": 0.5}                        a μ-GDP release

    Mechanisms: laplace, gaussian, staircase, randomized_response, bounded_laplace, bounded_staircase.
    Their other keys are the mechanism's parameters ("categories": a list or a count, for k-ary RR).
    Every item may add "group_size" (k ≥ 1) and "label".

    On a partitioned dataset, --partition names the partitions the plan reads (each is charged the plan;
    the check composes the largest partition totals as spending it would).
    """
    from dp_pipeline.accounting import Request, group_plan

    with _errors():
        items = [_plan_item(item, f"plan item {i}") for i, item in enumerate(_read_plan(plan_file), start=1)]
        plan_delta = None if delta is None else _number(delta, "--delta")
        events, k = group_plan([(e, size) for e, size, _ in items])
        partitions = partition or None
        with _accountant(ledger) as acct:
            cost = acct.plan_cost(dataset, events, k, delta=plan_delta, partition=partitions)
            fits = acct.quote(dataset, Request.plan(events, k, delta=plan_delta, partition=partitions)).fits
            remaining = acct.remaining(dataset)
            spent = partition_spending(acct.store, dataset) if partitions else {}
        result = {
            "dataset": dataset,
            "partitions": list(partition or ()),
            "partition_spent": {
                name: _report_json(spent[name]) if name in spent else None for name in partition or ()
            },
            "fits": fits,
            "cost": _report_json(cost),
            "remaining": _report_json(remaining),
            "budget": cost.budget.to_dict(),
            "relation": cost.relation,
            "releases": [
                {"index": i, "label": label, "group_size": size, "event": e.to_dict()}
                for i, (e, size, label) in enumerate(items, start=1)
            ],
        }
        if as_json:
            _print_json(result)
        else:
            table = Table(title=f"plan for {dataset!r}", title_justify="left")
            for name in ("#", "release", "label", "k", "guarantee", "relation"):
                table.add_column(name, overflow="fold")
            for i, (e, size, label) in enumerate(items, start=1):
                shown = e.relation or f"{cost.relation} (dataset's)"
                table.add_row(str(i), e.kind, printable(label or ""), str(size), _amount(e.guarantee), shown)
            console = _console()
            console.print(table)
            console.print(f"plan total: {_amount(cost.guarantee)} ({_RULES.get(cost.method, cost.method)})")
            console.print(f"relation:   {cost.relation} (the dataset's neighbouring relation)")
            for name in partitions or ():
                before = _amount(spent[name].guarantee) if name in spent else "nothing (a new partition)"
                console.print(f"partition:  {printable(name)}, spent so far {before}")
            console.print(f"remaining:  {_amount(remaining.guarantee)}")
            console.print("fits: yes" if fits else "fits: no")
        if not fits:
            where = f" on the partitions {partitions}" if partitions else ""
            typer.echo(
                printable(
                    f"error: the plan ({_amount(cost.guarantee)}){where} does not fit what remains of "
                    f"{dataset!r} ({_amount(remaining.guarantee)})"
                ),
                err=True,
            )
            raise typer.Exit(EXIT_REFUSED)


# ------------------------------------------------------------------------------------------------ allocation


def _allocated_plan_item(allocated: Any) -> dict[str, Any]:
    """An allocated release as an item of a plan file, which ``plan check`` reads back."""
    release, m = allocated.release, allocated.mechanism
    item: dict[str, Any] = {"mechanism": release.mechanism}
    if release.mechanism == "gaussian":
        item.update(mu=m.mu, sensitivity=m.sensitivity)
    elif release.mechanism == "laplace":
        item.update(epsilon=m.epsilon, sensitivity=m.sensitivity)
    else:
        item["epsilon"] = m.epsilon
        if hasattr(m, "categories"):
            item["categories"] = list(m.categories)
    item["group_size"] = release.group_size
    if release.label is not None:
        item["label"] = release.label
    return item


@plan_app.command("allocate")
def plan_allocate(
    dataset: DatasetArgument,
    plan_file: Annotated[
        str,
        typer.Argument(metavar="PLAN.json", help="A JSON list of planned releases ('-': standard input)."),
    ],
    against: Annotated[
        str,
        typer.Option(
            "--against",
            metavar="remaining|budget",
            help="Fit what remains of the budget (default) or the whole budget.",
        ),
    ] = "remaining",
    ledger: LedgerOption = None,
) -> None:
    """Calibrate the noise of planned releases to a dataset's budget; JSON in, JSON out.

    Finds the least noise whose composition as one plan fits what remains of the budget (the accountant's
    plan check, as 'spend_plan' charges it). PLAN.json is a JSON list of releases, each one of:

      {"mechanism": "gaussian", "sensitivity": 1}
      {"mechanism": "laplace", "sensitivity": 1, "weight": 2, "label": "sum"}
      {"mechanism": "randomized_response", "categories": 3, "group_size": 2}

    "weight" w (default 1): the release gets w times the noise precision (1/variance) of the others.
    "categories" (randomized response only): 2 (binary, the default), a count or a list. Optional:
    "group_size" (k ≥ 1) and "label". The output lists each release's calibrated noise ("std", "event")
    and, under "plan", the calibrated releases as a plan file that 'plan check' reads. Nothing is charged.
    """
    from dp_pipeline._allocation import PlannedRelease, allocate

    with _errors():
        if against not in ("remaining", "budget"):
            raise _CommandError(f"--against must be 'remaining' or 'budget', got {against!r}", EXIT_INVALID)
        side: Literal["remaining", "budget"] = "budget" if against == "budget" else "remaining"
        releases = []
        for i, item in enumerate(_read_plan(plan_file), start=1):
            try:
                releases.append(PlannedRelease.from_dict(item))
            except InvalidParameterError as err:
                raise _CommandError(f"plan item {i}: {err}", EXIT_INVALID) from None
        with _accountant(ledger) as acct:
            allocation = allocate(releases, accountant=acct, dataset=dataset, against=side)
        _print_json(
            {
                "dataset": dataset,
                "against": against,
                "target": allocation.target.to_dict(),
                "cost": {"guarantee": allocation.cost.to_dict(), "method": allocation.method},
                "scale": allocation.scale,
                "releases": [
                    {
                        "index": i,
                        "label": a.release.label,
                        "mechanism": a.release.mechanism,
                        "weight": float(a.release.weight),
                        "group_size": a.release.group_size,
                        "std": a.std,
                        "event": a.event.to_dict(),
                    }
                    for i, a in enumerate(allocation, start=1)
                ],
                "plan": [_allocated_plan_item(a) for a in allocation],
            }
        )
