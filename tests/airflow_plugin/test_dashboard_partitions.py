"""The dashboard's per-partition table: what each partition of a partitioned dataset has spent."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


def test_the_page_shows_each_partitions_spent_amount() -> None:
    from fastapi.testclient import TestClient

    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.airflow.dashboard import create_app

    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(2.0), relation="add_remove", partitions=2)
    acct.spend("visits", PureDP(1.0), partition="2026-11-24")
    acct.spend("visits", PureDP(0.25), partition="2026-11-25")
    acct.set_budget("patients", PureDP(1.0))
    acct.spend("patients", PureDP(0.5))
    page = TestClient(create_app(lambda: acct)).get("/")
    assert page.status_code == 200
    tables = re.findall(r'<table class="partitions">.*?</table>', page.text)
    assert len(tables) == 1  # only the partitioned dataset has one
    rows = dict(
        re.findall(r'<tr data-partition="([^"]+)"><td>[^<]*</td><td class="num">([^<]*)</td>', tables[0])
    )
    assert rows == {"2026-11-24": "ε=1", "2026-11-25": "ε=0.25"}  # the format of the other tables
    assert "at most 2 per person, read under add_remove" in tables[0]
    section = page.text.split('id="dataset-visits"')[1]
    assert section.index('class="partitions"') < section.index("history-chart")
