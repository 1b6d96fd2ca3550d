"""Racing processes on one dataset commit exactly the spends that fit; a killed process fails closed.

Runs on an SQLite file and on a PostgreSQL server the test suite starts (tests/accounting/conftest.py).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from dp_pipeline import ApproxDP, PrivacyAccountant
from dp_pipeline.accounting import ledger_entries, open_reservations
from tests.accounting import _workers

WORKERS = _workers.WORKERS
SPEND_EPSILON = 2.0**-7  # a power of two: 500 spends sum to the budget exactly (the ledger adds exact floats)
SPENDS_THAT_FIT = 500
BUDGET = SPENDS_THAT_FIT * SPEND_EPSILON

pytestmark = pytest.mark.slow


@pytest.fixture
def url(ledger_url: str) -> str:
    return ledger_url


@pytest.mark.processes
def test_racing_processes_commit_exactly_the_spends_that_fit(pool: ProcessPoolExecutor, url: str) -> None:
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("shared", ApproxDP(BUDGET, 0.0))
    start_at = time.time() + 1.0
    race = (_workers.spend_until_refused, url, "shared", SPEND_EPSILON, start_at)
    futures = [pool.submit(*race) for _ in range(WORKERS)]
    counts = [f.result(timeout=240) for f in futures]
    assert sum(counts) == SPENDS_THAT_FIT
    assert sum(1 for c in counts if c > 0) >= 2, f"no real race happened: {counts}"
    assert acct.spent("shared").epsilon == BUDGET and acct.remaining("shared").epsilon == 0.0
    reserves = [e for e in ledger_entries(acct.store, "shared") if e.kind == "reserve"]
    assert len(reserves) == SPENDS_THAT_FIT and all(e.status == "committed" for e in reserves)
    assert acct.verify().records == 1 + 2 * SPENDS_THAT_FIT
    acct.close()


@pytest.mark.processes
def test_racing_retries_of_one_key_charge_once(pool: ProcessPoolExecutor, url: str) -> None:
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("shared", ApproxDP(5.0, 0.0))
    start_at = time.time() + 1.0
    futures = [
        pool.submit(_workers.spend_with_shared_key, url, "shared", "dag/task/run/1", start_at)
        for _ in range(WORKERS)
    ]
    outcomes = sorted(f.result(timeout=240) for f in futures)
    assert outcomes == ["charged"] + ["committed"] * (WORKERS - 1)  # one release; the others draw no noise
    assert acct.spent("shared").epsilon == 0.5
    assert [e.kind for e in ledger_entries(acct.store, "shared")] == ["budget", "reserve", "commit"]
    acct.close()


@pytest.mark.processes
def test_process_killed_between_reserve_and_commit_fails_closed(url: str, tmp_path: Path) -> None:
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", ApproxDP(1.5, 0.0))
    ready = tmp_path / "ready"
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=_workers.reserve_and_hang, args=(url, "d", "attempt-1", str(ready)))
    child.start()
    deadline = time.time() + 120
    while not ready.exists() and time.time() < deadline and child.is_alive():
        time.sleep(0.05)
    assert ready.exists(), "the child never reserved"
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(30)
    assert child.exitcode == -signal.SIGKILL

    acct.verify()  # consistent ledger
    spent = acct.spent("d")
    assert spent.epsilon == 1.0 and spent.open_reservations == 1  # still counted: fail closed
    assert [e.key for e in open_reservations(acct.store, "d")] == ["attempt-1"]
    from dp_pipeline import BudgetExceededError, PureDP

    with pytest.raises(BudgetExceededError):
        acct.spend("d", PureDP(1.0))

    acct.cancel("d", "attempt-1", "worker SIGKILLed before reading data", actor="oncall")
    assert acct.spent("d").epsilon == 0.0 and open_reservations(acct.store, "d") == []
    last = ledger_entries(acct.store, "d")[-1]
    assert (last.kind, last.key, last.reason, last.actor) == (
        "release",
        "attempt-1",
        "worker SIGKILLed before reading data",
        "oncall",
    )
    acct.spend("d", PureDP(1.0))
    acct.verify()
    acct.close()


@pytest.mark.parametrize("ledger", ["memory", "sqlite"])
def test_racing_threads_share_one_accountant(ledger: str, tmp_path: Path) -> None:
    import threading

    from dp_pipeline import BudgetExceededError, PureDP

    url = "memory://" if ledger == "memory" else f"sqlite:///{tmp_path / 'l.db'}"
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("shared", ApproxDP(BUDGET, 0.0))
    committed: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                acct.spend("shared", PureDP(SPEND_EPSILON))
                committed.append(1)
        except BudgetExceededError:
            return
        except BaseException as err:  # surfaced by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and len(committed) == SPENDS_THAT_FIT
    assert acct.verify().records == 1 + 2 * SPENDS_THAT_FIT
