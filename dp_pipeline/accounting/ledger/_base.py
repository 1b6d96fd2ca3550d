"""The LedgerStore protocol: append-only, hash-chained records of privacy spending, one chain per dataset.

A store knows nothing about privacy arithmetic. It keeps, for every dataset,

* a **head**: the dataset's current budget, composition method and running totals (exact decimal strings),
  together with the sequence number and hash of the newest record. The head is the row that a writer
  locks, so that check and reserve happen in one transaction;
* an append-only **chain of records**. Record ``n`` stores the hash of record ``n − 1`` (``prev_hash``) and
  its own hash, the SHA-256 of the canonical JSON of all its fields including ``prev_hash``. Editing or
  deleting any record breaks the chain, which :func:`check_chain` detects.

Every state change is a new record: ``budget`` (set or changed), ``reserve``, ``commit`` and ``release``
(the two that end a reservation), and ``pay`` (a release paid from a reservation) and ``shrink`` (a
reservation's charge lowered to a sub-plan), which name their reservation but do not end it.
The accountant (:mod:`dp_pipeline.accounting._accountant`) decides what to write; a store only guarantees
that :meth:`LedgerStore.atomic` runs its function under an exclusive per-dataset lock and either keeps all
its appends or none.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from dp_pipeline.exceptions import InvalidParameterError, LedgerError

__all__ = [
    "END_KINDS",
    "GENESIS_HASH",
    "KEY_ENV",
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "ORIGIN",
    "RECORD_KINDS",
    "ChainPoint",
    "DatasetHead",
    "DatasetState",
    "LedgerRecord",
    "LedgerStore",
    "LedgerTransaction",
    "RecordKind",
    "RecordSigner",
    "ReservationRecords",
    "canonical_json",
    "check_chain",
    "check_json_text",
    "next_record",
    "read_json_object",
    "record_hash",
    "record_hash_of_text",
    "utc_now",
]

RecordKind = Literal["budget", "reserve", "commit", "release", "pay", "shrink"]
RECORD_KINDS: tuple[str, ...] = ("budget", "reserve", "commit", "release", "pay", "shrink")
END_KINDS: tuple[str, ...] = ("commit", "release")
"""The kinds of record that end a reservation; ``pay`` and ``shrink`` name one without ending it."""

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first record of every dataset."""

T = TypeVar("T")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no whitespace and no NaN/∞: the same data always gives the same text."""
    return _CANONICAL.encode(value)


MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a ledger's JSON may have (the accountant writes at most ~10)."""

MAX_JSON_CHARS = 64 * 2**20
"""The most characters one JSON column of a ledger may hold (a plan of 100,000 releases fits)."""

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def check_json_text(text: str, where: str) -> None:
    """Raise LedgerError unless ``text`` is at most :data:`MAX_JSON_CHARS` long and nests arrays and
    objects at most :data:`MAX_JSON_DEPTH` deep.

    No recursion: the strings are cut out and only the brackets kept (regular expressions), then each
    pass removes the innermost pairs (``[]`` and ``{}`` adjacent in the text before the pass), that is
    exactly one level. Brackets left after :data:`MAX_JSON_DEPTH` passes nest deeper, or do not pair up
    (the text is not JSON). Text with no more brackets than that limit is not scanned at all. JSON that
    passes is parsed and encoded again without deep recursion.
    """
    if len(text) > MAX_JSON_CHARS:
        raise LedgerError(
            f"{where}: {len(text):,} characters of JSON, more than a ledger holds ({MAX_JSON_CHARS:,})"
        )
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(MAX_JSON_DEPTH):
        if not brackets:
            return
        brackets = _INNERMOST.sub("", brackets)
    if brackets:
        raise LedgerError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels (or malformed)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number too large for a double")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)


def read_json_object(text: Any, where: str) -> dict[str, Any]:
    """A JSON object read from a ledger column, or LedgerError naming ``where``.

    The text is bounded first (:func:`check_json_text`), so a deeply nested or huge value cannot
    exhaust the stack or memory; numbers must be finite (no ``NaN``, ``Infinity`` or ``1e400``), as
    :func:`canonical_json` writes them.
    """
    if not isinstance(text, str):
        raise LedgerError(f"{where}: holds {type(text).__name__}, not JSON text")
    check_json_text(text, where)
    try:
        value = _DECODER.decode(text)
    except ValueError as err:
        raise LedgerError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise LedgerError(f"{where}: holds a JSON {type(value).__name__}, not an object")
    return value


