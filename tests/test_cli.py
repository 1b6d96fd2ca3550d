"""The ``dp-pipeline`` command on a real SQLite ledger: every command, JSON output checked against the
accountant's own numbers, and errors as one line on stderr with a non-zero exit status."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("typer")

from typer.testing import CliRunner, Result

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import group_event, ledger_entries
from dp_pipeline.accounting.ledger._schema import HEAD_REVISION
from dp_pipeline.cli import app
from dp_pipeline.mechanisms import Gaussian, KRandomizedResponse, Laplace, Staircase

SCRIPT = Path(sys.executable).parent / "dp-pipeline"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def run(
    *args: str, url: str | None = None, env: dict[str, str] | None = None, stdin: str | None = None
) -> Result:
    argv = [*args, *(["--ledger", url] if url is not None else [])]
    return CliRunner().invoke(app, argv, env={"COLUMNS": "200", **(env or {})}, input=stdin)


def ok(*args: str, url: str | None = None, **kwargs: Any) -> Result:
    result = run(*args, url=url, **kwargs)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    return result


def as_json(*args: str, url: str | None = None, **kwargs: Any) -> Any:
    return json.loads(ok(*args, "--json", url=url, **kwargs).stdout)


def fails(code: int, *args: str, url: str | None = None, match: str = "", **kwargs: Any) -> str:
    """Run a command that must fail: exit ``code``, one line on stderr, nothing on stdout, no traceback."""
    result = run(*args, url=url, **kwargs)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]


def initialised(url: str) -> str:
    ok("ledger", "init", url=url)
    return url


def g(guarantee: Any) -> dict[str, Any]:
    return guarantee.to_dict()


# ------------------------------------------------------------------------------------------------ ledger


def test_ledger_init_creates_a_ledger_once(url: str, tmp_path: Path) -> None:
    out = ok("ledger", "init", url=url).stdout
    assert "ledger ready" in out and HEAD_REVISION in out and (tmp_path / "ledger.db").exists()
    again = as_json("ledger", "init", url=url)
    assert again == {"ledger": url, "schema_revision": HEAD_REVISION, "datasets": []}
    PrivacyAccountant(url, create=False).close()  # a real ledger


def test_ledger_verify_passes_and_detects_tampering(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "2", url=url)
    acct = PrivacyAccountant(url)
    acct.spend("d", PureDP(0.5), label="count")
    acct.spend("d", PureDP(0.25))
    report = acct.verify()
    acct.close()
    assert "ledger verified: 5 records" in ok("ledger", "verify", url=url).stdout
    assert as_json("ledger", "verify", "d", url=url) == {
        "verified": True,
        "datasets": ["d"],
        "records": 5,
        "signatures": False,
        "signed_records": 0,
        "anchored": False,
        "findings": [],
    }
    assert report.records == 5
    conn = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    conn.execute("DROP TRIGGER dp_ledger_records_no_update")
    conn.execute("UPDATE dp_ledger_records SET body = replace(body, '0.5', '0.05') WHERE seq = 2")
    conn.close()
    fails(1, "ledger", "verify", url=url, match="record seq=2: hash does not match")
    fails(1, "ledger", "verify", "d", "--json", url=url, match="ledger verification failed")
    fails(2, "ledger", "verify", "ghost", url=url, match="dataset 'ghost' has no privacy budget")


def test_ledger_anchor_then_verify_against_it_catches_a_rollback(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    shutil.copy(tmp_path / "ledger.db", tmp_path / "backup.db")  # taken with the budget only
    with PrivacyAccountant(url) as acct:  # closed: no connection is left on the file that is replaced
        acct.spend("d", PureDP(1.0))
    anchor = tmp_path / "anchor.json"
    assert "anchor written" in ok("ledger", "anchor", "--output", str(anchor), url=url).stdout
    assert json.loads(anchor.read_text())["datasets"]["d"]["seq"] == 3
    out = as_json("ledger", "verify", "--anchor", str(anchor), url=url)
    assert out["anchored"] and out["records"] == 3
    for name in ("ledger.db-wal", "ledger.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.db", tmp_path / "ledger.db")  # an older copy put back
    ok("ledger", "verify", url=url)
    fails(1, "ledger", "verify", "--anchor", str(anchor), url=url, match="ends at seq=1")
    fails(2, "ledger", "verify", "--anchor", str(tmp_path / "none.json"), url=url, match="anchor file")


def test_ledger_grant_prints_the_least_privilege_sql(url: str) -> None:
    out = ok("ledger", "grant", "--role", "dp_writer").stdout
    assert 'GRANT SELECT, INSERT ON dp_ledger_records TO "dp_writer";' in out
    fails(2, "ledger", "grant", "--role", "x; drop", match="plain PostgreSQL identifier")
    initialised(url)
    fails(2, "ledger", "grant", "--role", "w", "--apply", url=url, match="needs a PostgreSQL ledger")


def test_ledger_cancel_of_an_open_reservation(url: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    acct = PrivacyAccountant(url)
    acct.reserve("d", PureDP(0.25), key="dag/task/run/1", label="worker died")
    acct.spend("d", PureDP(0.5), key="done")
    out = as_json("ledger", "cancel", "d", "dag/task/run/1", "--reason", "killed before reading", url=url)
    assert (out["status"], out["key"]) == ("released", "dag/task/run/1")
    assert out["cost"] == g(ApproxDP(0.25, 0.0))
    assert out["remaining"]["guarantee"] == g(acct.remaining("d").guarantee) == g(ApproxDP(0.5, 0.0))
    last = ledger_entries(acct.store, "d")[-1]
    assert (last.kind, last.key, last.reason) == ("release", "dag/task/run/1", "killed before reading")
    assert last.actor is not None and "@" in last.actor  # user@host by default
    text = ok(
        "ledger", "cancel", "d", "dag/task/run/1", "--reason", "again", "--actor", "ops", url=url
    ).stdout
    assert "is cancelled" in text  # cancelling again changes nothing
    assert (
        len(ledger_entries(acct.store, "d")) == 5
    )  # budget, reserve, reserve and commit of "done", cancellation
    fails(1, "ledger", "cancel", "d", "done", "--reason", "oops", url=url, match="is committed")
    fails(1, "ledger", "cancel", "d", "no-such-key", "--reason", "x", url=url, match="no reservation")
    fails(2, "ledger", "cancel", "d", "done", url=url, match="Missing option '--reason'")
    fails(2, "ledger", "cancel", "d", "done", "--reason", "  ", url=url, match="non-empty 'reason'")
    acct.close()


def test_the_removed_aliases_are_gone(url: str) -> None:
    """``ledger release`` (now ``ledger cancel``) and ``--method`` (now ``--rule``) were removed."""
    initialised(url)
    assert run("ledger", "release", "d", "k", "--reason", "r", url=url).exit_code == 2  # no such command
    assert run("budget", "set", "d", "--epsilon", "1", "--method", "basic", url=url).exit_code == 2
    assert "d" not in PrivacyAccountant(url).datasets()


def test_budget_set_show_and_list_match_the_accountant(url: str) -> None:
    initialised(url)
    shown = as_json("budget", "set", "patients", "--epsilon", "3", "--delta", "1e-6", url=url)
    assert shown["budget"] == g(ApproxDP(3.0, 1e-6)) and shown["rule"] == "basic"
    ok("budget", "set", "genomes", "--mu", "1", "--reason", "initial", "--actor", "alice", url=url)
    ok("budget", "set", "mixed", "--epsilon", "2", "--delta", "1e-5", "--rule", "pure_or_gdp", url=url)
    acct = PrivacyAccountant(url)
    acct.spend("patients", Laplace(epsilon=0.5, sensitivity=1.0), label="count")
    acct.spend("patients", Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0))
    acct.reserve("patients", PureDP(0.1), key="open")
    acct.spend("genomes", Gaussian.from_mu(0.6, sensitivity=1.0))
    acct.spend("mixed", Gaussian.from_mu(0.3, sensitivity=1.0))
    for name in ("patients", "genomes", "mixed"):
        out = as_json("budget", "show", name, url=url)
        spent, remaining = acct.spent(name), acct.remaining(name)
        assert out["dataset"] == name and out["budget"] == g(acct.budget(name).guarantee)
        assert out["rule"] == acct.budget(name).method
        assert out["spent"] == {"guarantee": g(spent.guarantee), "method": spent.method}
        assert out["remaining"] == {"guarantee": g(remaining.guarantee), "method": remaining.method}
        assert out["open_reservations"] == spent.open_reservations
    assert as_json("budget", "show", "patients", url=url)["open_reservations"] == 1
    assert as_json("budget", "show", "genomes", url=url)["spent"]["guarantee"] == g(GaussianDP(0.6))
    listed = as_json("budget", "list", url=url)
    assert [row["dataset"] for row in listed] == ["genomes", "mixed", "patients"]
    assert listed[2] == as_json("budget", "show", "patients", url=url)
    table = ok("budget", "list", url=url).stdout
    assert "patients" in table and "μ-GDP filter" in table and "ε = 3, δ = 1e-06" in table
    assert "μ = 0.6" in ok("budget", "show", "genomes", url=url).stdout
    acct.close()


def test_budget_set_changes_and_refusals(url: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    acct = PrivacyAccountant(url)
    acct.spend("d", PureDP(0.75))
    raised = as_json("budget", "set", "d", "--epsilon", "2", "--reason", "new quarter", url=url)
    assert raised["remaining"]["guarantee"] == g(ApproxDP(1.25, 0.0))
    fails(2, "budget", "set", "d", "--epsilon", "0.5", url=url, match="below what is already spent")
    fails(2, "budget", "set", "d", "--mu", "1", url=url, match="cannot change")
    assert acct.budget("d").guarantee == ApproxDP(2.0, 0.0)  # refusals changed nothing
    history = ledger_entries(acct.store, "d")
    assert [e.kind for e in history] == ["budget", "reserve", "commit", "budget"]
    assert history[-1].reason == "new quarter"
    acct.close()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--epsilon", "abc"], "--epsilon must be a number, got 'abc'"),
        (["--epsilon", "nan"], "--epsilon must be a finite number"),
        (["--epsilon", "inf"], "--epsilon must be a finite number"),
        (["--epsilon", "-1"], "invalid parameter 'epsilon'"),
        (["--epsilon", "1", "--delta", "1.5"], "invalid parameter 'delta'"),
        (["--mu", "-0.5"], "invalid parameter 'mu'"),
        (["--epsilon", "1", "--mu", "1"], "either --epsilon"),
        ([], "either --epsilon"),
        (["--mu", "1", "--delta", "1e-6"], "--delta belongs to an (ε, δ) budget"),
        (["--epsilon", "1", "--rule", "fancy"], "'rule' must be one of 'auto', 'basic', 'gdp_filter'"),
        (["--epsilon", "1", "--rule", "pure_or_gdp"], "needs δ > 0"),
        (["--epsilon", "1", "--rule", "gdp"], "must be one of"),  # a stored name only
        (["--mu", "1", "--rule", "basic"], "rule 'basic' is for ApproxDP budgets"),
    ],
)
def test_budget_set_rejects_bad_numbers_and_changes_nothing(url: str, args: list[str], match: str) -> None:
    initialised(url)
    fails(2, "budget", "set", "d", *args, url=url, match=match)
    assert as_json("budget", "list", url=url) == []


def test_budget_history_lists_one_row_per_release(url: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "2", url=url)
    acct = PrivacyAccountant(url)
    acct.spend(
        "d", Laplace(epsilon=0.5, sensitivity=1.0), label="count [bold]rows[/bold]", key="k1", group_size=2
    )
    acct.reserve("d", PureDP(0.25), key="k2")
    acct.reserve("d", PureDP(0.05), key="k3")
    acct.cancel("d", "k3", "worker died before reading data")
    acct.spend_plan("d", [PureDP(0.1), PureDP(0.2)], key="plan")
    out = as_json("budget", "history", "d", url=url)
    releases = [e for e in ledger_entries(acct.store, "d") if e.kind == "reserve"]
    assert [e["seq"] for e in out] == [e.seq for e in releases]
    assert [(e["key"], e["status"], e["group_size"]) for e in out] == [
        ("k1", "committed", 2),
        ("k2", "open", 1),
        ("k3", "cancelled", 1),
        ("plan", "committed", 1),
    ]
    for shown, entry in zip(out, releases, strict=True):
        assert shown["label"] == entry.label and shown["time"] == entry.time.isoformat()
        assert entry.guarantee is not None and shown["cost"] == g(entry.guarantee)
    assert out[0]["cost"] == g(PureDP(1.0).to_approx_dp()) and out[0]["events"][0]["kind"] == "laplace"
    assert out[2]["reason"] == "worker died before reading data" and out[2]["ended"] is not None
    table = ok("budget", "history", "d", url=url).stdout
    assert "count [bold]rows[/bold]" in table  # shown as written, not read as markup
    assert "cancelled" in table and "open" in table
    assert [e["key"] for e in as_json("budget", "history", "d", "--limit", "2", url=url)] == ["k3", "plan"]
    future = as_json("budget", "history", "d", "--since", "2999-01-01", url=url)
    assert (
        future == []
        and "no releases" in ok("budget", "history", "d", "--since", "2999-01-01", url=url).stdout
    )
    assert len(as_json("budget", "history", "d", "--since", "2000-01-01", url=url)) == 4
    fails(2, "budget", "history", "d", "--since", "yesterday", url=url, match="--since must be an ISO date")
    acct.close()


CLEAR = "\x1b[2J"


def test_history_and_plan_check_escape_control_characters(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "2", url=url)
    with PrivacyAccountant(url) as acct:
        acct.spend("d", PureDP(0.5), label=f"count{CLEAR}", key="k\u202e1\n2")
    table = ok("budget", "history", "d", url=url).stdout
    assert "\x1b" not in table and "\u202e" not in table
    assert "count\\x1b[2J" in table
    assert as_json("budget", "history", "d", url=url)[0]["label"] == f"count{CLEAR}"  # JSON stays exact
    plan = write_plan(tmp_path, [{"epsilon": 0.5, "label": f"mean{CLEAR}"}])
    out = ok("plan", "check", "d", plan, url=url).stdout
    assert "\x1b" not in out and "mean\\x1b[2J" in out
    line = fails(2, "budget", "show", f"typo{CLEAR}", url=url)
    assert "\x1b" not in line
    line = fails(2, "budget", f"lst{CLEAR}", url=url)  # a usage error quoting the argument
    assert "\x1b" not in line and "lst\\x1b[2J" in line


def test_budget_history_fits_80_columns(url: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "100", "--delta", "1e-5", url=url)
    acct = PrivacyAccountant(url)
    for i in range(3):
        acct.spend(
            "d",
            Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0),
            label=f"mean age by region, quarter {i}",
            group_size=4,
        )
    acct.close()
    table = run("budget", "history", "d", url=url, env={"COLUMNS": "80"}).stdout
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if "committed" in line]
    assert len(rows) == 3  # one line per release: nothing folded at 80 columns
    assert all(" 4 " in row for row in rows)  # k is shown


# ------------------------------------------------------------------------------------------------ plans


def write_plan(tmp_path: Path, items: Any, name: str = "plan.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(items) if not isinstance(items, str) else items)
    return str(path)


def test_plan_check_prices_the_plan_as_the_accountant_does(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "3", "--delta", "1e-6", url=url)
    items = [
        {"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1, "label": "count"},
        {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-7, "sensitivity": 1},
        {"mechanism": "staircase", "epsilon": 0.25, "sensitivity": 1},
        {"mechanism": "randomized_response", "epsilon": 1.0, "categories": 3},
        {"epsilon": 0.25},
        {"epsilon": 0.1, "delta": 1e-8},
    ]
    plan = write_plan(tmp_path, items)
    out = as_json("plan", "check", "d", plan, url=url)
    acct = PrivacyAccountant(url)
    events = [
        Laplace(epsilon=0.5, sensitivity=1.0),
        Gaussian(epsilon=0.5, delta=1e-7, sensitivity=1.0),
        Staircase(epsilon=0.25, sensitivity=1.0),
        KRandomizedResponse(epsilon=1.0, categories=[0, 1, 2]),
        PureDP(0.25),
        ApproxDP(0.1, 1e-8),
    ]
    cost = acct.plan_cost("d", events)
    assert out["fits"] is True and out["cost"] == {"guarantee": g(cost.guarantee), "method": cost.method}
    assert cost.method == "pld" and out["cost"]["guarantee"]["delta"] == 1e-6  # composed at the δ left
    assert out["remaining"]["guarantee"] == g(acct.remaining("d").guarantee)
    assert [r["event"]["kind"] for r in out["releases"]] == [
        "laplace",
        "gaussian",
        "staircase",
        "randomized_response",
        "guarantee",
        "guarantee",
    ]
    assert out["releases"][0]["label"] == "count"
    at_delta = as_json("plan", "check", "d", plan, "--delta", "5e-7", url=url)
    assert at_delta["cost"]["guarantee"] == g(acct.plan_cost("d", events, delta=5e-7).guarantee)
    table = ok("plan", "check", "d", plan, url=url).stdout
    assert "fits: yes" in table and "tight PLD" in table and "count" in table
    assert len(ledger_entries(acct.store, "d")) == 1  # a check charges nothing
    acct.close()


def test_plan_check_of_a_pure_plan_leaves_delta_alone(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "3", "--delta", "1e-6", url=url)
    plan = write_plan(
        tmp_path, [{"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}] * 2 + [{"epsilon": 0.25}]
    )
    out = as_json("plan", "check", "d", plan, url=url)
    assert out["cost"] == {"guarantee": g(ApproxDP(1.25, 0.0)), "method": "basic"}


def test_plan_check_that_does_not_fit_exits_1(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    acct = PrivacyAccountant(url)
    acct.spend("d", PureDP(0.5))
    fits = write_plan(tmp_path, [{"epsilon": 0.25}, {"epsilon": 0.25}], "fits.json")
    too_much = write_plan(tmp_path, [{"epsilon": 0.25}] * 3, "too_much.json")
    assert as_json("plan", "check", "d", fits, url=url)["fits"] is True  # exactly what remains
    result = run("plan", "check", "d", too_much, "--json", url=url)
    assert result.exit_code == 1 and json.loads(result.stdout)["fits"] is False
    assert json.loads(result.stdout)["cost"]["guarantee"] == g(ApproxDP(0.75, 0.0))
    assert result.stderr.startswith("error: the plan (ε = 0.75, δ = 0) does not fit")
    table = run("plan", "check", "d", too_much, url=url)
    assert table.exit_code == 1 and "fits: no" in table.stdout
    acct.close()


def test_plan_check_on_a_gdp_budget_with_group_sizes(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "g", "--mu", "1", url=url)
    same = write_plan(
        tmp_path,
        [
            {"mu": 0.3, "group_size": 2},
            {"mechanism": "gaussian", "mu": 0.2, "sensitivity": 1, "group_size": 2},
        ],
    )
    mixed = write_plan(
        tmp_path,
        [{"mu": 0.3}, {"mechanism": "gaussian", "mu": 0.2, "sensitivity": 1, "group_size": 3}],
        "m.json",
    )
    acct = PrivacyAccountant(url)
    out = as_json("plan", "check", "g", same, url=url)
    expected = acct.plan_cost("g", [GaussianDP(0.3), Gaussian.from_mu(0.2, sensitivity=1.0)], group_size=2)
    assert out["cost"]["guarantee"] == g(expected.guarantee) and out["fits"] is True
    out = as_json("plan", "check", "g", mixed, url=url)
    grouped = [group_event(Gaussian.from_mu(0.2, sensitivity=1.0).event, 3)]
    expected = acct.plan_cost("g", [GaussianDP(0.3), *grouped])
    assert out["cost"]["guarantee"] == g(expected.guarantee)
    assert out["cost"]["guarantee"]["mu"] == pytest.approx((0.3**2 + 0.6**2) ** 0.5)
    assert [r["group_size"] for r in out["releases"]] == [1, 3]
    fails(1, "plan", "check", "g", write_plan(tmp_path, [{"epsilon": 0.1, "delta": 1e-6}], "a.json"), url=url)
    acct.close()


def test_plan_check_reads_standard_input(url: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    out = as_json("plan", "check", "d", "-", url=url, stdin='[{"epsilon": 0.5}]')
    assert out["cost"]["guarantee"] == g(ApproxDP(0.5, 0.0))


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        ("{", "is not valid JSON"),
        ('[{"epsilon": NaN}]', "NaN is not a number"),
        ("[]", "non-empty JSON list"),
        ('{"epsilon": 1}', "non-empty JSON list"),
        ("[1.5]", "plan item 1 must be a JSON object"),
        ('[{"epsilon": 0.1}, {"mechanism": "lapl", "epsilon": 1}]', 'plan item 2: unknown mechanism "lapl"'),
        (
            '[{"mechanism": "laplace", "epsilon": 1, "sensitivity": 1, "sensitivty": 1}]',
            "invalid parameter 'sensitivty'",
        ),
        ('[{"mechanism": "laplace", "epsilon": -1, "sensitivity": 1}]', "invalid parameter 'epsilon'"),
        ('[{"mechanism": "laplace", "epsilon": "1", "sensitivity": 1}]', "invalid parameter 'epsilon'"),
        ('[{"epsilon": 1, "mu": 1}]', "expected a 'mechanism'"),
        ('[{"epsilon": 1, "group_size": 0}]', "'group_size' must be a positive integer"),
        ('[{"epsilon": 1, "group_size": 1.5}]', "'group_size' must be a positive integer"),
        ('[{"epsilon": true}]', "invalid parameter 'epsilon'"),
    ],
)
def test_plan_check_rejects_bad_plans(url: str, tmp_path: Path, plan: str, match: str) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    fails(2, "plan", "check", "d", write_plan(tmp_path, plan), url=url, match=match)


def test_plan_check_refuses_non_utf8_and_deeply_nested_plans(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    (tmp_path / "latin1.json").write_bytes('[{"epsilon": 0.5, "label": "caf\u00e9"}]'.encode("latin-1"))
    fails(2, "plan", "check", "d", str(tmp_path / "latin1.json"), url=url, match="is not UTF-8 text")
    deep = "[" * 100_000 + "]" * 100_000
    fails(2, "plan", "check", "d", "-", url=url, stdin=deep, match="nested too deeply")
    nested = write_plan(tmp_path, "[" + "[" * 900 + "]" * 900 + "]")
    fails(2, "plan", "check", "d", nested, url=url, match="must be a JSON object, got a JSON array")


# ------------------------------------------------------------------------------------------------ errors


def test_no_ledger_a_missing_file_and_a_memory_ledger_are_refused(tmp_path: Path) -> None:
    fails(2, "budget", "list", match="no ledger given: pass --ledger URL or set DP_PIPELINE_LEDGER")
    missing = tmp_path / "typo.db"
    fails(2, "budget", "list", url=f"sqlite:///{missing}", match="create it with 'dp-pipeline ledger init")
    assert not missing.exists()  # nothing created by a read
    fails(2, "ledger", "init", url="memory://", match="in-memory ledger")
    fails(2, "budget", "list", url="nosuchdb://x", match="--ledger must be a SQLAlchemy URL")


def test_a_plain_path_names_the_sqlite_file_and_says_so(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    path = str(tmp_path / "ledger.db")
    result = run("budget", "show", "d", "--json", url=path)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["budget"] == g(ApproxDP(1.0, 0.0))
    assert result.stderr.strip() == f"note: --ledger {path} is a path, not a URL; using sqlite:///{path}"
    fails(2, "budget", "show", "d", url=str(tmp_path / "typo.db"), match="no ledger at")


def test_budget_set_keeps_the_delta_when_only_epsilon_changes(url: str) -> None:
    initialised(url)
    ok("budget", "set", "survey", "--epsilon", "2", "--delta", "1e-6", url=url)
    acct = PrivacyAccountant(url)
    acct.spend("survey", Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0))  # all of δ is spent
    raised = as_json("budget", "set", "survey", "--epsilon", "3", url=url)
    assert raised["budget"] == g(ApproxDP(3.0, 1e-6))
    assert acct.budget("survey").guarantee == ApproxDP(3.0, 1e-6)
    acct.close()


SECRET_PASSWORD = "S3CRET-PASSWORD-42"


@pytest.mark.parametrize(
    ("code", "ledger_url"),
    [
        (2, f"postgresql:/alice:{SECRET_PASSWORD}@db.example/ledger"),  # one slash missing
        (2, f"postgresql//alice:{SECRET_PASSWORD}@db.example/ledger"),
        (2, f"postgresql://alice:{SECRET_PASSWORD}@db.example:five/ledger"),  # a port that is not a number
        (1, f"postgresql://alice:{SECRET_PASSWORD}@127.0.0.1:1/ledger?connect_timeout=2"),  # unreachable
        (2, f"nosuchdb://alice:{SECRET_PASSWORD}@db.example/ledger"),
    ],
)
def test_a_bad_ledger_url_is_refused_without_printing_its_password(code: int, ledger_url: str) -> None:
    line = fails(code, "budget", "list", url=ledger_url)
    assert "S3CRET" not in line and "alice:***@" in line


def test_a_url_without_its_scheme_is_refused_not_created_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = fails(2, "ledger", "init", url=f"alice:{SECRET_PASSWORD}@db.example", match="without its scheme")
    assert "S3CRET" not in line and "alice:***@" in line
    assert list(tmp_path.iterdir()) == []


def test_a_nul_byte_in_the_ledger_path_is_invalid_input(tmp_path: Path) -> None:
    fails(2, "ledger", "init", url=f"sqlite:///{tmp_path}/led\x00ger.db", match="NUL byte")
    assert list(tmp_path.iterdir()) == []


def test_the_environment_names_the_ledger_and_the_option_wins(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "1", env={"DP_PIPELINE_LEDGER": url})
    assert [r["dataset"] for r in as_json("budget", "list", env={"DP_PIPELINE_LEDGER": url})] == ["d"]
    other = initialised(f"sqlite:///{tmp_path / 'other.db'}")
    assert as_json("budget", "list", url=other, env={"DP_PIPELINE_LEDGER": url}) == []


def test_unknown_dataset_corrupt_and_newer_ledgers(url: str, tmp_path: Path) -> None:
    initialised(url)
    empty = fails(
        2,
        "budget",
        "show",
        "ghost",
        url=url,
        match=f"dataset 'ghost' has no privacy budget in the ledger {url}",
    )
    assert "a new, empty ledger was opened" in empty and "dp-pipeline budget set ghost --epsilon" in empty
    assert "acct." not in empty  # the command line suggests its command, not Python
    ok("budget", "set", "d", "--epsilon", "1", url=url)
    assert "empty ledger" not in fails(2, "budget", "show", "ghost", url=url, match="no privacy budget")
    fails(2, "budget", "history", "ghost", url=url, match="dataset 'ghost' has no privacy budget")
    fails(2, "plan", "check", "ghost", write_plan(tmp_path, [{"epsilon": 1}]), url=url, match="'ghost'")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 200)
    fails(1, "budget", "list", url=f"sqlite:///{garbage}", match="corrupt or not an SQLite database")
    conn = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    conn.execute("UPDATE dp_ledger_schema SET version_num = '9999_future'")
    conn.close()
    fails(1, "budget", "list", url=url, match="newer dp-pipeline")
    fails(1, "ledger", "init", url=url, match="newer dp-pipeline")


def test_usage_errors_are_one_line(url: str) -> None:
    initialised(url)
    fails(2, "budget", "sett", url=url, match="No such command 'sett'")
    fails(2, "budget", "show", url=url, match="Missing argument")
    fails(2, "budget", "show", "d", "--jsn", url=url, match="No such option")
    assert run("budget").exit_code == 2 and "show" in run("budget").stdout  # a group alone: its help


# ------------------------------------------------------------------------------------------------ packaging


@pytest.mark.processes
def test_console_script_runs(url: str) -> None:
    help_run = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert help_run.returncode == 0 and "budget" in help_run.stdout and "plan" in help_run.stdout
    env = {"PATH": "/usr/bin:/bin", "DP_PIPELINE_LEDGER": url, "COLUMNS": "200"}
    for args in (["ledger", "init"], ["budget", "set", "d", "--epsilon", "1.5"]):
        done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        [str(SCRIPT), "budget", "show", "d", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert json.loads(shown.stdout)["remaining"]["guarantee"] == g(ApproxDP(1.5, 0.0))
    missing = subprocess.run(
        [str(SCRIPT), "budget", "show", "ghost"], capture_output=True, text=True, timeout=120, env=env
    )
    assert missing.returncode == 2 and missing.stdout == "" and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines() == [missing.stderr.strip()]


@pytest.mark.processes
def test_importing_the_library_does_not_import_the_cli_extra() -> None:
    code = "import sys, dp_pipeline, dp_pipeline.accounting; print(sorted(sys.modules))"
    modules = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'typer'" not in modules and "'rich'" not in modules


@pytest.mark.processes
def test_a_missing_cli_extra_names_the_install_command() -> None:
    code = "import sys; sys.modules['typer'] = None; import dp_pipeline.cli"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and 'pip install "dp-pipeline[cli]"' in done.stderr


def test_the_relation_is_set_and_shown(url: str, tmp_path: Path) -> None:
    initialised(url)
    ok("budget", "set", "d", "--epsilon", "2", "--relation", "add_remove", url=url)
    ok("budget", "set", "r", "--epsilon", "2", url=url)
    assert as_json("budget", "show", "d", url=url)["relation"] == "add_remove"
    assert as_json("budget", "show", "r", url=url)["relation"] == "replace_one"  # the default
    assert "add_remove" in ok("budget", "show", "d", url=url).stdout
    plan = write_plan(tmp_path, [{"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}])
    assert as_json("plan", "check", "d", plan, url=url)["relation"] == "add_remove"
    assert "relation:   add_remove" in ok("plan", "check", "d", plan, url=url).stdout
    rr = write_plan(tmp_path, [{"mechanism": "randomized_response", "epsilon": 0.5}], "rr.json")
    fails(1, "plan", "check", "d", rr, url=url, match="relation='replace_one'")
    bad = ("budget", "set", "r", "--epsilon", "2", "--relation", "swap")
    fails(2, *bad, url=url, match="'relation' must be")


def test_plan_check_help_documents_the_plan_format() -> None:
    out = run("plan", "check", "--help").stdout
    assert '{"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}' in out
    assert '"group_size"' in out and "check-dags" in out


@pytest.mark.processes
def test_version_prints_the_project_version() -> None:
    """``--version`` prints the version pyproject.toml declares (read here with tomllib), in the app and
    through ``python -m dp_pipeline.cli``, and exits 0 without a ledger."""
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert ok("--version").stdout == f"dp-pipeline {declared}\n"
    done = subprocess.run(
        [sys.executable, "-m", "dp_pipeline.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout == f"dp-pipeline {declared}\n" and done.stderr == ""
