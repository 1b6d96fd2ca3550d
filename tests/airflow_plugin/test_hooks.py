"""PrivacyLedgerHook on real Airflow 3.3: the connection conventions, signing, never creating a ledger,
and connection errors that never show the password."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.airflow_plugin._helpers import ledger_conn_uri

pytestmark = pytest.mark.airflow


def test_sqlite_connection_with_path_as_host_reaches_the_ledger(ledger, tmp_path, monkeypatch) -> None:
    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyLedgerHook

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

    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow import PrivacyLedgerHook
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
    from dp_pipeline.airflow import PrivacyLedgerHook

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
    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.hooks import LedgerConnectionError

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


def test_ledger_conn_uri_helper_matches_design_example() -> None:
    assert ledger_conn_uri(Path("/path/to/ledger.db")) == "sqlite://%2Fpath%2Fto%2Fledger.db"


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

    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.dashboard import create_app

    monkeypatch.setenv("AIRFLOW_CONN_LEDGER_SECRET", conn)
    ok, message = PrivacyLedgerHook("ledger_secret").test_connection()
    assert not ok and "S3CRET" not in message and "alice:***@" in message
    page = TestClient(create_app(lambda: PrivacyLedgerHook("ledger_secret").get_accountant())).get("/")
    assert page.status_code == 503 and "S3CRET" not in page.text and "alice:***@" in page.text


def test_the_dashboard_shares_an_accountant_only_for_the_same_url_and_signing_key(
    ledger, tmp_path, monkeypatch
) -> None:
    """The dashboard keeps one read-only accountant per ledger URL and signing key. Two connections to one
    ledger with different signing keys get accountants of their own (each verifies with its own key), and
    one whose key changes gets a new accountant at the next request; the same URL and key share one. A hook
    keeps no process-wide cache: two hooks open two accountants."""
    import json

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.dashboard import ledger_accountant
    from dp_pipeline.exceptions import LedgerError

    ledger.set_budget("patients", PureDP(2.0))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    def connection(name: str, key: str) -> None:
        conn = {"conn_type": "dpledger", "extra": {"sqlalchemy_url": url, "ledger_secret_key": key}}
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps(conn))

    connection("first", "the first signing key")
    connection("second", "the second signing key")
    connection("twin", "the first signing key")
    first, second, twin = (ledger_accountant(name) for name in ("first", "second", "twin"))
    assert first is not second
    assert first is twin  # same URL, same key
    assert ledger_accountant("first") is first
    connection("first", "a third signing key, rotated")  # a changed key: the next request opens anew
    assert ledger_accountant("first") is not first
    with pytest.raises(LedgerError, match="read-only"):
        first.spend("patients", PureDP(0.25))
    assert PrivacyLedgerHook("first").get_accountant() is not PrivacyLedgerHook("first").get_accountant()
