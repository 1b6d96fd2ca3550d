"""``dp-pipeline budget set --partitions`` and what ``budget show`` says per partition."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("typer")

from typer.testing import CliRunner

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import partition_spending
from dp_pipeline.cli import app

_ADD_REMOVE = ("--relation", "add_remove")  # partitioned budgets require add/remove


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def test_budget_show_lists_what_each_partition_spent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    shown = json.loads(
        _run(
            "budget",
            "set",
            "visits",
            "--epsilon",
            "2",
            *_ADD_REMOVE,
            "--partitions",
            "2",
            "--json",
            "--ledger",
            url,
        )
    )
    assert shown["partitions"] == 2 and shown["partition_spent"] == {}
    with PrivacyAccountant(url, create=False) as acct:
        acct.spend("visits", PureDP(1.0), partition="2026-11-24")
        acct.spend("visits", PureDP(0.5), partition=["2026-11-24", "2026-11-25"])
        expected = {
            name: report.guarantee.to_dict()
            for name, report in partition_spending(acct.store, "visits").items()
        }
    status = json.loads(_run("budget", "show", "visits", "--json", "--ledger", url))
    assert {name: spent["guarantee"] for name, spent in status["partition_spent"].items()} == expected
    assert expected == {  # 1 + 0.5 on the 24th, 0.5 on the 25th
        "2026-11-24": {"type": "approx", "epsilon": 1.5, "delta": 0.0},
        "2026-11-25": {"type": "approx", "epsilon": 0.5, "delta": 0.0},
    }
    table = _run("budget", "show", "visits", "--ledger", url)
    assert "at most 2 per person" in table and "2026-11-25" in table and "ε = 1.5" in table
    assert "read under add_remove" in " ".join(table.split())  # the relation the rule was read under
    listed = json.loads(_run("budget", "list", "--json", "--ledger", url))
    assert listed == [status]


def test_a_bad_number_of_partitions_is_an_input_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    result = CliRunner().invoke(
        app, ["budget", "set", "v", "--epsilon", "1", *_ADD_REMOVE, "--partitions", "0", "--ledger", url]
    )
    assert result.exit_code == 2 and "partitions" in result.stderr
    assert json.loads(_run("budget", "list", "--json", "--ledger", url)) == []


def _plan_check(url: str, plan: Path, *partitions: str) -> tuple[int, dict[str, Any]]:
    named = [arg for name in partitions for arg in ("--partition", name)]
    result = CliRunner().invoke(
        app, ["plan", "check", "visits", str(plan), *named, "--json", "--ledger", url]
    )
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_plan_check_prices_a_plan_on_the_partitions_it_names(tmp_path: Path) -> None:
    """ε = 1 with L = 1, and 0.625 already spent on 2026-11-24. A plan of one Laplace release of ε = 0.5 fits
    a new day (the largest day then stays 0.625), not the 24th (0.625 + 0.5), not the whole dataset (it
    counts for every day), and not the 24th and 25th together; each verdict is the accountant's, computed
    independently here as the largest day total within ε = 1."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    _run("budget", "set", "visits", "--epsilon", "1", *_ADD_REMOVE, "--partitions", "1", "--ledger", url)
    with PrivacyAccountant(url, create=False) as acct:
        acct.spend("visits", PureDP(0.625), partition="2026-11-24")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}]))
    spent = {"2026-11-24": Fraction(5, 8)}

    def fits(named: tuple[str, ...]) -> bool:  # L = 1: the largest day total (a whole release counts in each)
        days = {
            day: spent.get(day, 0) + (Fraction(1, 2) if not named or day in named else 0)
            for day in {*spent, *named}
        }
        return max(days.values()) <= 1

    for named in [("2026-11-25",), ("2026-11-24",), (), ("2026-11-24", "2026-11-25")]:
        status, result = _plan_check(url, plan, *named)
        assert result["fits"] is fits(named) and status == (0 if fits(named) else 1), named
        assert result["partitions"] == list(named)
        assert result["cost"]["guarantee"]["epsilon"] == 0.5
    _, result = _plan_check(url, plan, "2026-11-24", "2026-11-25")
    assert result["partition_spent"] == {
        "2026-11-24": {"guarantee": {"type": "approx", "epsilon": 0.625, "delta": 0.0}, "method": "basic"},
        "2026-11-25": None,  # a new partition: nothing spent on it
    }
    table = CliRunner().invoke(
        app,
        ["plan", "check", "visits", str(plan), "--partition", "2026-11-25", "--ledger", url],
        env={"COLUMNS": "200"},
    )
    assert (
        table.exit_code == 0
        and "partition:  2026-11-25, spent so far nothing (a new partition)" in table.stdout
    )
    refused = CliRunner().invoke(
        app, ["plan", "check", "visits", str(plan), "--partition", "2026-11-24", "--ledger", url]
    )
    assert refused.exit_code == 1 and "on the partitions ['2026-11-24']" in refused.stderr
    with PrivacyAccountant(url, create=False) as acct:
        assert [e.partitions for e in acct.history("visits")] == [("2026-11-24",)]  # nothing charged


