"""The DAG check on a partitioned dataset: with a logical date each templated name is checked on the partition
it renders to, without one on a partition that has spent nothing; either way the verdict is what
``spend_plan`` of the run's parts, one after the other, does on a copy of the ledger, and what the rule
computed here says (the whole-dataset sum plus the L largest partition sums within the budget)."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_plugin._helpers import ledger_copy

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TODAY, YESTERDAY = "2026-11-22", "2026-11-21"
NEW_DAY, DAY_BEFORE = "2030-01-02", "2030-01-01"  # partitions no release has named

DAG_FILE = """
import datetime as dt
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from dp_pipeline.airflow import dp_guard, dp_task
from dp_pipeline import PureDP
from dp_pipeline.mechanisms import Laplace

with DAG("dp_two_days", schedule="@daily", start_date=dt.datetime(2026, 1, 1), catchup=False):

    @dp_task(dataset="visits/{{ ds }}", mechanism=Laplace(epsilon=0.25, sensitivity=1.0), retries=1)
    def today(mechanism):
        return float(mechanism.randomize(1.0))

    today()
    PythonOperator(
        task_id="yesterday",
        python_callable=lambda: None,
        pre_execute=dp_guard("visits/{{ macros.ds_add(ds, -1) }}", PureDP(0.25)),
    )
"""

# what one run charges: ``today`` twice (its retry), ``yesterday`` once
PARTS = {"today": Fraction(1, 2), "yesterday": Fraction(1, 4)}


def _dag(folder: Path) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    (folder / "two_days.py").write_text(DAG_FILE)
    bag = DagBag(dag_folder=str(folder / "two_days.py"))
    assert not bag.import_errors
    return bag.dags["dp_two_days"]


def _spend_plan_takes(ledger: Any, to: Path, days: dict[str, str]) -> bool:
    """Whether ``spend_plan`` of each day's part, one after the other, is accepted on a copy of the ledger."""
    from dp_pipeline import BudgetExceededError, PureDP

    copy = ledger_copy(ledger.store.url, to)
    try:
        for part, day in days.items():
            copy.spend_plan("visits", [PureDP(0.25)] * int(PARTS[part] / Fraction(1, 4)), partition=day)
    except BudgetExceededError:
        return False
    finally:
        copy.close()
    return True


def _within(earlier: list[tuple[str | None, Fraction]], days: dict[str, str]) -> bool:
    """The rule, computed here: the whole-dataset sum plus the two largest day sums within ε = 1."""
    spends = [*earlier, *((day, PARTS[part]) for part, day in days.items())]
    whole = sum((e for day, e in spends if day is None), Fraction(0))
    sums: dict[str, Fraction] = {}
    for day, e in spends:
        if day is not None:
            sums[day] = sums.get(day, Fraction(0)) + e
    return whole + sum(sorted(sums.values(), reverse=True)[:2]) <= 1


@pytest.mark.parametrize(
    "earlier",
    [
        [],
        [(YESTERDAY, Fraction(1, 4))],
        [("2026-11-20", Fraction(1, 2))],
        [(YESTERDAY, Fraction(1, 2)), ("2026-11-20", Fraction(1, 4))],
        [(None, Fraction(1, 2))],
    ],
)
def test_the_check_agrees_with_spend_plan_on_a_copy_with_and_without_a_logical_date(
    ledger, tmp_path, earlier
) -> None:
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag

    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=2)
    for day, epsilon in earlier:
        ledger.spend("visits", PureDP(float(epsilon)), partition=day)
    dag = _dag(tmp_path)
    cases = {
        "dated": (check_dag(dag, ledger, logical_date=TODAY), {"today": TODAY, "yesterday": YESTERDAY}),
        "undated": (check_dag(dag, ledger), {"today": NEW_DAY, "yesterday": DAY_BEFORE}),
    }
    verdicts = {}
    for mode, (checks, days) in cases.items():
        assert len(checks) == 2 and all(c.dataset == "visits" and c.checked for c in checks)
        totals = {c.tasks[0].task_id: Fraction(c.total.epsilon) for c in checks}
        assert totals == PARTS  # pure releases: each part's tight total is its sum
        assert all(c.ok for c in checks)  # one run (0.5 and 0.25) fits the whole budget
        fits = all(c.fits_remaining for c in checks)
        assert fits is _spend_plan_takes(ledger, tmp_path / f"{mode}.db", days) is _within(earlier, days)
        verdicts[mode] = fits
        if mode == "dated":
            assert {c.partition for c in checks} == {TODAY, YESTERDAY} and not any(
                c.new_partition for c in checks
            )
        else:
            assert {c.partition for c in checks} == {"{{ ds }}", "{{ macros.ds_add(ds, -1) }}"}
            assert all(c.new_partition for c in checks)
            assert all(any("partition that has spent nothing" in w for w in c.warnings) for c in checks)
    assert [e.partitions for e in ledger.history("visits")] == [
        () if day is None else (day,) for day, _ in earlier
    ]  # the check charged nothing


