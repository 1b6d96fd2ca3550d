"""Functions run in child processes by test_concurrency (importable by the spawn start method)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import Reservation
from dp_pipeline.exceptions import KeyAlreadyUsedError

WORKERS = 8
"""How many processes race in the concurrency tests."""


def warm_up(_: int) -> int:
    """Import everything once in every worker, so that the racing workers start together."""
    time.sleep(0.5)  # hold this worker so that the pool spawns all of them
    return os.getpid()


def spend_until_refused(url: str, dataset: str, epsilon: float, start_at: float) -> int:
    """Spend ε repeatedly until the budget refuses; return how many spends committed."""
    acct = PrivacyAccountant(url)
    acct.remaining(dataset)  # connect and load everything a spend needs before the start line
    time.sleep(max(0.0, start_at - time.time()))
    committed = 0
    try:
        while True:
            try:
                acct.spend(dataset, PureDP(epsilon), label="race")
            except BudgetExceededError:
                return committed
            committed += 1
    finally:
        acct.close()


def spend_with_shared_key(url: str, dataset: str, key: str, start_at: float) -> str:
    """Every worker retries the same attempt: the key must charge once. Returns ``"charged"`` or the state
    of the reservation that refused this worker."""
    acct = PrivacyAccountant(url)
    time.sleep(max(0.0, start_at - time.time()))
    try:
        acct.spend(dataset, PureDP(0.5), key=key)
    except KeyAlreadyUsedError as refused:
        return refused.status
    finally:
        acct.close()
    return "charged"


def reserve_and_hang(url: str, dataset: str, key: str, ready: str) -> None:
    """Reserve, signal, then wait to be killed before committing."""
    acct = PrivacyAccountant(url)
    acct.reserve(dataset, PureDP(1.0), key=key, label="killed before commit")
    Path(ready).write_text("reserved")
    time.sleep(600)


def pay_until_refused(reservation: Reservation, epsilon: float, start_at: float) -> int:
    """Pay ε from a reservation (pickled into this process) until it refuses; return how many payments
    went through."""
    time.sleep(max(0.0, start_at - time.time()))
    paid = 0
    while True:
        try:
            reservation.spend(reservation.dataset, PureDP(epsilon), label="race")
        except BudgetExceededError:
            return paid
        paid += 1
        time.sleep(0.005)  # let the others take the lock: a winner paying back to back can starve them
