"""The budget dashboard: rendered by headless Chromium from a real HTTP server, and mounted by the real
Airflow 3.3 API server app behind Airflow's authentication, with no route that writes to the ledger."""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _fill(ledger: Any) -> None:
    """patients: ε budget 3, two commits (0.7 + 0.45) and one released reservation; visits: μ budget 1."""
    from dp_pipeline import GaussianDP, PureDP

    ledger.set_budget("patients", PureDP(3.0))
    ledger.spend("patients", PureDP(0.7), label="count diabetics", key="dag/count/run1/-1/1")
    ledger.spend("patients", PureDP(0.45), label="mean age", key="dag/mean/run1/-1/1")
    ledger.reserve("patients", PureDP(0.3), key="dag/hist/run1/-1/1", label="histogram").cancel(
        reason="attempt failed before its callable ran"
    )
    ledger.set_budget("visits", GaussianDP(1.0))
    ledger.spend("visits", GaussianDP(0.6), label="visits per ward")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served_dashboard(ledger: Any) -> Iterator[str]:
    """The dashboard app served by uvicorn on 127.0.0.1 in a thread; yields its URL."""
    import uvicorn

    from dp_pipeline.airflow.dashboard import create_app

    _fill(ledger)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(lambda: ledger), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *extra,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.browser
@pytest.mark.processes
def test_dashboard_in_headless_chromium_shows_the_numbers(served_dashboard: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (make test installs the Debian package)")
    result = _chromium(served_dashboard, tmp_path / "profile", "--dump-dom")
    dom = result.stdout
    assert result.returncode == 0 and "<html" in dom, result.stderr[-2000:]

    row = re.search(r'<tr data-dataset="patients">(.*?)</tr>', dom, re.S)
    assert row, dom[:2000]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells == ["patients", "ε", "ε=3", "ε=1.15", "ε=1.85", "basic", "2"]
    visits_row = re.search(r'<tr data-dataset="visits">(.*?)</tr>', dom, re.S)
    assert visits_row
    visits = re.findall(r"<td[^>]*>(.*?)</td>", visits_row.group(1))
    assert visits[:5] == ["visits", "μ", "μ=1", "μ=0.6", "μ=0.8"]
    for text in ("count diabetics", "mean age", "histogram", "released", "dag/count/run1/-1/1"):
        assert text in dom, text
    assert 'id="budget-overview"' in dom and dom.count('class="history-chart"') == 2
    assert "38% spent" in dom  # 1.15 of 3
    assert "60% spent" in dom  # μ 0.6 of 1

    shot = tmp_path / "dashboard.png"
    result = _chromium(
        served_dashboard, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1100,1400"
    )
    assert shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("DP_PIPELINE_SCREENSHOT_DIR")
    if keep:  # CI or a developer can keep the screenshot
        shutil.copy(shot, Path(keep) / "dashboard.png")


def test_dashboard_json_and_no_write_routes(served_dashboard: str) -> None:
    import httpx

    datasets = httpx.get(served_dashboard + "api/datasets", timeout=30).json()
    assert [d["dataset"] for d in datasets] == ["patients", "visits"]
    spent = datasets[0]["spent"]  # 0.7 + 0.45 summed at their exact binary values, rounded up to a float
    assert (spent["type"], spent["delta"]) == ("approx", 0.0)
    exact = Fraction(0.7) + Fraction(0.45)
    assert Fraction(math.nextafter(spent["epsilon"], 0.0)) < exact <= Fraction(spent["epsilon"])
    detail = httpx.get(served_dashboard + "api/datasets/patients", timeout=30).json()
    charges = [(h["label"], h["status"]) for h in detail["history"] if h["kind"] == "reserve"]
    assert charges == [("count diabetics", "committed"), ("mean age", "committed"), ("histogram", "released")]
    assert httpx.get(served_dashboard + "api/datasets/unknown", timeout=30).status_code == 404
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("", "api/datasets", "api/datasets/patients"):
            response = httpx.request(method, served_dashboard + path, timeout=30)
            assert response.status_code == 405, (method, path, response.status_code)


def test_dashboard_mounted_in_the_airflow_api_server_requires_login(ledger) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    _fill(ledger)
    client = TestClient(create_app())
    assert client.get("/dp-budget/").status_code == 401  # no Airflow login, no budgets
    assert client.get("/dp-budget/api/datasets").status_code == 401

    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="viewer"))
    client.cookies.set("_token", token)  # as the Airflow UI sends it to the iframe
    page = client.get("/dp-budget/")
    assert page.status_code == 200
    assert "ε=1.15" in page.text and "ε=1.85" in page.text and "count diabetics" in page.text
    assert client.post("/dp-budget/api/datasets").status_code == 405

    plugins = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}).json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "dp_pipeline")
    assert ours["fastapi_apps"][0]["url_prefix"] == "/dp-budget"
    assert ours["external_views"][0]["url_route"] == "dp-budget"


def test_dashboard_reports_an_unreachable_ledger_instead_of_failing() -> None:
    from fastapi.testclient import TestClient

    from dp_pipeline.airflow import PrivacyLedgerHook
    from dp_pipeline.airflow.dashboard import create_app

    app = create_app(lambda: PrivacyLedgerHook("no_such_ledger_connection").get_accountant())
    page = TestClient(app).get("/")
    assert page.status_code == 503
    assert "The ledger cannot be read" in page.text and "no_such_ledger_connection" in page.text
