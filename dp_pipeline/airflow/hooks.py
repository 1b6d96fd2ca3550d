"""PrivacyLedgerHook: reach the privacy ledger through an Airflow Connection.

Connection conventions (Airflow's own):

- conn type ``sqlite``, the ledger file's absolute path as host
  (``AIRFLOW_CONN_DP_LEDGER_DEFAULT='sqlite://%2Fpath%2Fto%2Fledger.db'``; the URI form
  ``sqlite:////path/to/ledger.db``, which puts the path in the schema, works too). One SQLite file only
  serves workers that share a filesystem (LocalExecutor on one host).
- conn type ``postgres`` with host, port, login, password and schema (the database), used through psycopg 3
  (``postgresql+psycopg://``). Extras such as ``sslmode`` become connection-string parameters.
- conn type ``dpledger`` (the type the Airflow UI offers for this hook): the same fields, with
  ``{"backend": "sqlite"}`` in the extra for a SQLite file (the default backend is ``postgres``).

Secrets stay in the fields Airflow hides: the password in the Connection's password field, and the key that
signs every record in the extra field ``ledger_secret_key`` (:data:`SIGNING_KEY_FIELD`; its name contains
``secret``, one of the names Airflow's secrets masker treats as sensitive, so the REST API and the UI show
``***``). Without it the environment variable ``DP_PIPELINE_LEDGER_KEY`` is used, if set. The hook registers
the password (also URL-encoded, as the ledger URL carries it) and the key with Airflow's task-log masker
(``mask_secret``) before it opens the ledger.

Deprecated, still read with a :class:`DeprecationWarning`: a whole URL in the extra (``sqlalchemy_url``)
and the key as ``ledger_key``. Airflow shows both in clear (neither name is a sensitive one), so move them
to the fields above.

The ledger must exist (``dp-pipeline ledger init``): the hook never creates one, so a mistyped path or a
deleted file fails the task instead of starting over on a full budget.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseHook

from dp_pipeline.accounting.ledger import redact_text, redact_url
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID
from dp_pipeline.airflow.exceptions import LedgerConnectionError

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant

__all__ = [
    "DEFAULT_CONN_ID",
    "SIGNING_KEY_FIELD",
    "LedgerConnectionError",
    "PrivacyLedgerHook",
    "connection_signing_key",
    "connection_to_sqlalchemy_url",
]

SIGNING_KEY_FIELD = "ledger_secret_key"
"""The extra field of the signing key: a name Airflow's secrets masker hides (it contains ``secret``)."""

_LEGACY_KEY_FIELD = "ledger_key"
_LEGACY_URL_FIELD = "sqlalchemy_url"
_BACKENDS = {"sqlite": "sqlite", "postgres": "postgres", "postgresql": "postgres"}
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


def _deprecated(field: str, instead: str) -> None:
    warnings.warn(
        f"the ledger connection's extra field {field!r} is deprecated: Airflow shows it in clear through its "
        f"REST API and UI; {instead}",
        DeprecationWarning,
        stacklevel=4,
    )


def _ledger_backend(conn_type: str | None, extra: dict[str, Any]) -> str:
    """``"sqlite"`` or ``"postgres"``: the conn type, or for ``dpledger`` the extra's ``backend``."""
    kind = (conn_type or "").lower()
    if kind == "dpledger":
        kind = str(extra.get("backend") or "postgres").lower()
        if kind not in _BACKENDS:
            raise LedgerConnectionError(
                f"a dpledger connection's backend {kind!r} is not one of 'sqlite', 'postgres'"
            )
    if kind not in _BACKENDS:
        raise LedgerConnectionError(
            f"conn type {conn_type!r} is not a ledger connection: use 'sqlite' (path as host), 'postgres' "
            "(host, port, login, password, schema) or 'dpledger'"
        )
    return _BACKENDS[kind]


def _sqlite_url(path: str) -> str:
    from sqlalchemy.engine import URL

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


