"""Committed spends per second of the privacy accountant's ledger, with the latency of ``spend()``.

For each ledger, 1 process and then 8 processes (multiprocessing, spawn) spend ε = 0.005 on one dataset
until its budget refuses them. The budget fits exactly ``--fit`` spends, so the run also checks that
nothing was overspent: the spends that committed equal the spends that fit, the ledger reports the whole
budget spent, and ``verify()`` passes. Ledgers:

- memory (one process only: a memory ledger cannot be shared), as the floor of the accountant's own cost;
- SQLite, a file: the default (``synchronous=FULL``: each commit is on disk before ``spend()`` returns)
  and ``?synchronous=normal`` (a commit survives a crash of the process, not of the machine);
- PostgreSQL: a temporary server (tests/pg_server.py) with ``fsync=off`` as the test suite runs it, and
  with ``fsync=on`` (PostgreSQL's durable default, as a production server runs).

Rates are committed spends over the wall time from the first spend of any process to the last one;
latencies are of every committed ``spend()`` call. Each worker opens its accountant and spends once on
a dataset of its own before the start, so imports and connections are not timed.

Run: ``.venv/bin/python benchmarks/bench_ledger.py`` (prints a Markdown table; ``--help`` for options).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EPSILON = 0.005
DATASET = "bench"


def _spend_loop(acct: Any, worker: int, barrier: Any) -> tuple[int, list[float], float, float]:
    """Spend EPSILON until refused: (committed, latencies, first start, last end)."""
    from dp_pipeline import BudgetExceededError, PureDP

    acct.spend(f"warm-{worker}", PureDP(EPSILON))  # imports, connection and caches before the clock
    cost = PureDP(EPSILON)
    latencies: list[float] = []
    if barrier is not None:
        barrier.wait()
    start = time.time()
    while True:
        t0 = time.perf_counter()
        try:
            acct.spend(DATASET, cost, label="bench")
        except BudgetExceededError:
            break
        latencies.append(time.perf_counter() - t0)
    return len(latencies), latencies, start, time.time()


def _spend_until_refused(url: str, worker: int, barrier: Any, results: Any) -> None:
    """A worker process: its own accountant on the ledger URL; the outcome goes on ``results``."""
    from dp_pipeline import PrivacyAccountant

    acct = PrivacyAccountant(url)
    try:
        results.put(_spend_loop(acct, worker, barrier))
    finally:
        acct.close()


@dataclass
class Run:
    ledger: str
    durability: str
    processes: int
    fit: int
    committed: int
    seconds: float
    latencies: list[float]
    spent_epsilon: float
    budget_epsilon: float
    verified: bool

    @property
    def rate(self) -> float:
        return self.committed / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0

    @property
    def overspend(self) -> bool:
        return self.committed != self.fit or self.spent_epsilon != self.budget_epsilon or not self.verified


def measure(url: str, ledger: str, durability: str, processes: int, fit: int) -> Run:
    from dp_pipeline import ApproxDP, PrivacyAccountant

    budget = round(fit * EPSILON, 10)
    acct = PrivacyAccountant(url)
    acct.set_budget(DATASET, ApproxDP(budget, 0.0))
    for worker in range(processes):
        acct.set_budget(f"warm-{worker}", ApproxDP(1.0, 0.0))
    if url == "memory://":  # one process: the worker's loop runs here, on this accountant's store
        outputs = [_spend_loop(acct, 0, None)]
    else:
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        barrier = context.Barrier(processes)
        workers = [
            context.Process(target=_spend_until_refused, args=(url, i, barrier, results))
            for i in range(processes)
        ]
        for w in workers:
            w.start()
        outputs = [results.get(timeout=1800) for _ in workers]
        for w in workers:
            w.join(60)
            if w.exitcode != 0:
                raise RuntimeError(f"a worker failed with exit code {w.exitcode}")
    committed = sum(o[0] for o in outputs)
    latencies = [x for o in outputs for x in o[1]]
    seconds = max(o[3] for o in outputs) - min(o[2] for o in outputs)
    spent = acct.spent(DATASET).epsilon
    try:
        acct.verify()
        reserves = [e for e in acct.records(DATASET) if e.kind == "reserve"]
        verified = len(reserves) == committed and all(e.status == "committed" for e in reserves)
    except Exception as err:
        print(f"verification failed: {err}", file=sys.stderr)
        verified = False
    acct.close()
    return Run(ledger, durability, processes, fit, committed, seconds, latencies, spent, budget, verified)


@contextmanager
def postgres(fsync: bool) -> Iterator[Any]:
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    from tests.pg_server import TemporaryPostgres

    with TemporaryPostgres(fsync=fsync) as server:
        yield server


def table(runs: list[Run]) -> str:
    lines = [
        "| ledger | durability | processes | committed spends/s | p50 spend() ms | p99 spend() ms "
        "| spends that fit | committed | overspend |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.ledger} | {r.durability} | {r.processes} | {r.rate:,.0f} | {r.percentile(0.5):.2f} | "
            f"{r.percentile(0.99):.2f} | {r.fit} | {r.committed} | {'**YES**' if r.overspend else 'none'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=int, default=2000, help="spends that fit the budget (default 2000)")
    parser.add_argument(
        "--processes", type=int, default=8, help="processes of the concurrent runs (default 8)"
    )
    parser.add_argument(
        "--only", choices=("memory", "sqlite", "postgres"), action="append", help="run only these ledgers"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each configuration; the median rate is reported"
    )
    args = parser.parse_args(argv)
    chosen = set(args.only or ("memory", "sqlite", "postgres"))
    runs: list[Run] = []

    def best(url_factory: Any, ledger: str, durability: str, processes: int) -> None:
        trials = [measure(url_factory(), ledger, durability, processes, args.fit) for _ in range(args.repeat)]
        trials.sort(key=lambda r: r.rate)
        run = trials[len(trials) // 2]
        run.verified = all(not t.overspend for t in trials) and run.verified
        runs.append(run)
        print(
            f"{ledger} {durability} ×{processes}: {run.rate:,.0f} spends/s "
            f"(all trials: {', '.join(f'{t.rate:,.0f}' for t in trials)})",
            file=sys.stderr,
        )

    if "memory" in chosen:
        best(lambda: "memory://", "memory", "none (one process)", 1)
    if "sqlite" in chosen:
        tmp = Path(tempfile.mkdtemp(prefix="dp-bench-"))
        counter = iter(range(10**6))
        for durability, query in (
            ("synchronous=FULL (default)", ""),
            ("synchronous=NORMAL", "?synchronous=normal"),
        ):
            for processes in (1, args.processes):

                def sqlite_url(query: str = query) -> str:
                    return f"sqlite:///{tmp / f'ledger-{next(counter)}.db'}{query}"

                best(sqlite_url, "SQLite", durability, processes)
    if "postgres" in chosen:
        for fsync in (False, True):
            with postgres(fsync) as server:
                for processes in (1, args.processes):
                    best(server.create_database, "PostgreSQL", f"fsync={'on' if fsync else 'off'}", processes)
    print(table(runs))
    print(
        f"\n{args.fit} spends of ε = {EPSILON} fit each budget; overspend: committed ≠ fit, spent ≠ budget, "
        "or verify() failed."
    )
    return 1 if any(r.overspend for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
