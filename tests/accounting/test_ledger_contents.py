"""A ledger cannot be crashed by what its rows hold: deeply nested or huge JSON, other types, bytes.

Whatever the record and head columns of an SQLite ledger hold, reading it (verify, reports, the dataset
list, a spend) raises LedgerError naming the record or head row, or works; never RecursionError, a
decoding error or another raw Python error. The depth bound is checked against Python's own parser.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.accounting.ledger import MemoryLedger
from dp_pipeline.accounting.ledger._base import (
    MAX_JSON_DEPTH,
    check_json_text,
    next_record,
    read_json_object,
)
from dp_pipeline.exceptions import LedgerError
from tests.accounting.conftest import untriggered

DEEP = "[" * 200_000 + "]" * 200_000


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, computed with an explicit stack (an independent count)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with a budget, a spend and an open reservation: records of every common kind."""
    path = tmp_path_factory.mktemp("template") / "ledger.db"
    acct = PrivacyAccountant(f"sqlite:///{path}", create=True)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.spend("d", PureDP(0.25), key="spent")
    acct.reserve("d", PureDP(0.25), key="open")
    acct.close()
    return path


def _copy(template: Path, target: Path) -> Path:
    shutil.copy(template, target)
    return target


def _readers(url: str) -> dict[str, Callable[[], Any]]:
    acct = PrivacyAccountant(url)
    return {
        "verify": acct.verify,
        "remaining": lambda: acct.remaining("d"),
        "spend": lambda: acct.spend("d", PureDP(0.01)),
        "datasets": acct.datasets,
        "history": lambda: acct.history("d"),
        "records": lambda: ledger_entries(acct.store, "d"),
    }


def _poke(path: Path, statement: str, value: Any) -> None:
    conn = untriggered(path)  # what the file's owner can do
    conn.execute(statement, (value,))
    conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE dp_ledger_records SET body = ? WHERE seq = 2",
        "UPDATE dp_ledger_budgets SET budget = ?",
        "UPDATE dp_ledger_budgets SET totals = ?",
    ],
)
def test_deeply_nested_json_is_a_ledger_error_naming_the_row(
    template: Path, tmp_path: Path, statement: str
) -> None:
    with pytest.raises(RecursionError):
        json.loads(DEEP)  # what the reader used to do
    path = _copy(template, tmp_path / "ledger.db")
    _poke(path, statement, DEEP)
    where = r"record seq=2, body" if "records" in statement else r"head row"
    for name, read in _readers(f"sqlite:///{path}").items():
        if name in (("history", "records") if "budgets" in statement else ("remaining", "datasets")):
            continue  # they do not read that row
        with pytest.raises(LedgerError, match=rf"dataset 'd', {where}.*nested deeper than {MAX_JSON_DEPTH}"):
            read()


def test_a_deeply_nested_body_is_refused_on_write_and_nothing_is_written() -> None:
    body: dict[str, Any] = {}
    for _ in range(MAX_JSON_DEPTH + 1):
        body = {"x": body}
    with pytest.raises(LedgerError, match=r"dataset 'd', new reserve record seq=1: JSON nested deeper"):
        next_record("d", None, "reserve", body, "k", None)
    deeper = [0]
    for _ in range(100_000):
        deeper = [deeper]
    store = MemoryLedger()
    acct = PrivacyAccountant(store)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    before = store.records("d")

    def run(tx: Any) -> None:
        head = tx.head
        tx.append("reserve", {"x": deeper}, head.state, key="k")

    with pytest.raises(LedgerError, match="nested deeper"):
        store.atomic("d", run)
    assert store.records("d") == before


_NOISE = st.text(alphabet='[]{}"\\ab', max_size=6)  # strings full of brackets, quotes and backslashes


@settings(max_examples=200, deadline=None)
@given(
    shape=st.lists(st.sampled_from(["list", "object"]), min_size=1, max_size=2 * MAX_JSON_DEPTH), noise=_NOISE
)
def test_the_depth_bound_agrees_with_the_parser(shape: list[str], noise: str) -> None:
    """Random nestings of arrays and objects holding strings full of brackets: the bracket scan accepts
    exactly those whose depth (counted here on the parsed value, with a stack) is within the bound."""
    text = json.dumps(noise)
    for level, kind in enumerate(shape):
        quoted = json.dumps(noise)
        text = f"[{text}, 0, {quoted}]" if kind == "list" else f'{{"{level}": {text}, "s": {quoted}}}'
    true_depth = _depth(json.loads(text))
    assert true_depth == len(shape)
    if true_depth <= MAX_JSON_DEPTH:
        check_json_text(text, "x")
    else:
        with pytest.raises(LedgerError, match="nested deeper"):
            check_json_text(text, "x")


def test_numbers_must_be_finite_and_the_value_an_object() -> None:
    for text, problem in (
        ('{"a": 1e400}', "too large for a double"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ("[1]", "not an object"),
        ("{", "not valid JSON"),
        (b"{}", "holds bytes"),
        (None, "holds NoneType"),
        ("{" + '"a":1,' * 10 + '"b": "' + "x" * 10 + '"}', None),
    ):
        if problem is None:
            assert read_json_object(text, "row")["b"] == "x" * 10
            continue
        with pytest.raises(LedgerError, match=rf"^row: .*{problem}"):
            read_json_object(text, "row")


# ------------------------------------------------------------------------------------------- fuzzing

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
_CELL = st.one_of(
    _JSON.map(json.dumps),
    st.text(max_size=40),
    st.binary(max_size=40),
    st.integers(),
    st.floats(allow_nan=True),
    st.none(),
    st.just(DEEP),
    st.just('{"a": ' * 70 + "1" + "}" * 70),
    st.sampled_from(['{"a": NaN}', '{"a": 1e999}', "1" * 5000, '{"totals": {"epsilon": "-1"}}']),
)
_COLUMNS = st.sampled_from(
    [
        ("dp_ledger_records", "body", "seq = 1"),
        ("dp_ledger_records", "body", "seq = 2"),
        ("dp_ledger_records", "body", "seq = 4"),
        ("dp_ledger_records", "kind", "seq = 2"),
        ("dp_ledger_records", "seq", "seq = 3"),
        ("dp_ledger_records", "idem_key", "seq = 4"),
        ("dp_ledger_records", "reservation", "seq = 3"),
        ("dp_ledger_records", "created_at", "seq = 2"),
        ("dp_ledger_records", "sig", "seq = 2"),
        ("dp_ledger_budgets", "budget", "1"),
        ("dp_ledger_budgets", "totals", "1"),
        ("dp_ledger_budgets", "method", "1"),
        ("dp_ledger_budgets", "head_seq", "1"),
    ]
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=_COLUMNS, value=_CELL)
def test_whatever_a_column_holds_readers_raise_only_ledger_errors(
    template: Path, tmp_path: Path, column: tuple[str, str, str], value: Any
) -> None:
    table, name, where = column
    path = _copy(template, tmp_path / "fuzzed.db")
    try:
        _poke(path, f"UPDATE {table} SET {name} = ? WHERE {where}", value)
    except (sqlite3.IntegrityError, OverflowError):
        return  # the column's constraints refuse the value (NOT NULL, UNIQUE, a 64-bit integer)
    for read in _readers(f"sqlite:///{path}").values():
        with contextlib.suppress(LedgerError):
            read()
