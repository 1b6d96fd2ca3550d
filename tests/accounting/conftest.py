"""Fixtures of the accounting tests: a throw-away PostgreSQL server, ledger URLs and a dump of all rows."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str]) -> None:
    subprocess.run(_as_postgres(args), check=True, capture_output=True, text=True, timeout=120)


def _as_postgres(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: run its binaries as the postgres OS user then.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[dict[str, Any]]:
    """A PostgreSQL cluster in a temporary directory on a free port, torn down after the session.

    Skipped only when the server binaries are absent (``make system-deps`` installs them).
    """
    bindir = _postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (make system-deps)")
    base = Path(tempfile.mkdtemp(prefix="dp-pg-"))
    data, sockets = base / "data", base / "sock"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(sockets, "postgres", "postgres")
    port = _free_port()
    log = base / "server.log"
    try:
        _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        options = f"-p {port} -k {sockets} -c listen_addresses='' -c max_connections=60 -c fsync=off"
        _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"])
    except subprocess.CalledProcessError as err:
        text = log.read_text() if log.exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"could not start PostgreSQL: {err.stderr}\n{text}") from None
    server = {"bindir": bindir, "port": port, "host": str(sockets), "counter": 0}
    try:
        yield server
    finally:
        subprocess.run(
            _as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_server: dict[str, Any]) -> str:
    """A fresh database on the test server, as a postgresql+psycopg URL."""
    postgres_server["counter"] += 1
    name = f"ledger_{os.getpid()}_{postgres_server['counter']}_{int(time.time() * 1000) % 100000}"
    subprocess.run(
        _as_postgres(
            [
                str(postgres_server["bindir"] / "createdb"),
                "-h",
                postgres_server["host"],
                "-p",
                str(postgres_server["port"]),
                "-U",
                "postgres",
                name,
            ]
        ),
        check=True,
        capture_output=True,
        timeout=60,
    )
    return (
        f"postgresql+psycopg://postgres@/{name}?host={postgres_server['host']}&port={postgres_server['port']}"
    )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A new SQLite ledger file."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def dump_rows(url: str) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """Every row of every ledger table, in a fixed order: for before/after comparisons."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            tables = sorted(t for t in sa.inspect(conn).get_table_names() if t.startswith("dp_ledger"))
            dump = []
            for table in tables:
                rows = [tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table}"))]
                dump.append((table, sorted(rows, key=repr)))
            return dump
    finally:
        engine.dispose()
