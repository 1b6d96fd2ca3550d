"""A throw-away PostgreSQL cluster in a temporary directory, for the ledger tests and the ledger benchmark.

Used by the ``postgres_server`` fixture of tests/accounting/conftest.py and by benchmarks/bench_ledger.py.
Needs the Debian server binaries (``make system-deps``); PostgreSQL refuses to run as root, so its
binaries run as the ``postgres`` OS user then.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["TemporaryPostgres", "postgres_bindir"]


def postgres_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``, or None when the server is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


class TemporaryPostgres:
    """A PostgreSQL cluster on a free port, reachable through a Unix socket in a temporary directory (and
    over TCP only on the ``listen`` addresses).

    Parameters
    ----------
    fsync : bool, default False
        ``False`` (the tests' choice) skips flushing to disk: fast, and a crash of the machine loses the
        cluster, which does not matter for a throw-away one. ``True`` runs with PostgreSQL's durable
        defaults, as a production server would.
    max_connections : int, default 60
    listen : str, default ""
        The TCP addresses the server listens on (``listen_addresses``), besides its Unix socket; none by
        default.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, *, fsync: bool = False, max_connections: int = 60, listen: str = "") -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise FileNotFoundError(
                "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (make system-deps)"
            )
        self.bindir = bindir
        self.fsync = fsync
        self.max_connections = max_connections
        self.listen = listen
        self.port = _free_port()
        self._base: Path | None = None
        self._counter = 0

    @property
    def host(self) -> str:
        """The directory of the server's Unix socket."""
        assert self._base is not None, "the server is not started"
        return str(self._base / "sock")

    def _run(self, args: list[str]) -> None:
        subprocess.run(_as_postgres(args), check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> TemporaryPostgres:
        """Initialise the cluster and start the server (waits until it accepts connections)."""
        base = Path(tempfile.mkdtemp(prefix="dp-pg-"))
        self._base = base
        data, sockets, log = base / "data", base / "sock", base / "server.log"
        sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(base, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
        options = (
            f"-p {self.port} -k {sockets} -c listen_addresses='{self.listen}' "
            f"-c max_connections={self.max_connections}"
        )
        if not self.fsync:
            options += " -c fsync=off"
        try:
            self._run(
                [str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
            )
            self._run(
                [str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]
            )
        except subprocess.CalledProcessError as err:
            text = log.read_text() if log.exists() else ""
            shutil.rmtree(base, ignore_errors=True)
            self._base = None
            raise RuntimeError(f"could not start PostgreSQL: {err.stderr}\n{text}") from None
        return self

    def create_database(self, prefix: str = "ledger") -> str:
        """A new, empty database; returns its ``postgresql+psycopg`` URL."""
        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}_{int(time.time() * 1000) % 100000}"
        self._run(
            [str(self.bindir / "createdb"), "-h", self.host, "-p", str(self.port), "-U", "postgres", name]
        )
        return f"postgresql+psycopg://postgres@/{name}?host={self.host}&port={self.port}"

    def stop(self) -> None:
        """Stop the server and delete the cluster."""
        if self._base is None:
            return
        subprocess.run(
            _as_postgres(
                [str(self.bindir / "pg_ctl"), "-D", str(self._base / "data"), "-m", "immediate", "-w", "stop"]
            ),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self._base, ignore_errors=True)
        self._base = None

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