def utc_now() -> str:
    """The current time as ISO 8601 in UTC with microseconds, as stored in records."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


KEY_ENV = "DP_PIPELINE_LEDGER_KEY"
"""The environment variable that holds the ledger's signing key when none is passed."""


class RecordSigner:
    """Signs ledger records with a secret key kept outside the database: ``sig = HMAC-SHA256(key, hash)``.

    A record's ``hash`` already covers all its fields and the previous record's hash, so signing the hash
    signs the whole chain up to that record. Whoever can write to the database but does not hold the key
    cannot forge a signed record; whoever holds the key can (see the README's threat table).

    Parameters
    ----------
    key : str or bytes
        The secret (at least 16 bytes; a str is encoded as UTF-8).
    """

    def __init__(self, key: str | bytes) -> None:
        self._key = key.encode("utf-8") if isinstance(key, str) else bytes(key)

    @classmethod
    def from_key(cls, key: str | bytes | None) -> RecordSigner | None:
        """A signer for ``key`` (checked: at least 16 bytes), or None when no key is given."""
        if key is None:
            return None
        if not isinstance(key, (str, bytes)):
            raise InvalidParameterError(f"'key' must be a str or bytes, got {type(key).__name__}", "key")
        signer = cls(key)
        if len(signer._key) < 16:
            raise InvalidParameterError("the ledger key must be at least 16 bytes long", "key")
        return signer

    def sign(self, text: str) -> str:
        """HMAC-SHA256 of ``text`` (hex)."""
        return hmac.new(self._key, text.encode("utf-8"), hashlib.sha256).hexdigest()

    def valid(self, text: str, sig: str | None) -> bool:
        """Whether ``sig`` is the signature of ``text`` (constant-time comparison)."""
        return isinstance(sig, str) and hmac.compare_digest(self.sign(text), sig)

    def __repr__(self) -> str:
        return "RecordSigner(<key hidden>)"


def record_hash(
    dataset: str,
    seq: int,
    kind: str,
    time: str,
    key: str | None,
    reservation: int | None,
    body: Mapping[str, Any],
    prev_hash: str,
) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's fields, ``prev_hash`` included.

    The hashed text is ``canonical_json({"body": body, "dataset": dataset, "key": key, "kind": kind,
    "prev_hash": prev_hash, "reservation": reservation, "seq": seq, "time": time})``.
    """
    return record_hash_of_text(dataset, seq, kind, time, key, reservation, canonical_json(body), prev_hash)


def record_hash_of_text(
    dataset: str,
    seq: int,
    kind: str,
    time: str,
    key: str | None,
    reservation: int | None,
    body_text: str,
    prev_hash: str,
) -> str:
    """:func:`record_hash` of a record whose body is already encoded as ``canonical_json(body)``.

    Canonical JSON of a dict is its sorted members, each value encoded on its own, so the payload is put
    together from the encoded body and the other fields in key order without encoding the body again
    (a test checks that both give the same hash).
    """
    encode = _CANONICAL.encode
    # a tampered row may hold another type: encode it generically (str(True) is not JSON's true)
    seq_text = str(seq) if type(seq) is int else encode(seq)
    payload = "".join(
        (
            '{"body":',
            body_text,
            ',"dataset":',
            encode(dataset),
            ',"key":',
            encode(key),
            ',"kind":',
            encode(kind),
            ',"prev_hash":',
            encode(prev_hash),
            ',"reservation":',
            encode(reservation),
            ',"seq":',
            seq_text,
            ',"time":',
            encode(time),
            "}",
        )
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LedgerRecord:
    """One append-only ledger record.

    Attributes
    ----------
    dataset : str
        The dataset whose chain the record belongs to.
    seq : int
        Position in the dataset's chain, from 1 without gaps.
    kind : {"budget", "reserve", "commit", "release", "pay", "shrink"}
        What happened.
    time : str
        When, as ISO 8601 in UTC.
    key : str or None
        The idempotency key of a reservation (on ``reserve``, and repeated on the records that name it).
    reservation : int or None
        For ``commit`` and ``release``: the ``seq`` of the ``reserve`` record they end; for ``pay`` and
        ``shrink``: the reservation paid from or shrunk.
    body : Mapping
        Plain JSON data written by the accountant (costs, events, running totals, reasons).
    prev_hash, hash : str
        The chain: the previous record's hash and this record's own hash.
    sig : str or None
        HMAC-SHA256 (hex) of ``hash`` under the ledger key (see :class:`RecordSigner`); None when the record
        was written without a key.
    """

    dataset: str
    seq: int
    kind: str
    time: str
    key: str | None
    reservation: int | None
    body: Mapping[str, Any]
    prev_hash: str
    hash: str
    sig: str | None = None

    def expected_hash(self) -> str:
        """The hash recomputed from the record's fields."""
        return record_hash(
            self.dataset,
            self.seq,
            self.kind,
            self.time,
            self.key,
            self.reservation,
            self.body,
            self.prev_hash,
        )


