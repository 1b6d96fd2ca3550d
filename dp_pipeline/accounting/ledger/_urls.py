"""Ledger URLs: parsed with a clear error, and shown only with their password redacted.

Every path that prints a ledger URL (errors, the command, the Airflow hook, log lines and the dashboard)
goes through :func:`redact_url`, which works on malformed URLs too: a URL that SQLAlchemy cannot parse
(one slash missing, a non-numeric port) is exactly the one an error message quotes.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING

from dp_pipeline.exceptions import LedgerURLError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["LedgerURLError", "ledger_identity", "parse_url", "redact_text", "redact_url"]

_HIDDEN = "***"
_LOOPBACK = "localhost"
# the server a URL reaches, by backend, when it names no port
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521}
_BACKEND_ALIASES = {"postgres": "postgresql"}
# libpq and most drivers also take the password as a query parameter
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:password|passwd|pwd|sslpassword)=)[^&;#]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?::/*|/+)")
# a URL with user information inside free text (a driver's message, an exception's str)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/*[^\s'\"]*@[^\s'\"]*")


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, whether or not it parses.

    The password is everything between the first ``:`` of the user information and the last ``@``; when
    the scheme is not followed by a slash (``postgresql:user:pw@host``) everything between the first ``:``
    and the last ``@`` is hidden, so a malformed URL over-redacts rather than leaks.
    """
    text = _QUERY_SECRET.sub(r"\1" + _HIDDEN, str(url))
    parts = _userinfo(text)
    if parts is None:
        return text
    prefix, user, _, rest = parts
    return f"{prefix}{user}:{_HIDDEN}@{rest}"


def redact_text(text: str, url: str | None = None) -> str:
    """``text`` (an error message) with every URL in it redacted, and ``url``'s password anywhere in it."""
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group()), str(text))
    if url:
        out = out.replace(url, redact_url(url))
        parts = _userinfo(url)
        if parts is not None and parts[2]:
            out = out.replace(parts[2], _HIDDEN)
    return out


def _userinfo(url: str) -> tuple[str, str, str, str] | None:
    """``(scheme and slashes, user, password, host and the rest)``, or None when there is no password."""
    head, at, rest = url.rpartition("@")
    if not at:
        return None
    scheme = _SCHEME.match(head)
    start = scheme.end() if scheme is not None and "/" in scheme.group() else 0
    user, colon, password = head[start:].partition(":")
    return (head[:start], user, password, rest) if colon else None


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL of a ledger, or LedgerURLError naming the problem (password redacted)."""
    import sqlalchemy as sa

    example = "e.g. sqlite:////abs/path/ledger.db or postgresql://user:password@host:5432/db"
    if "\x00" in url:
        raise LedgerURLError(f"the ledger URL {redact_url(url)!r} contains a NUL byte", "url")
    try:
        return sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        problem = "is not a database URL"
    except ValueError:  # SQLAlchemy converts the port with int()
        problem = "has a port that is not a number"
    raise LedgerURLError(f"the ledger URL {redact_url(url)!r} {problem} ({example})", "url")


def ledger_identity(url: str) -> str:
    """The database a ledger URL reaches, as one normalised, password-free string.

    Two spellings of a URL that reach the same database have the same identity, so that the list of
    known ledgers (:mod:`~dp_pipeline.accounting.ledger._known`) recognises a ledger however its URL is
    written. The normal form is ``backend://host:port/database``:

    * the backend is the scheme without its driver, in lower case (``postgres`` is ``postgresql``);
    * the host is in lower case without a trailing dot; every loopback address (``localhost``,
      ``127.0.0.0/8``, ``::1``) and a Unix-socket directory (a host that is a path, in the authority or as
      the ``host`` query parameter) are ``localhost``: they reach this machine's server;
    * the port is the ``port`` query parameter, else the authority's port, else the backend's default;
    * the user, the password and every other query parameter are dropped: they change how one connects,
      not which database one reaches.

    The identity may equate two databases that differ (two servers on one machine, one of them reached
    only through its socket, with a database of the same name), never separate two spellings of one: a
    false match only makes ``create=None`` refuse to create a ledger (``create=True`` creates it), while a
    missed match would let a deleted ledger be re-created on a full budget. A string that is not a URL (a
    resolved SQLite path) is its own identity.
    """
    if "://" not in url:
        return url
    try:
        parsed = parse_url(url)
    except LedgerURLError:
        return redact_url(url)
    backend = parsed.get_backend_name().lower()
    backend = _BACKEND_ALIASES.get(backend, backend)
    query = parsed.query
    host = _first(query.get("host")) or parsed.host or ""
    port = _first(query.get("port")) or parsed.port or _DEFAULT_PORTS.get(backend, "")
    return f"{backend}://{_host_identity(host)}:{port}/{parsed.database or ''}"


def _first(value: str | tuple[str, ...] | None) -> str | None:
    """A query parameter's value (the first, when it is repeated)."""
    if isinstance(value, tuple):
        return value[0] if value else None
    return value


def _host_identity(host: str) -> str:
    """``host`` in lower case, with every way of naming this machine's server spelled ``localhost``."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or name.startswith("/") or name == _LOOPBACK:
        return _LOOPBACK
    try:
        return _LOOPBACK if ipaddress.ip_address(name).is_loopback else name
    except ValueError:
        return name
