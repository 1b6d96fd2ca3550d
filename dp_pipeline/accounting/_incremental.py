"""Incremental verification: every write first checks the records appended since this process last checked.

A live spend trusts the dataset's head row: its budget, the rule's stored settings (a μ limit) and the
running totals. Anyone who can insert rows could otherwise append one well-hashed record and move the head
onto it with whatever totals they like (a negative charge, a reset total, an inflated μ limit), and honest
writers would spend against it until someone ran ``verify``. So every write transaction, under the
dataset's lock and before its function runs, checks what it is about to trust, with the checks ``verify``
applies (:func:`~dp_pipeline.accounting.ledger._base.check_chain` and one
:class:`~dp_pipeline.accounting._verify.Replay`):

1. the records after the last point this process checked extend that point's chain (seq, ``prev_hash``,
   hash, and with a key, signatures), and end at the head;
2. each of them replays: a known kind, a charge no lower than its request's price under the budget in
   force, running totals equal to the sum of the charges, rule settings that the budget allows;
3. the head caches exactly the budget, rule settings and totals replayed.

A problem raises LedgerError naming the record and the write writes nothing. The records the write itself
appends are fed to the same replay before they are committed (a write the replay would refuse is not
committed either), so the next write of this process starts from its own tip: with no other writer in
between, it reads nothing more. The replay of each dataset is cached per process, keyed by the seq and hash
of the point it reached; a process checks a dataset from its first record once (its first write), then only
what others appended.

What it guarantees: a live spend is accepted only against a head that is the replay of a chain of records
that each could have been written by the accountant's own statements. It does not tell who wrote a
record: without a key, a row inserter can append what the API could have (raise a budget, cancel an open
reservation), and with the key, nobody without it can append anything a write will trust.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dp_pipeline.accounting._verify import Replay
from dp_pipeline.accounting.ledger import redact_url
from dp_pipeline.accounting.ledger._base import (
    ORIGIN,
    ChainPoint,
    DatasetHead,
    DatasetState,
    LedgerRecord,
    LedgerStore,
    LedgerTransaction,
    RecordKind,
    ReservationRecords,
    check_chain,
)
from dp_pipeline.exceptions import LedgerError

__all__ = ["IncrementalVerifier"]

T = TypeVar("T")


@dataclass
class _Checked:
    """A replay of a dataset's chain up to ``point``."""

    point: ChainPoint
    replay: Replay


class _Watched:
    """A transaction that remembers the records appended through it."""

    def __init__(self, tx: LedgerTransaction) -> None:
        self._tx = tx
        self.appended: list[LedgerRecord] = []

    @property
    def head(self) -> DatasetHead | None:
        return self._tx.head

    def reservation(self, *, key: str | None = None, seq: int | None = None) -> ReservationRecords | None:
        return self._tx.reservation(key=key, seq=seq)

    def records_after(self, seq: int) -> list[LedgerRecord]:
        return self._tx.records_after(seq)

    def append(
        self,
        kind: RecordKind,
        body: Mapping[str, Any],
        state: DatasetState,
        *,
        key: str | None = None,
        reservation: int | None = None,
    ) -> LedgerRecord:
        record = self._tx.append(kind, body, state, key=key, reservation=reservation)
        self.appended.append(record)
        return record


class _Write:
    """One write of a dataset: owns its cached replay while it runs (no other thread advances it)."""

    def __init__(self, verifier: IncrementalVerifier, dataset: str, cached: _Checked | None) -> None:
        self._verifier = verifier
        self._dataset = dataset
        self.committed = cached  # a replay of committed records only (None: check from the start)
        self.after: _Checked | None = None  # the replay including this write's own records

    def run(self, tx: LedgerTransaction, fn: Callable[[LedgerTransaction], T]) -> T:
        checked, self.committed = self.committed or _Checked(ORIGIN, Replay(self._dataset)), None
        self._catch_up(checked, tx)
        self.committed = checked
        watched = _Watched(tx)
        result = fn(watched)
        if watched.appended:
            self.committed = None  # the replay now includes records that may never be committed
            for record in watched.appended:
                self._fail_on(checked.replay.feed(record))
            self._fail_on(checked.replay.check_head(tx.head))
            checked.point = checked.point.after(watched.appended)
        self.after = checked
        return result

    def _catch_up(self, checked: _Checked, tx: LedgerTransaction) -> None:
        head, point = tx.head, checked.point
        if (0 if head is None else head.seq) < point.seq:
            self._fail_on(
                f"dataset {self._dataset!r}: the chain now ends at seq={0 if head is None else head.seq}, "
                f"before seq={point.seq}, which this process checked earlier: records were deleted, or the "
                "ledger was rolled back to an older copy"
            )
        unmoved = head is not None and (head.seq, head.hash) == (point.seq, point.hash)
        records = [] if unmoved else tx.records_after(point.seq)
        self._fail_on(check_chain(self._dataset, records, head, self._verifier.signer, point))
        for record in records:
            self._fail_on(checked.replay.feed(record))
        self._fail_on(checked.replay.check_head(head))
        checked.point = point.after(records)

    def _fail_on(self, problem: str | None) -> None:
        if problem:
            raise LedgerError(
                f"ledger {redact_url(self._verifier.url)}: {problem}. Nothing was written: the ledger holds "
                "what dp-pipeline did not write (a forged or edited row), and no spend is accepted until it "
                "is resolved. Run 'dp-pipeline ledger verify' and restore the ledger from a backup."
            )


class IncrementalVerifier:
    """Runs a store's write transactions after checking the records appended since this process last
    checked (see the module docstring for what is checked and what that guarantees).

    Parameters
    ----------
    store : LedgerStore
        The ledger; its ``signer`` (if any) checks signatures.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store
        self.signer = getattr(store, "signer", None)
        self.url = store.url
        self._checked: dict[str, _Checked] = {}

    def atomic(self, dataset: str, fn: Callable[[LedgerTransaction], T]) -> T:
        """``store.atomic(dataset, fn)``, with ``fn`` run only on a checked head (LedgerError otherwise)."""
        write = _Write(self, dataset, self._checked.pop(dataset, None))
        try:
            result = self._store.atomic(dataset, lambda tx: write.run(tx, fn))
        except BaseException:
            if write.committed is not None:
                self._checked[dataset] = write.committed
            raise
        if write.after is not None:
            self._checked[dataset] = write.after
        return result