@dataclass(frozen=True)
class DatasetState:
    """What the head row caches: the budget (a guarantee's ``to_dict()``), the method and running totals."""

    budget: Mapping[str, Any]
    method: str
    totals: Mapping[str, Any]


@dataclass(frozen=True)
class DatasetHead:
    """The head of a dataset's chain: its :class:`DatasetState` and the newest record's seq and hash."""

    dataset: str
    state: DatasetState
    seq: int
    hash: str


@dataclass(frozen=True)
class ReservationRecords:
    """A ``reserve`` record, the ``commit`` or ``release`` record that ended it (None while open), and
    ``after``: the ``pay`` and ``shrink`` records that name it, in chain order."""

    reserve: LedgerRecord
    end: LedgerRecord | None = field(default=None)
    after: tuple[LedgerRecord, ...] = field(default=())

    @classmethod
    def of(cls, reserve: LedgerRecord, naming: Sequence[LedgerRecord]) -> ReservationRecords:
        """The reservation ``reserve`` with the records that name it (any order): the first of the kinds
        that end a reservation ends it; the ``pay`` and ``shrink`` records follow it in chain order."""
        ordered = sorted(naming, key=lambda r: r.seq)
        end = next((r for r in ordered if r.kind in END_KINDS), None)
        return cls(reserve, end, tuple(r for r in ordered if r.kind not in END_KINDS))

    @property
    def status(self) -> Literal["open", "committed", "released"]:
        """``"open"``, ``"committed"`` or ``"released"``."""
        if self.end is None:
            return "open"
        return "committed" if self.end.kind == "commit" else "released"


class LedgerTransaction(Protocol):
    """The view of one dataset inside :meth:`LedgerStore.atomic`, under an exclusive lock."""

    @property
    def head(self) -> DatasetHead | None:
        """The dataset's head including this transaction's appends; None for a dataset with no records."""

    def reservation(self, *, key: str | None = None, seq: int | None = None) -> ReservationRecords | None:
        """The reservation with idempotency ``key`` or reserve ``seq``, or None."""

    def records_after(self, seq: int) -> list[LedgerRecord]:
        """The dataset's records after ``seq`` (this transaction's appends included), in chain order."""

    def append(
        self,
        kind: RecordKind,
        body: Mapping[str, Any],
        state: DatasetState,
        *,
        key: str | None = None,
        reservation: int | None = None,
    ) -> LedgerRecord:
        """Append a record to the chain and make ``state`` the dataset's cached state."""


@runtime_checkable
class LedgerStore(Protocol):
    """Persistent storage for ledger records (see the module docstring for the model).

    Implementations: :class:`~dp_pipeline.accounting.ledger.MemoryLedger` (one process, no
    persistence) and :class:`~dp_pipeline.accounting.ledger.SQLLedger` (SQLite file or PostgreSQL).
    """

    url: str

    def atomic(self, dataset: str, fn: Callable[[LedgerTransaction], T]) -> T:
        """Run ``fn`` with the dataset locked; keep its appends if it returns, discard them if it raises.

        ``fn`` may be run more than once when the backend asks for a retry (a serialization failure), so it
        must have no effects outside the transaction.
        """

    def head(self, dataset: str) -> DatasetHead | None:
        """The dataset's head as last committed, or None."""

    def records(self, dataset: str) -> list[LedgerRecord]:
        """All records of a dataset in chain order."""

    def reservation(
        self, dataset: str, *, key: str | None = None, seq: int | None = None
    ) -> ReservationRecords | None:
        """A reservation as last committed, or None."""

    def open_reservations(self, dataset: str) -> list[LedgerRecord]:
        """The ``reserve`` records of a dataset that have no ``commit`` or ``release`` yet."""

    def datasets(self) -> list[str]:
        """The datasets that have a head, sorted."""

    def close(self) -> None:
        """Release connections; the store must not be used afterwards."""


