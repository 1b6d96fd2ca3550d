"""An in-memory ledger store for notebooks and tests: one process, nothing persisted.

Chosen explicitly, never as a fallback: ``PrivacyAccountant("memory://")`` or
``PrivacyAccountant(MemoryLedger())``. Several accountants (or deep copies of one) that hold the same
:class:`MemoryLedger` share its budget; a memory ledger cannot be pickled into another process.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

from dp_pipeline.accounting.ledger._base import (
    END_KINDS,
    DatasetHead,
    DatasetState,
    LedgerRecord,
    RecordKind,
    RecordSigner,
    ReservationRecords,
    canonical_json,
    next_record,
)
from dp_pipeline.exceptions import LedgerError

__all__ = ["MemoryLedger"]

T = TypeVar("T")


class _Chain:
    """The records of one dataset with indexes by idempotency key and by reservation."""

    def __init__(self) -> None:
        self.records: list[LedgerRecord] = []
        self.head: DatasetHead | None = None
        self.by_key: dict[str, int] = {}
        self.ends: dict[int, LedgerRecord] = {}
        self.naming: dict[int, list[LedgerRecord]] = {}

    def add(self, record: LedgerRecord, head: DatasetHead) -> None:
        self.records.append(record)
        self.head = head
        if record.kind == "reserve" and record.key is not None:
            self.by_key[record.key] = record.seq
        if record.reservation is not None:
            self.naming.setdefault(record.reservation, []).append(record)
            if record.kind in END_KINDS:
                self.ends.setdefault(record.reservation, record)

    def find(self, key: str | None, seq: int | None) -> ReservationRecords | None:
        if key is not None:
            seq = self.by_key.get(key)
        if seq is None or not 1 <= seq <= len(self.records):
            return None
        record = self.records[seq - 1]
        if record.kind != "reserve":
            return None
        return ReservationRecords.of(record, self.naming.get(seq, ()))


class _MemoryTransaction:
    """Appends are staged and applied to the chain only when the transaction's function returns."""

    def __init__(self, dataset: str, chain: _Chain, signer: RecordSigner | None) -> None:
        self._dataset = dataset
        self._signer = signer
        self._chain = chain
        self._staged: list[tuple[LedgerRecord, DatasetHead]] = []

    @property
    def head(self) -> DatasetHead | None:
        return self._staged[-1][1] if self._staged else self._chain.head

    def reservation(self, *, key: str | None = None, seq: int | None = None) -> ReservationRecords | None:
        found = self._chain.find(key, seq)
        for record, _ in self._staged:
            if record.kind == "reserve" and ((key is not None and record.key == key) or record.seq == seq):
                found = ReservationRecords(record)
            elif found is not None and record.reservation == found.reserve.seq:
                found = ReservationRecords.of(found.reserve, [*found.after, *_end(found), record])
        return found

    def records_after(self, seq: int) -> list[LedgerRecord]:
        return [r for r in self._chain.records[max(seq, 0) :]] + [r for r, _ in self._staged if r.seq > seq]

    def append(
        self,
        kind: RecordKind,
        body: Mapping[str, Any],
        state: DatasetState,
        *,
        key: str | None = None,
        reservation: int | None = None,
    ) -> LedgerRecord:
        head = self.head
        record, _ = next_record(self._dataset, head, kind, body, key, reservation, self._signer)
        # the head's budget is already plain data: keep it when the state carries it unchanged
        budget = (
            state.budget if head is not None and state.budget is head.state.budget else _plain(state.budget)
        )
        new_state = DatasetState(budget, state.method, _plain(state.totals))
        self._staged.append((record, DatasetHead(self._dataset, new_state, record.seq, record.hash)))
        return record

    def apply(self) -> None:
        for record, head in self._staged:
            self._chain.add(record, head)


def _end(found: ReservationRecords) -> list[LedgerRecord]:
    return [] if found.end is None else [found.end]


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(canonical_json(dict(data)))
    return result


class MemoryLedger:
    """A :class:`~dp_pipeline.accounting.ledger.LedgerStore` held in this process's memory.

    Thread-safe (one lock for the whole store). Nothing survives the process; use an SQLite file
    (``"sqlite:///ledger.db"``) for a ledger that must persist or be shared between processes. A forked
    child cannot write to it (its spends would land in a copy), and a closed one refuses all use.

    Parameters
    ----------
    key : str or bytes, optional
        The signing key (see :class:`~dp_pipeline.accounting.ledger.RecordSigner`).
    """

    url = "memory://"
    read_only = False

    def __init__(self, *, key: str | bytes | None = None) -> None:
        self.signer = RecordSigner.from_key(key)
        self._lock = threading.RLock()
        self._chains: dict[str, _Chain] = {}
        self._pid = os.getpid()
        self._closed = False

    def _usable(self) -> None:
        if self._closed:
            raise LedgerError("the memory ledger was closed; open a new PrivacyAccountant('memory://')")
        if os.getpid() != self._pid:
            raise LedgerError(
                "a memory ledger lives in the process that created it; a forked child would spend from a "
                "copy the parent never sees. Use a persistent ledger, e.g. an SQLite file."
            )

    def atomic(self, dataset: str, fn: Callable[[Any], T]) -> T:
        self._usable()
        with self._lock:
            chain = self._chains.get(dataset) or _Chain()
            tx = _MemoryTransaction(dataset, chain, self.signer)
            result = fn(tx)
            tx.apply()
            if chain.head is not None:
                self._chains[dataset] = chain
            return result

    def head(self, dataset: str) -> DatasetHead | None:
        self._usable()
        with self._lock:
            chain = self._chains.get(dataset)
            return None if chain is None else chain.head

    def records(self, dataset: str) -> list[LedgerRecord]:
        self._usable()
        with self._lock:
            chain = self._chains.get(dataset)
            return [] if chain is None else list(chain.records)

    def reservation(
        self, dataset: str, *, key: str | None = None, seq: int | None = None
    ) -> ReservationRecords | None:
        self._usable()
        with self._lock:
            chain = self._chains.get(dataset)
            return None if chain is None else chain.find(key, seq)

    def open_reservations(self, dataset: str) -> list[LedgerRecord]:
        self._usable()
        with self._lock:
            chain = self._chains.get(dataset)
            if chain is None:
                return []
            return [r for r in chain.records if r.kind == "reserve" and r.seq not in chain.ends]

    def datasets(self) -> list[str]:
        self._usable()
        with self._lock:
            return sorted(self._chains)

    def close(self) -> None:
        """Refuse all later use."""
        self._closed = True

    def __reduce__(self) -> NoReturn:
        raise LedgerError(
            "a memory ledger cannot be pickled into another process: its spends would land in a copy that "
            "the original never sees. Use a persistent ledger, e.g. PrivacyAccountant('sqlite:///ledger.db')."
        )

    def __repr__(self) -> str:
        return f"MemoryLedger(datasets={len(self._chains)})"
