"""A dropped ledger is recognised however its URL is spelled, and a read-only store grants nothing.

``create=None`` creates a ledger only where none was created before (see
:mod:`dp_pipeline.accounting.ledger._known`). The list is matched by
:func:`~dp_pipeline.accounting.ledger._urls.ledger_identity`, so a ledger created at ``127.0.0.1`` and
dropped is not re-created, on a full budget, by a job that spells the host ``localhost``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

sa = pytest.importorskip("sqlalchemy")

from dp_pipeline import ApproxDP, PrivacyAccountant  # noqa: E402
from dp_pipeline.accounting.ledger import _known as known  # noqa: E402
from dp_pipeline.accounting.ledger._schema import BUDGETS, RECORDS, VERSION_TABLE  # noqa: E402
from dp_pipeline.accounting.ledger._urls import ledger_identity  # noqa: E402
from dp_pipeline.exceptions import LedgerError  # noqa: E402
from tests.pg_server import TemporaryPostgres, postgres_bindir  # noqa: E402

SAME = [
    "postgresql+psycopg://alice:pw@127.0.0.1:5432/ledger",
    "postgresql://alice@localhost/ledger",
    "POSTGRES://bob:other@LOCALHOST.:5432/ledger?sslmode=require",
    "postgresql://alice@[::1]:5432/ledger?application_name=a&connect_timeout=3",
    "postgresql://alice@127.0.0.2/ledger?connect_timeout=3&application_name=a",
    "postgresql+psycopg://alice@/ledger?host=/var/run/postgresql",
    "postgresql://alice@/ledger?port=5432&host=127.0.0.1",
]
DIFFERENT = [
    "postgresql://alice@localhost:5433/ledger",  # another port: another server
    "postgresql://alice@localhost/Ledger",  # database names are case-sensitive
    "postgresql://alice@db.example/ledger",  # another host
    "mysql://alice@localhost/ledger",  # another backend
]


@pytest.mark.parametrize("url", SAME)
def test_spellings_of_one_database_have_one_identity(url: str) -> None:
    assert ledger_identity(url) == ledger_identity(SAME[0]) == "postgresql://localhost:5432/ledger"


@pytest.mark.parametrize("url", DIFFERENT)
def test_other_databases_have_other_identities(url: str) -> None:
    assert ledger_identity(url) != ledger_identity(SAME[0])


def test_the_identity_holds_no_password_and_paths_are_kept() -> None:
    assert "pw" not in ledger_identity("postgresql://alice:pw@db.example/x?password=pw")
    assert ledger_identity("/tmp/ledger.db") == "/tmp/ledger.db"


def test_a_line_written_by_an_earlier_version_is_still_known() -> None:
    """Earlier versions listed the URL as given, with the password shown as ***."""
    known.registry_path().parent.mkdir(parents=True, exist_ok=True)
    with known.registry_path().open("a", encoding="utf-8") as lines:
        lines.write("postgresql+psycopg://alice:***@127.0.0.1:5432/legacy_ledger\n")
    assert known.known("postgresql://alice:secret@localhost/legacy_ledger")
    assert not known.known("postgresql://alice:secret@localhost/another_ledger")


# -------------------------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def tcp_server() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL server that also listens on 127.0.0.1, so that host spellings can be tried."""
    pytest.importorskip("psycopg")
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (make system-deps)")
    with TemporaryPostgres(listen="127.0.0.1") as server:
        yield server


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_dropped_ledger_is_not_recreated_under_another_spelling(tcp_server: TemporaryPostgres) -> None:
    socket_url = tcp_server.create_database("spelled")
    name = sa.engine.make_url(socket_url).database
    port = tcp_server.port
    created = f"postgresql+psycopg://postgres@127.0.0.1:{port}/{name}"
    acct = PrivacyAccountant(created, create=None)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.close()
    with sa.create_engine(created).begin() as conn:  # the ledger is dropped
        conn.execute(sa.text(f"DROP TABLE {RECORDS.name}, {BUDGETS.name}, {VERSION_TABLE} CASCADE"))
    spellings = [
        f"postgresql://postgres@localhost:{port}/{name}",
        f"postgresql+psycopg://postgres@LOCALHOST:{port}/{name}",
        f"postgres://postgres@127.0.0.1:{port}/{name}",
        f"postgresql://postgres:unused@127.0.0.1:{port}/{name}?application_name=a&connect_timeout=9",
        f"postgresql://postgres@127.0.0.1:{port}/{name}?connect_timeout=9&application_name=a",
        f"postgresql://postgres@/{name}?host=127.0.0.1&port={port}",
        socket_url,  # the server's Unix socket
    ]
    for url in spellings:
        with pytest.raises(LedgerError, match="a ledger was created there before"):
            PrivacyAccountant(url, create=None)
        assert not _tables(created) & {RECORDS.name, BUDGETS.name}, url


@pytest.mark.postgres
def test_a_read_only_store_runs_no_grant(pg_url: str) -> None:
    PrivacyAccountant(pg_url, create=True).close()
    with sa.create_engine(pg_url).begin() as conn:
        conn.execute(sa.text("CREATE ROLE dp_reader_probe"))
    reader = PrivacyAccountant(pg_url, read_only=True)
    with pytest.raises(LedgerError, match="read-only: it grants nothing"):
        reader.store.grant_writer("dp_reader_probe")
    with sa.create_engine(pg_url).connect() as conn:
        granted = conn.execute(
            sa.text("SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = :r"),
            {"r": "dp_reader_probe"},
        ).scalar_one()
    assert granted == 0