def _postgres_url(
    host: str | None,
    schema: str | None,
    login: str | None,
    password: str | None,
    port: int | str | None,
    extra: dict[str, Any],
) -> str:
    from sqlalchemy.engine import URL

    if not host:
        raise LedgerConnectionError("a postgres ledger connection needs a host")
    query = {key: str(extra[key]) for key in _POSTGRES_QUERY_EXTRAS if extra.get(key) not in (None, "")}
    port = int(port) if port else None
    if host.startswith("/"):  # a Unix-socket directory: libpq takes it (and the port) as parameters
        query |= {"host": host} | ({"port": str(port)} if port else {})
        host, port = None, None
    url = URL.create(
        f"postgresql+{extra.get('driver') or 'psycopg'}",
        username=login or None,
        password=password or None,
        host=host,
        port=port,
        database=schema or None,
        query=query,
    )
    return url.render_as_string(hide_password=False)


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
        ``sqlite``, ``postgres`` (or ``postgresql``), or ``dpledger`` with ``extra["backend"]`` in
        ``{"sqlite", "postgres"}`` (default ``postgres``).
    host, schema, login, password, port : optional
        The Connection's fields. For SQLite the path is the host (or the schema, as Airflow parses
        ``sqlite:////abs/path.db``). For PostgreSQL the schema is the database and the password is the
        Connection's password field.
    extra : dict, optional
        ``driver`` replaces ``psycopg`` for PostgreSQL; libpq options (``sslmode``, ``connect_timeout``,
        ...) are passed on as query parameters. A whole URL as ``sqlalchemy_url`` is deprecated (Airflow
        shows it, password included, in clear) but still used as it is, with a :class:`DeprecationWarning`.

    Returns
    -------
    str
        A URL for :class:`dp_pipeline.PrivacyAccountant`.

    Raises
    ------
    LedgerConnectionError
        For a relative or missing SQLite path, a PostgreSQL connection without host, or a conn type that is
        not a ledger connection.
    """
    extra = dict(extra or {})
    legacy = extra.get(_LEGACY_URL_FIELD)
    if legacy:
        _deprecated(_LEGACY_URL_FIELD, "use the connection's host, port, login, password and schema fields")
        return str(legacy)
    if _ledger_backend(conn_type, extra) == "sqlite":
        return _sqlite_url(host or schema or "")
    return _postgres_url(host, schema, login, password, port, extra)


def connection_signing_key(extra: dict[str, Any] | None) -> str | None:
    """The key that signs the ledger's records, from a Connection's extra (``None`` when there is none).

    Reads :data:`SIGNING_KEY_FIELD` (``ledger_secret_key``); the deprecated ``ledger_key`` is read too,
    with a :class:`DeprecationWarning`, when the new field is absent.
    """
    extra = extra or {}
    key = extra.get(SIGNING_KEY_FIELD)
    if not key and extra.get(_LEGACY_KEY_FIELD):
        _deprecated(
            _LEGACY_KEY_FIELD, f"put the key in the extra field {SIGNING_KEY_FIELD!r}, which Airflow hides"
        )
        key = extra[_LEGACY_KEY_FIELD]
    return str(key) if key else None


def _url_password_forms(url: str) -> list[str]:
    """The password of ``url`` as it is, and as the rendered URL spells it (URL-encoded), if any."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):
        return []
    if not password:
        return []
    rendered = make_url("postgresql://u@h").set(password=password).render_as_string(hide_password=False)
    return [str(password), rendered.removeprefix("postgresql://u:").removesuffix("@h")]


def _mask_secrets(*secrets: str | None) -> None:
    """Register each secret with Airflow's secrets masker (task logs, and the supervisor's)."""
    from airflow.sdk.log import mask_secret

    for secret in secrets:
        if secret:
            mask_secret(secret)


class PrivacyLedgerHook(BaseHook):
    """Open the privacy ledger named by an Airflow Connection as a :class:`~dp_pipeline.PrivacyAccountant`.

    Parameters
    ----------
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger (see the module docstring for its conventions).
    read_only : bool, default False
        Open the ledger for reading only (the dashboard does, and so does the accountant a DP task's code
        is handed): every charge through it is refused.

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
        read_only: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.ledger_conn_id = ledger_conn_id
        self.read_only = read_only
        self._accountant: PrivacyAccountant | None = None

    def ledger_settings(self) -> tuple[str, str | None]:
        """(URL, signing key) of the Connection, both registered with the task-log masker first."""
        conn = self.get_connection(self.ledger_conn_id)
        extra = conn.extra_dejson
        url = connection_to_sqlalchemy_url(
            conn.conn_type,
            host=conn.host,
            schema=conn.schema,
            login=conn.login,
            password=conn.password,
            port=conn.port,
            extra=extra,
        )
        key = connection_signing_key(extra)
        _mask_secrets(conn.password, key, *_url_password_forms(url))
        return url, key

    def get_sqlalchemy_url(self) -> str:
        """The ledger's SQLAlchemy URL, built from the Connection (with its password, masked in logs)."""
        return self.ledger_settings()[0]

    def get_accountant(self) -> PrivacyAccountant:
        """The accountant over the ledger (opened on first use, then kept by this hook; never creates a
        ledger: a missing one is an error here)."""
        if self._accountant is None:
            from dp_pipeline.accounting import PrivacyAccountant

            url, signing_key = self.ledger_settings()
            self.log.debug("opening privacy ledger %s", redact_url(url))
            self._accountant = PrivacyAccountant(url, create=False, key=signing_key, read_only=self.read_only)
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