def test_a_partition_of_a_dataset_that_is_not_partitioned_is_an_input_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    _run("budget", "set", "flat", "--epsilon", "1", "--ledger", url)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"epsilon": 0.5}]))
    result = CliRunner().invoke(
        app, ["plan", "check", "flat", str(plan), "--partition", "a", "--ledger", url]
    )
    assert result.exit_code == 2 and "not partitioned" in result.stderr


def test_history_shows_the_partitions_each_release_named(tmp_path: Path) -> None:
    """Releases on one day, on two days, on the whole dataset, and one paid from a day's reservation by its
    rendered name: the JSON lists each record's partitions (empty: the whole dataset), the table a column."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    _run("budget", "set", "visits", "--epsilon", "2", *_ADD_REMOVE, "--partitions", "2", "--ledger", url)
    with PrivacyAccountant(url, create=False) as acct:
        acct.spend("visits", PureDP(0.25), partition="2026-11-24", label="one day")
        acct.spend("visits", PureDP(0.25), partition=["2026-11-24", "2026-11-25"], label="two days")
        acct.spend("visits", PureDP(0.25), label="whole")
        task = acct.reserve("visits", PureDP(0.5), key="task", partition="2026-11-26", label="task")
        task.spend("visits", PureDP(0.25), partition="2026-11-26", label="paid by name")
        task.commit()
        expected = [(e.label, list(e.partitions)) for e in acct.history("visits")]
    assert expected == [
        ("one day", ["2026-11-24"]),
        ("two days", ["2026-11-24", "2026-11-25"]),
        ("whole", []),
        ("task", ["2026-11-26"]),
        ("paid by name", ["2026-11-26"]),
    ]
    shown = json.loads(_run("budget", "history", "visits", "--json", "--ledger", url))
    assert [(e["label"], e["partitions"]) for e in shown] == expected
    assert shown[-1]["paid_from"] == "task"
    assert {e["relation"] for e in shown} == {"add_remove"}
    table = _run("budget", "history", "visits", "--ledger", url)
    assert "partitions" in table and "2026-11-24, 2026-11-25" in table and "(whole dataset)" in table
    assert "add_remove" in table


def test_ledger_verify_reports_an_old_replace_one_partitioned_dataset(tmp_path: Path) -> None:
    """A ledger written when partitions were accepted on replace-one datasets: verify passes and lists a
    finding per such dataset; budget show reads its partitions under replace-one."""
    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "accounting" / "data" / "ledger_partitions_replace_one.db", path)
    url = f"sqlite:///{path}"
    _run("ledger", "init", "--ledger", url)  # an earlier version's schema is upgraded once, as the CLI says
    shown = json.loads(_run("ledger", "verify", "--json", "--ledger", url))
    assert shown["verified"] and len(shown["findings"]) == 4
    assert any("'visits'" in finding and "ABOVE" in finding for finding in shown["findings"])
    assert "finding: dataset 'coded'" in _run("ledger", "verify", "--ledger", url)
    table = " ".join(_run("budget", "show", "visits", "--ledger", url).split())
    assert "under replace_one by an earlier version" in table
    assert "every partition counts for every person" in table
    # coded holds randomized response on its days: no amount bounds its loss (accounting's reading)
    status = json.loads(_run("budget", "show", "coded", "--json", "--ledger", url))
    assert "treated as spent" in status["spent"]["unbounded"] and "unbounded" in status["remaining"]
    shown_coded = " ".join(_run("budget", "show", "coded", "--ledger", url).split())
    assert "unbounded: the data are spent" in shown_coded
    assert "unbounded" not in json.loads(_run("budget", "show", "visits", "--json", "--ledger", url))["spent"]
