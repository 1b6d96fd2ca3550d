"""``dp-pipeline budget set --partitions`` and what ``budget show`` says per partition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("typer")

from typer.testing import CliRunner

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.cli import app


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def test_budget_show_lists_what_each_partition_spent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    shown = json.loads(
        _run("budget", "set", "visits", "--epsilon", "2", "--partitions", "2", "--json", "--ledger", url)
    )
    assert shown["partitions"] == 2 and shown["partition_spent"] == {}
    with PrivacyAccountant(url, create=False) as acct:
        acct.spend("visits", PureDP(1.0), partition="2026-11-24")
        acct.spend("visits", PureDP(0.5), partition=["2026-11-24", "2026-11-25"])
        expected = {name: report.guarantee.to_dict() for name, report in acct.partitions("visits").items()}
    status = json.loads(_run("budget", "show", "visits", "--json", "--ledger", url))
    assert {name: spent["guarantee"] for name, spent in status["partition_spent"].items()} == expected
    assert expected == {  # 1 + 0.5 on the 24th, 0.5 on the 25th
        "2026-11-24": {"type": "approx", "epsilon": 1.5, "delta": 0.0},
        "2026-11-25": {"type": "approx", "epsilon": 0.5, "delta": 0.0},
    }
    table = _run("budget", "show", "visits", "--ledger", url)
    assert "at most 2 per person" in table and "2026-11-25" in table and "ε = 1.5" in table
    listed = json.loads(_run("budget", "list", "--json", "--ledger", url))
    assert listed == [status]


def test_a_bad_number_of_partitions_is_an_input_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _run("ledger", "init", "--ledger", url)
    result = CliRunner().invoke(
        app, ["budget", "set", "v", "--epsilon", "1", "--partitions", "0", "--ledger", url]
    )
    assert result.exit_code == 2 and "partitions" in result.stderr
    assert json.loads(_run("budget", "list", "--json", "--ledger", url)) == []
