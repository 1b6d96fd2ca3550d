"""The ledger connection keeps its secrets where Airflow hides them.

The password lives in the Connection's password field and the signing key in an extra field whose name
Airflow's secrets masker treats as sensitive, so Airflow 3.3's REST API returns neither; the hook registers
both (and the password as it appears URL-encoded inside the ledger URL) with the task-log masker.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.airflow


def _secret(prefix: str) -> str:
    """A secret no other test has registered with the process-wide masker (so masking is this test's)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def _admin_client() -> Any:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    client = TestClient(create_app())
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def test_rest_api_returns_neither_the_password_nor_the_signing_key(tmp_path) -> None:
    from airflow.sdk._shared.secrets_masker import should_hide_value_for_key

    from dp_pipeline.airflow.hooks import SIGNING_KEY_FIELD

    password, key = _secret("pw@/"), _secret("signing-key")
    # Airflow's own rule (not ours) decides what the API hides: the key's field name must match it
    assert should_hide_value_for_key(SIGNING_KEY_FIELD)
    connections = {
        "ledger_pg": {
            "conn_type": "postgres",
            "host": "db.internal",
            "port": 5432,
            "login": "dp",
            "password": password,
            "schema": "ledger",
            "extra": json.dumps({SIGNING_KEY_FIELD: key, "sslmode": "require"}),
        },
        "ledger_ui": {
            "conn_type": "dpledger",
            "host": str(tmp_path / "ledger.db"),
            "extra": json.dumps({"backend": "sqlite", SIGNING_KEY_FIELD: key}),
        },
    }
    client = _admin_client()
    for conn_id, fields in connections.items():
        created = client.post("/api/v2/connections", json={"connection_id": conn_id, **fields})
        assert created.status_code == 201, created.text
        assert password not in created.text and key not in created.text
    for conn_id in connections:
        read = client.get(f"/api/v2/connections/{conn_id}")
        assert read.status_code == 200, read.text
        assert password not in read.text and key not in read.text
        assert json.loads(read.json()["extra"])[SIGNING_KEY_FIELD] == "***"
    listing = client.get("/api/v2/connections")
    assert listing.status_code == 200 and "ledger_pg" in listing.text
    assert password not in listing.text and key not in listing.text


def test_the_legacy_extra_form_is_what_the_rest_api_shows_in_clear() -> None:
    """Why the old form is deprecated: Airflow does not hide a URL or a key named ``ledger_key``."""
    password, key = _secret("legacy-pw"), _secret("legacy-key")
    extra = {"sqlalchemy_url": f"postgresql+psycopg://dp:{password}@db/ledger", "ledger_key": key}
    client = _admin_client()
    body = {"connection_id": "ledger_legacy", "conn_type": "dpledger", "extra": json.dumps(extra)}
    assert client.post("/api/v2/connections", json=body).status_code == 201
    read = client.get("/api/v2/connections/ledger_legacy").text
    assert password in read and key in read


def test_hook_reads_the_documented_connection_and_signs_with_its_key(ledger, tmp_path, monkeypatch) -> None:
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.hooks import SIGNING_KEY_FIELD

    key = _secret("signing-key")
    ledger.set_budget("patients", PureDP(2.0))
    path = tmp_path / "ledger.db"
    for conn in (
        {"conn_type": "sqlite", "host": str(path), "extra": {SIGNING_KEY_FIELD: key}},
        {"conn_type": "dpledger", "host": str(path), "extra": {"backend": "sqlite", SIGNING_KEY_FIELD: key}},
    ):
        monkeypatch.setenv("AIRFLOW_CONN_SIGNED", json.dumps(conn))
        PrivacyLedgerHook("signed").get_accountant().spend("patients", PureDP(0.25))
    assert [r.sig is not None for r in ledger.store.records("patients")] == [False, True, True, True, True]
    assert PrivacyAccountant(f"sqlite:///{path}", key=key).verify().signatures


def test_task_logs_mask_the_password_also_url_encoded_and_the_key(monkeypatch) -> None:
    from airflow.sdk._shared.secrets_masker import redact
    from sqlalchemy.engine import make_url

    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.hooks import SIGNING_KEY_FIELD

    password, key = _secret("p@ss/w:rd"), _secret("signing-key")
    conn = {
        "conn_type": "postgres",
        "host": "db",
        "login": "dp",
        "password": password,
        "schema": "ledger",
        "extra": {SIGNING_KEY_FIELD: key},
    }
    monkeypatch.setenv("AIRFLOW_CONN_MASKED", json.dumps(conn))
    url = PrivacyLedgerHook("masked").get_sqlalchemy_url()
    assert make_url(url).password == password  # the URL carries it, encoded
    encoded = url.split("dp:", 1)[1].rsplit("@db", 1)[0]
    assert encoded != password
    line = f"opening {url} as dp with {password} and key {key}"
    masked = redact(line)
    assert password not in masked and encoded not in masked and key not in masked


def test_legacy_extra_still_works_with_deprecation_warnings_and_is_masked(ledger, tmp_path, monkeypatch):
    from airflow.sdk._shared.secrets_masker import redact

    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow import PrivacyLedgerHook

    key = _secret("legacy-key")
    ledger.set_budget("patients", PureDP(2.0))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv(
        "AIRFLOW_CONN_LEGACY",
        json.dumps({"conn_type": "dpledger", "extra": {"sqlalchemy_url": url, "ledger_key": key}}),
    )
    with pytest.warns(DeprecationWarning) as caught:
        PrivacyLedgerHook("legacy").get_accountant().spend("patients", PureDP(0.25))
    messages = " ".join(str(w.message) for w in caught)
    assert "sqlalchemy_url" in messages and "ledger_key" in messages and key not in messages
    assert PrivacyAccountant(url, key=key).verify().signatures
    assert key not in redact(f"key {key}")

    password = _secret("legacy-pw")
    legacy_pg = {"conn_type": "dpledger", "extra": {"sqlalchemy_url": f"postgresql://u:{password}@db/l"}}
    monkeypatch.setenv("AIRFLOW_CONN_LEGACY_PG", json.dumps(legacy_pg))
    with pytest.warns(DeprecationWarning, match="sqlalchemy_url"):
        PrivacyLedgerHook("legacy_pg").get_sqlalchemy_url()
    assert password not in redact(f"url postgresql://u:{password}@db/l")
