"""Ledger URLs: parsed with a clear error, and shown only with their password redacted.

Every path that prints a ledger URL (errors, the command, the Airflow hook, log lines and the dashboard)
goes through :func:`redact_url`, which works on malformed URLs too: a URL that SQLAlchemy cannot parse
(one slash missing, a non-numeric port) is exactly the one an error message quotes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dp_pipeline.exceptions import LedgerURLError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["LedgerURLError", "parse_url", "redact_text", "redact_url"]

_HIDDEN = "***"
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