@dataclass(frozen=True)
class ChainPoint:
    """A point of a dataset's chain that was checked: the seq and hash of its last record, and whether a
    signed record came before (so that every later one must be signed). :data:`ORIGIN` is the start."""

    seq: int
    hash: str
    signed: bool = False

    def after(self, records: Sequence[LedgerRecord]) -> ChainPoint:
        """The point after ``records``, which :func:`check_chain` accepted from this point."""
        if not records:
            return self
        signed = self.signed or any(r.sig is not None for r in records)
        return ChainPoint(records[-1].seq, records[-1].hash, signed)


ORIGIN = ChainPoint(0, GENESIS_HASH)
"""The point before a dataset's first record."""


def check_chain(
    dataset: str,
    records: Sequence[LedgerRecord],
    head: DatasetHead | None,
    signer: RecordSigner | None = None,
    start: ChainPoint = ORIGIN,
) -> str | None:
    """Check a dataset's hash chain and its head; return a description of the first problem, or None.

    Detects an edited record (its hash no longer matches its fields), a deleted or reordered record (a gap in
    ``seq`` or a ``prev_hash`` that is not the previous hash), and a head that does not point at the last
    record (the newest records were deleted, or the head row was edited). With a ``signer``, every signature
    must be valid, and every record after the first signed one must be signed (records written before the
    key was introduced may be unsigned). ``records`` are those after ``start``, a point checked before.
    """
    prev_hash = start.hash
    signed = start.signed
    for expected_seq, record in enumerate(records, start=start.seq + 1):
        where = f"dataset {dataset!r}, record seq={record.seq}"
        if record.dataset != dataset:
            return f"{where}: belongs to dataset {record.dataset!r}"
        if record.seq != expected_seq:
            return f"{where}: expected seq={expected_seq}; a record was deleted or inserted before it"
        if record.kind not in RECORD_KINDS:
            return f"{where}: unknown record kind {record.kind!r}"
        if record.prev_hash != prev_hash:
            return f"{where}: prev_hash does not match the hash of the record before it (deleted or edited)"
        if record.expected_hash() != record.hash:
            return f"{where}: hash does not match the record's contents (the record was edited)"
        if signer is not None and (record.sig is not None or signed):
            if record.sig is None:
                return f"{where}: unsigned, but the records before it are signed with the ledger key"
            if not signer.valid(record.hash, record.sig):
                return f"{where}: the signature does not match the ledger key (forged, or another key)"
            signed = True
        prev_hash = record.hash
    last = start.after(records)
    if head is None:
        if last.seq:
            return f"dataset {dataset!r}: records exist but the dataset's head row is missing"
        return None
    if not last.seq:
        return f"dataset {dataset!r}: the head row exists but the dataset has no records"
    if head.seq != last.seq or head.hash != last.hash:
        return (
            f"dataset {dataset!r}: the head points at seq={head.seq} but the last record is seq={last.seq}; "
            "records at the end of the chain were deleted, or the head row was edited"
        )
    return None


def next_record(
    dataset: str,
    head: DatasetHead | None,
    kind: RecordKind,
    body: Mapping[str, Any],
    key: str | None,
    reservation: int | None,
    signer: RecordSigner | None = None,
) -> tuple[LedgerRecord, str]:
    """The record that follows ``head`` in ``dataset``'s chain, and its body as canonical JSON text.

    The body is stored as plain data (round-tripped through JSON, exactly as an SQL store returns it). With
    a ``signer`` the record carries the signature of its hash. A body whose JSON is nested deeper than
    :data:`MAX_JSON_DEPTH` or longer than :data:`MAX_JSON_CHARS` raises LedgerError (nothing is written).
    """
    seq = 1 if head is None else head.seq + 1
    prev = GENESIS_HASH if head is None else head.hash
    time = utc_now()
    where = f"dataset {dataset!r}, new {kind} record seq={seq}"
    try:
        text = canonical_json(body if isinstance(body, dict) else dict(body))
    except RecursionError:  # the C encoder's own depth guard: nothing was written
        raise LedgerError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_json_text(text, where)
    digest = record_hash_of_text(dataset, seq, kind, time, key, reservation, text, prev)
    sig = None if signer is None else signer.sign(digest)
    return LedgerRecord(dataset, seq, kind, time, key, reservation, json.loads(text), prev, digest, sig), text
