"""PrivacyLedgerHook: reach the privacy ledger through an Airflow Connection.

Connection conventions (Airflow's own):

- conn type ``sqlite``, the ledger file's absolute path as host
  (``AIRFLOW_CONN_DP_LEDGER_DEFAULT='sqlite://%2Fpath%2Fto%2Fledger.db'``; the URI form
  ``sqlite:////path/to/ledger.db``, which puts the path in the schema, works too). One SQLite file only
  serves workers that share a filesystem (LocalExecutor on one host).
- conn type ``postgres`` with host, port, login, password and schema (the database), used through psycopg 3
  (``postgresql+psycopg://``). Extras such as ``sslmode`` become connection-string parameters.
- any conn type with ``{"sqlalchemy_url": "..."}`` in its extra: that URL is used as it is.

The ledger must exist (``dp-pipeline ledger init``): the hook never creates one, so a mistyped path or a
deleted file fails the task instead of starting over on a full budget. ``{"ledger_key": "..."}`` in the
extra (keep it in a secrets backend) is the key that signs every record; without it the environment
variable ``DP_PIPELINE_LEDGER_KEY`` is used, if set.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseHook

from airflow_plugin.declared import DEFAULT_CONN_ID
from airflow_plugin.exceptions import LedgerConnectionError
from dp_pipeline.accounting.ledger.urls import redact_text, redact_url

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = ["DEFAULT_CONN_ID", "LedgerConnectionError", "PrivacyLedgerHook", "connection_to_sqlalchemy_url"]

_POSTGRES_TYPES = frozenset({"postgres", "postgresql"})
_POSTGRES_QUERY_EXTRAS = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "connect_timeout",
    "application_name",
    "options",
    "target_session_attrs",
)


def connection_to_sqlalchemy_url(
    conn_type: str | None,
    *,
    host: str | None = None,
    schema: str | None = None,
    login: str | None = None,
    password: str | None = None,
    port: int | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    """The SQLAlchemy URL of the ledger described by an Airflow Connection's fields.

    Parameters
    ----------
    conn_type : str
        ``sqlite``, ``postgres`` (or ``postgresql``), or any type when ``extra`` holds ``sqlalchemy_url``.
    host, schema, login, password, port : optional
        The Connection's fields. For SQLite the path is the host (or the schema, as Airflow parses
        ``sqlite:////abs/path.db``). For PostgreSQL the schema is the database.
    extra : dict, optional
        ``sqlalchemy_url`` overrides everything; ``driver`` replaces ``psycopg`` for PostgreSQL; libpq
        options (``sslmode``, ``connect_timeout``, ...) are passed on as query parameters.

    Returns
    -------
    str
        A URL for :class:`dp_pipeline.PrivacyAccountant`.

    Raises
    ------
    LedgerConnectionError
        For a relative or missing SQLite path, a PostgreSQL connection without host, or another conn type
        without ``sqlalchemy_url``.
    """
    from sqlalchemy.engine import URL

    extra = dict(extra or {})
    override = extra.get("sqlalchemy_url")
    if override:
        return str(override)
    kind = (conn_type or "").lower()
    if kind == "sqlite":
        path = host or schema or ""
        if not path or path == ":memory:":
            raise LedgerConnectionError(
                "a sqlite ledger connection needs the ledger file's absolute path as host, e.g. "
                "AIRFLOW_CONN_DP_LEDGER_DEFAULT='sqlite://%2Fvar%2Flib%2Fdp%2Fledger.db'"
            )
        if not os.path.isabs(path):
            raise LedgerConnectionError(
                f"the sqlite ledger path {path!r} is relative; every worker would resolve it against its own "
                "working directory and could charge a different ledger. Give an absolute path."
            )
        return URL.create("sqlite", database=path).render_as_string(hide_password=False)
    if kind in _POSTGRES_TYPES:
        if not host:
            raise LedgerConnectionError("a postgres ledger connection needs a host")
        query = {key: str(extra[key]) for key in _POSTGRES_QUERY_EXTRAS if extra.get(key) not in (None, "")}
        url = URL.create(
            f"postgresql+{extra.get('driver') or 'psycopg'}",
            username=login or None,
            password=password or None,
            host=host,
            port=int(port) if port else None,
            database=schema or None,
            query=query,
        )
        return url.render_as_string(hide_password=False)
    raise LedgerConnectionError(
        f"conn type {conn_type!r} is not a ledger connection: use 'sqlite' (path as host), 'postgres', "
        "or put {'sqlalchemy_url': ...} in the connection's extra"
    )


_ACCOUNTANTS: dict[tuple[int, str, bool], PrivacyAccountant] = {}
_ACCOUNTANTS_LOCK = threading.Lock()


class PrivacyLedgerHook(BaseHook):
    """Open the privacy ledger named by an Airflow Connection as a :class:`~dp_pipeline.PrivacyAccountant`.

    Parameters
    ----------
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger (see the module docstring for its conventions).
    shared : bool, default False
        Reuse one accountant per URL within this process (the dashboard does; a task opens its own).
    read_only : bool, default False
        Open the ledger for reading only (the dashboard does).

    Examples
    --------
    >>> hook = PrivacyLedgerHook()                      # doctest: +SKIP
    >>> hook.get_accountant().remaining("patients")      # doctest: +SKIP
    """

    conn_name_attr: ClassVar[str] = "ledger_conn_id"
    default_conn_name: ClassVar[str] = DEFAULT_CONN_ID
    conn_type: ClassVar[str] = "dpledger"
    hook_name: ClassVar[str] = "dp-pipeline privacy ledger"

    def __init__(
        self,
        ledger_conn_id: str = DEFAULT_CONN_ID,
        *,
        shared: bool = False,
        read_only: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ledger_conn_id = ledger_conn_id
        self.shared = shared
        self.read_only = read_only
        self._accountant: PrivacyAccountant | None = None

    def get_sqlalchemy_url(self) -> str:
        """The ledger's SQLAlchemy URL, built from the Connection (with its password)."""
        conn = self.get_connection(self.ledger_conn_id)
        return connection_to_sqlalchemy_url(
            conn.conn_type,
            host=conn.host,
            schema=conn.schema,
            login=conn.login,
            password=conn.password,
            port=conn.port,
            extra=conn.extra_dejson,
        )

    def get_accountant(self) -> PrivacyAccountant:
        """The accountant over the ledger (opened on first use, then cached on this hook)."""
        if self._accountant is None:
            from dp_pipeline.accounting.accountant import PrivacyAccountant

            url = self.get_sqlalchemy_url()
            extra = self.get_connection(self.ledger_conn_id).extra_dejson
            signing_key = extra.get("ledger_key") or None
            self.log.debug("opening privacy ledger %s", redact_url(url))

            def open_ledger() -> PrivacyAccountant:  # never creates: a missing ledger is an error here
                return PrivacyAccountant(url, create=False, key=signing_key, read_only=self.read_only)

            if self.shared:
                key = (os.getpid(), url, self.read_only)
                with _ACCOUNTANTS_LOCK:
                    if key not in _ACCOUNTANTS:
                        _ACCOUNTANTS[key] = open_ledger()
                    self._accountant = _ACCOUNTANTS[key]
            else:
                self._accountant = open_ledger()
        return self._accountant

    def get_conn(self) -> PrivacyAccountant:
        """Same as :meth:`get_accountant` (the Airflow hook convention)."""
        return self.get_accountant()

    def test_connection(self) -> tuple[bool, str]:
        """Open the ledger and list its datasets; ``(ok, message)`` as the Airflow UI expects."""
        try:
            datasets = list(self.get_accountant().datasets())
        except Exception as exc:
            return False, self._redacted(exc)
        return True, f"ledger reachable; {len(datasets)} dataset(s) with a budget"

    def _redacted(self, exc: BaseException) -> str:
        """``exc`` as one message without the Connection's password, wherever the message quotes it."""
        try:
            url = self.get_sqlalchemy_url()
        except Exception:
            url = None
        return redact_text(f"{type(exc).__name__}: {exc}", url)
