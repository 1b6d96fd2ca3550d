"""Every ledger backend passes the store contract (`dp_pipeline.accounting.testing.LedgerStoreContract`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dp_pipeline.accounting.ledger import LedgerStore, MemoryLedger, SQLLedger
from dp_pipeline.accounting.testing import LedgerStoreContract


class TestMemoryLedger(LedgerStoreContract):
    def make_store(self, request: pytest.FixtureRequest) -> LedgerStore:
        return MemoryLedger()


class TestSQLiteLedger(LedgerStoreContract):
    def make_store(self, request: pytest.FixtureRequest) -> LedgerStore:
        path: Path = request.getfixturevalue("tmp_path")
        return SQLLedger(f"sqlite:///{path / 'ledger.db'}", create=True)


@pytest.mark.postgres
class TestPostgreSQLLedger(LedgerStoreContract):
    def make_store(self, request: pytest.FixtureRequest) -> LedgerStore:
        return SQLLedger(str(request.getfixturevalue("pg_url")), create=True)