def test_check_command_prints_the_partition_each_line_checks(ledger, tmp_path, capsys) -> None:
    """``airflow dp-pipeline check-dags`` (``python -m dp_pipeline.airflow.check``): with
    ``--logical-date`` each line names the partition it checks; without, the partition templates checked
    as new partitions; a name on a dataset that is not partitioned is a problem (exit 1)."""
    from dp_pipeline import PureDP
    from dp_pipeline.airflow.check import main

    _dag(tmp_path)
    ledger.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=2)
    ledger.spend("visits", PureDP(0.75), partition=YESTERDAY)

    assert main([str(tmp_path), "--ledger-url", ledger.store.url, "--logical-date", TODAY, "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    shown = {(c["dataset"], c["partition"], c["new_partition"], c["fits_remaining"]) for c in checks}
    # yesterday would hold 0.75 + 0.25 and today 0.5: 1.5 > 1 for a person in both
    assert shown == {("visits", TODAY, False, False), ("visits", YESTERDAY, False, False)}

    assert main([str(tmp_path), "--ledger-url", ledger.store.url]) == 0
    table = capsys.readouterr().out
    header, *rows = table.splitlines()
    assert header.split()[:3] == ["DAG", "dataset", "partition"]
    assert any("{{ ds }} (new)" in row for row in rows)
    assert any("{{ macros.ds_add(ds, -1) }} (new)" in row for row in rows)

    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "two_days.py").write_text(DAG_FILE.replace("visits/", "flat/"))
    ledger.set_budget("flat", PureDP(1.0))
    assert main([str(flat), "--ledger-url", ledger.store.url, "--logical-date", TODAY]) == 1
    assert "which is not partitioned" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("visits/{{ ds }}", ("visits", "{{ ds }}")),
        ("clinic/visits/day-{{ ds_nodash }}", ("clinic/visits", "day-{{ ds_nodash }}")),
        ("visits/  {{- ds }}", ("visits", "  {{- ds }}")),
        ("{{ params.name }}/{{ ds }}", None),  # the dataset part is itself templated
        ("visits-{{ ds }}", None),  # no partition
        ("visits/{{ ds }}/raw", None),  # renders to a partition of 'visits/<day>', not of 'visits'
        ("/{{ ds }}", None),
    ],
)
def test_template_partition_splits_only_a_plain_dataset_from_a_templated_partition(
    template: str, expected: tuple[str, str] | None
) -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from dp_pipeline.airflow.templating import render_dataset, template_partition

    with DAG("dp_split", schedule=None, start_date=START):
        task = EmptyOperator(task_id="t")
    assert template_partition(task, template) == expected
    if expected is not None:  # the rendered name splits where the template did
        dataset, partition = expected
        context = {"ds": "2026-11-22", "ds_nodash": "20261122"}
        rendered = render_dataset(task, template, context)
        assert rendered.rpartition("/") == (dataset, "/", render_dataset(task, partition, context))
