"""Ledger URLs: a malformed one is a clear InvalidParameterError, and no error or display shows a password."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import InvalidParameterError, PrivacyAccountant
from dp_pipeline.accounting.ledger import redact_text, redact_url
from dp_pipeline.exceptions import LedgerError

PASSWORD = "S3CRET-PASSWORD-42"
MALFORMED = [
    f"postgresql:/alice:{PASSWORD}@db.example/ledger",  # one slash missing
    f"postgresql//alice:{PASSWORD}@db.example/ledger",  # the colon missing
    f"postgresql:alice:{PASSWORD}@db.example/ledger",
    f"sqlite:/alice:{PASSWORD}@x",
    f"postgresql://alice:{PASSWORD}@db.example:five/ledger",  # a port that is not a number
    f"postgresql://alice:{PASSWORD}@[::1/ledger",
    f"postgresql://alice:{PASSWORD}@db.example/led\x00ger",  # a NUL byte
]
WELL_FORMED = [
    f"postgresql://alice:{PASSWORD}@db.example:5432/ledger",
    f"postgresql+psycopg://alice:{PASSWORD}@db.example/ledger?sslmode=require",
    "postgresql://alice:S3CRET%2FPASSWORD%4042@db.example/ledger",
]


def _texts(exc: BaseException) -> list[str]:
    texts = []
    link: BaseException | None = exc
    while link is not None:
        texts += [str(link), repr(link)]
        link = link.__cause__ or link.__context__
    return texts


@pytest.mark.parametrize("url", MALFORMED + WELL_FORMED)
def test_redact_url_hides_the_password_and_keeps_the_rest(url: str) -> None:
    shown = redact_url(url)
    assert PASSWORD not in shown and "S3CRET" not in shown
    assert shown.startswith(url.split(":")[0]) and shown.endswith("***@" + url.rpartition("@")[2])


@pytest.mark.parametrize("url", WELL_FORMED)
def test_redact_url_agrees_with_sqlalchemy_on_urls_it_parses(url: str) -> None:
    assert redact_url(url) == redact_url(sa.engine.make_url(url).render_as_string(hide_password=True))


def test_a_password_given_as_a_query_parameter_is_hidden() -> None:
    url = f"postgresql://alice@db.example/ledger?sslmode=require&password={PASSWORD}"
    assert PASSWORD not in redact_url(url) and "sslmode=require" in redact_url(url)


@given(password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).map(lambda p: "Qz" + p))
def test_redact_text_removes_a_known_password_wherever_it_is(password: str) -> None:
    url = f"postgresql://alice:{password}@db.example/ledger"
    message = f"could not connect to {url}: the server said {password!s} is wrong"
    assert password not in redact_text(message, url)


@pytest.mark.parametrize("url", MALFORMED)
def test_malformed_urls_are_invalid_parameters_that_quote_no_password(url: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        PrivacyAccountant(url)
    assert info.value.parameter == "url" and isinstance(info.value, LedgerError)  # callers catching either
    assert not any(PASSWORD in text for text in _texts(info.value))


def test_a_nul_byte_in_a_path_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="NUL byte"):
        PrivacyAccountant(f"sqlite:///{tmp_path}/led\x00ger.db", create=True)
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_server_is_a_ledger_error_without_the_password() -> None:
    url = f"postgresql://alice:{PASSWORD}@127.0.0.1:1/ledger?connect_timeout=2"
    with pytest.raises(LedgerError) as info:
        PrivacyAccountant(url)
    assert not any(PASSWORD in text for text in _texts(info.value))
    assert "alice:***@127.0.0.1:1" in str(info.value)


def test_an_unknown_driver_is_a_ledger_error_without_the_password() -> None:
    with pytest.raises(LedgerError) as info:
        PrivacyAccountant(f"nosuchdb://alice:{PASSWORD}@db.example/ledger")
    assert not any(PASSWORD in text for text in _texts(info.value))
