"""Verify's replay: a dataset's records folded through the ledger's one reducer
(:func:`~dp_pipeline.accounting._policy.apply`, which every write also applies); the reading of datasets
declared partitioned under replace-one by an earlier version; and the check of the chains against an
anchor (a checkpoint kept outside the database).

The hash chain itself is checked by :func:`~dp_pipeline.accounting.ledger._base.check_chain`; this module
checks what the records mean.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dp_pipeline.accounting._policy import LedgerState, Violation, apply
from dp_pipeline.accounting._records import DatasetBudget, budget_of, partitions_of
from dp_pipeline.accounting._reports import VerifyReport
from dp_pipeline.accounting.ledger._base import (
    DatasetHead,
    LedgerRecord,
    LedgerStore,
    RecordSigner,
    canonical_json,
    check_chain,
    utc_now,
)
from dp_pipeline.events import PrivacyEvent, flatten_events
from dp_pipeline.exceptions import InvalidParameterError, LedgerError, UnknownDatasetError
from dp_pipeline.guarantees import format_guarantee

__all__ = [
    "ANCHOR_FORMAT",
    "ROW_LEVEL_KINDS",
    "Readings",
    "Replay",
    "anchor",
    "check_anchor",
    "check_semantics",
    "legacy_partitions_finding",
    "read_anchor",
    "unbounded_reading",
    "verify_ledger",
]

ANCHOR_FORMAT = "dp-pipeline ledger anchor 1"


def verify_ledger(
    store: LedgerStore,
    dataset: str | None = None,
    checkpoint: Mapping[str, Any] | str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """Check every dataset's chain (or ``dataset``'s) and fold its records through the ledger's reducer;
    with ``checkpoint``, check that the chains extend it. LedgerError naming the first problem (see
    :meth:`PrivacyAccountant.verify <dp_pipeline.accounting._accountant.PrivacyAccountant.verify>`)."""
    names = store.datasets()
    if dataset is not None:
        if dataset not in names and (checkpoint is None or dataset not in read_anchor(checkpoint)):
            raise UnknownDatasetError(dataset)
        names = [dataset]
    signer = getattr(store, "signer", None)
    count = signed = 0
    tips: dict[str, list[LedgerRecord]] = {}
    findings: list[str] = []
    for name in names:
        records = store.records(name)
        head = store.head(name)
        problem = check_chain(name, records, head, signer) or check_semantics(name, records, head)
        if problem:
            raise LedgerError(f"ledger verification failed: {problem}")
        count += len(records)
        signed += 0 if signer is None else sum(record.sig is not None for record in records)
        tips[name] = records
        finding = legacy_partitions_finding(name, records, head)
        if finding:
            findings.append(finding)
    if checkpoint is not None:
        problem = check_anchor(read_anchor(checkpoint), tips, signer, only=dataset)
        if problem:
            raise LedgerError(f"ledger verification against the anchor failed: {problem}")
    return VerifyReport(
        tuple(names), count, signer is not None, checkpoint is not None, tuple(findings), signed
    )


def anchor(store: LedgerStore) -> dict[str, Any]:
    """Verify the ledger and return a checkpoint of every dataset's head, to keep outside the database.

    The checkpoint is a small JSON-serialisable mapping: per dataset the seq and hash of its last record,
    and, with a key, an HMAC of the whole checkpoint. Keep it where whoever can write the database cannot
    (another machine, object storage with versioning, a CI artifact); ``acct.verify(anchor=…)`` or
    ``dp-pipeline ledger verify --anchor FILE`` later proves the ledger only grew since.
    ``dp-pipeline ledger anchor --output FILE`` writes it to a file.

    Parameters
    ----------
    store : LedgerStore
        The ledger (``acct.store``).
    """
    verify_ledger(store)
    heads = {}
    for name in store.datasets():
        head = store.head(name)
        assert head is not None  # verify_ledger checked that every dataset with records has a head
        heads[name] = {"seq": head.seq, "hash": head.hash}
    checkpoint: dict[str, Any] = {"format": ANCHOR_FORMAT, "time": utc_now(), "datasets": heads}
    signer = getattr(store, "signer", None)
    if signer is not None:
        checkpoint["mac"] = signer.sign(canonical_json(checkpoint))
    return checkpoint


def check_semantics(dataset: str, records: Sequence[LedgerRecord], head: DatasetHead | None) -> str | None:
    """Replay the running totals, the budgets and the reservation states; the first inconsistency, or None.

    The records are fed, in chain order, to one :class:`Replay` (the reducer every write of the accountant
    also applies to the records appended since it last looked), and the head is compared with its result.
    """
    replay = Replay(dataset)
    for record in records:
        problem = replay.feed(record)
        if problem:
            return problem
    return replay.check_head(head)


class Replay:
    """A fold of :func:`~dp_pipeline.accounting._policy.apply` over a dataset's records: the one reducer that
    verify and every write of the accountant apply (see :mod:`~dp_pipeline.accounting._policy` for what it
    checks).

    Feed the records in chain order with :meth:`feed`; :meth:`check_head` compares a head row with the
    state reached. After a problem the replay is spent: build a new one.

    Parameters
    ----------
    dataset : str
        The dataset whose chain is replayed (named in the problems).
    """

    def __init__(self, dataset: str) -> None:
        self.state = LedgerState(dataset)

    def feed(self, record: LedgerRecord) -> str | None:
        """Apply one record (the next in the chain): a description of what is wrong with it, or None."""
        after = apply(self.state, record)
        if isinstance(after, Violation):
            return after.problem
        self.state = after
        return None

    def check_head(self, head: DatasetHead | None) -> str | None:
        """Whether ``head`` caches the budget, rule settings and totals replayed: a problem, or None."""
        return self.state.check_head(head)


ROW_LEVEL_KINDS = frozenset({"randomized_response", "bounded_laplace", "bounded_staircase"})
"""The event kinds only row-level (local) mechanisms record: mechanisms that state ``"replace_one"``
themselves, ε-DP per row over their input domain, releasing one output per row."""


def legacy_partitions_finding(
    dataset: str, records: Sequence[LedgerRecord], head: DatasetHead | None
) -> str | None:
    """What verify reports about a dataset declared partitioned under replace-one by an earlier version
    (:attr:`~dp_pipeline.accounting._records.DatasetBudget.legacy`), or None for any other dataset.

    Its partition charges were accepted under parallel composition, which does not hold under replace-one.
    The finding re-reads the dataset without it (every partition total counts for every person: the
    whole-dataset total plus the sum of all partition totals), says whether that is within the budget, and,
    through :func:`unbounded_reading` (the reading the accountant prices the dataset by), the active
    row-level releases on a partition, whose loss under replace-one is unbounded.
    """
    if head is None:
        return None
    where = f"dataset {dataset!r}"
    budget = budget_of(head.state, where)
    if not budget.legacy:
        return None
    totals = budget.rule.read_totals(head.state.totals, where)
    spent, method = budget.rule.spent(budget.composed(totals))
    verdict = "within" if budget.fits(totals) else "ABOVE"
    text = (
        f"dataset {dataset!r} was declared partitioned (at most {budget.partitions} per person) under "
        f"replace-one, where parallel composition does not hold; its partition charges were accepted under "
        f"the parallel rule. Re-read with every partition total counting for every person, it has spent "
        f"{format_guarantee(spent)} ({method}), {verdict} its budget {format_guarantee(budget.guarantee)}"
    )
    unbounded = unbounded_reading(dataset, records)
    if unbounded:
        return f"{text}. {unbounded}"
    return (
        text + ". Releases naming a partition are refused on it; declare relation='add_remove' once it has "
        "no active spends, or release per partition on a new dataset declared with relation='add_remove'."
    )


def unbounded_reading(dataset: str, records: Sequence[LedgerRecord]) -> str | None:
    """Why no amount bounds the loss of a dataset declared partitioned under replace-one by an earlier
    version, or None when its records hold no active row-level release on a partition.

    **Rule.** Such a dataset whose records hold an active reservation (not cancelled) that named a
    partition and whose events (its last shrink's, if it was shrunk) include a row-level release
    (:data:`ROW_LEVEL_KINDS`) has an unbounded loss: it is reported as spent with no finite amount, and
    nothing more is charged to it.

    **Proof.** Under replace-one, x may be replaced by y whose rows lie in another partition. A row-level
    release on partition A outputs one value per row of A, so its output length is |A| on one neighbour and
    |A| − 1 on the other: the event "the output has |A| values" has probability 1 and 0, a ratio no ε
    bounds. Composition cannot lower it, so every later release adds to an already unbounded loss. A
    cancelled reservation released nothing (the frame functions cancel only before the data are read), and
    a shrink's events are the only ones its reservation may still pay for. Current writers refuse every
    release naming a partition of such a dataset, so records appended later never add such a release: a
    reading at the chain head stays valid until the head moves.

    Only the kinds that row-level mechanisms alone record are recognised: a row-level release recorded as
    a ``"laplace"``, ``"gaussian"`` or ``"staircase"`` event (:func:`~dp_pipeline.frames.add_noise`) is
    recorded as the aggregates are and is read by the summed rule.
    """
    seqs = _row_level_on_partitions(records)
    if not seqs:
        return None
    return (
        f"Dataset {dataset!r} holds {len(seqs)} active row-level release(s) on a partition (record seq "
        f"{', '.join(map(str, seqs))}), charged when an earlier version composed replace-one partitions in "
        "parallel: a person replaced by one in another partition changes how many rows each partition "
        "holds, which those releases show, so the dataset's loss is unbounded. Its data must be treated "
        "as spent and nothing more is charged to it; declare a new dataset for new data (set_budget(NAME, "
        "..., relation='add_remove', partitions=L) to release per partition)."
    )


class Readings:
    """:func:`unbounded_reading` of each dataset, cached per chain head: None at once for a dataset that is
    not :attr:`~dp_pipeline.accounting._records.DatasetBudget.legacy`; otherwise its records are read once
    per head (under a write's lock they end at that head)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[int, str], str | None]] = {}

    def at(self, store: LedgerStore, dataset: str, head: DatasetHead, budget: DatasetBudget) -> str | None:
        """Why ``dataset``'s loss is unbounded at ``head``, or None."""
        if not budget.legacy:
            return None
        cached = self._cache.get(dataset)
        if cached is not None and cached[0] == (head.seq, head.hash):
            return cached[1]
        records = store.records(dataset)
        reading = unbounded_reading(dataset, records)
        self._cache[dataset] = ((records[-1].seq, records[-1].hash), reading)
        return reading


def _row_level_on_partitions(records: Sequence[LedgerRecord]) -> list[int]:
    """The seqs of the active reservations that named a partition and hold a row-level event."""
    cancelled = {r.reservation for r in records if r.kind == "release"}
    held = {r.seq: r.body for r in records if r.kind == "reserve" and r.seq not in cancelled}
    named = {seq for seq, body in held.items() if partitions_of(body, f"record seq {seq}")}
    for r in records:  # a shrink replaces what its reservation holds
        if r.kind == "shrink" and r.reservation in held:
            held[r.reservation] = r.body
    return [seq for seq in sorted(named) if _row_level(held[seq])]


def _row_level(body: Mapping[str, Any]) -> bool:
    events = flatten_events([PrivacyEvent.from_dict(dict(e)) for e in body.get("events", ())])
    return any(e.kind in ROW_LEVEL_KINDS for e in events)


def read_anchor(anchor: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """The datasets of a checkpoint from :func:`anchor` (a mapping or its JSON file)."""
    if isinstance(anchor, Mapping):
        data: Any = anchor
    elif isinstance(anchor, (str, os.PathLike)):
        try:
            data = json.loads(Path(anchor).read_text(encoding="utf-8"))
        except OSError as err:
            raise InvalidParameterError(f"cannot read the anchor file: {err.strerror}", "anchor") from None
        except (ValueError, UnicodeDecodeError):
            raise InvalidParameterError("the anchor file is not JSON", "anchor") from None
    else:
        raise InvalidParameterError(
            "'anchor' must be a checkpoint from anchor(acct.store) or the path of its file, got "
            f"{type(anchor).__name__}",
            "anchor",
        )
    datasets = data.get("datasets") if isinstance(data, Mapping) else None
    if (
        not isinstance(data, Mapping)
        or data.get("format") != ANCHOR_FORMAT
        or not isinstance(datasets, Mapping)
        or not all(
            isinstance(point, Mapping)
            and type(point.get("seq")) is int
            and point["seq"] >= 1
            and isinstance(point.get("hash"), str)
            for point in datasets.values()
        )
    ):
        raise InvalidParameterError(
            "not a dp-pipeline ledger anchor (see dp_pipeline.accounting._verify.anchor)", "anchor"
        )
    return data


def check_anchor(
    anchor: Mapping[str, Any],
    chains: Mapping[str, Sequence[LedgerRecord]],
    signer: RecordSigner | None,
    only: str | None,
) -> str | None:
    """The first way the chains fail to extend the anchor's heads, or None.

    An anchor's MAC is checked whenever it has one: an anchor with a MAC checked without a key is refused
    (skipping the MAC would let an edited anchor vouch for a rolled-back ledger), and an anchor without a
    MAC checked with a key is refused (the MAC was removed, or the anchor predates the key).
    """
    if signer is None and "mac" in anchor:
        return (
            "the anchor carries a MAC but no ledger key is configured, so the anchor cannot be trusted: give "
            "the key (key=… or DP_PIPELINE_LEDGER_KEY) to check it"
        )
    if signer is not None and "mac" not in anchor:
        return (
            "the anchor carries no MAC, but the ledger is checked with a key: an anchor written with the key "
            "has one (it was removed, or the anchor predates the key: write a new one with the key)"
        )
    if signer is not None:
        unsigned = {name: value for name, value in anchor.items() if name != "mac"}
        if not signer.valid(canonical_json(unsigned), anchor["mac"]):
            return "the anchor's MAC does not match the ledger key (the anchor was edited, or another key)"
    for name, point in anchor["datasets"].items():
        if only is not None and name != only:
            continue
        seq, digest = point["seq"], point["hash"]
        records = chains.get(name, ())
        if not records:
            return (
                f"dataset {name!r} is in the anchor (seq={seq}) but not in the ledger: it was deleted, or "
                "this is an older copy of the ledger"
            )
        if len(records) < seq:
            return (
                f"dataset {name!r}: the anchor has seq={seq} but the ledger ends at seq={len(records)}; "
                "records were removed (a rollback, or an older copy of the ledger)"
            )
        if records[seq - 1].hash != digest:
            return (
                f"dataset {name!r}: record seq={seq} differs from the anchor; the chain was rewritten or the "
                "dataset re-created"
            )
    return None
