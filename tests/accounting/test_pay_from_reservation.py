"""Releases paid from a reservation: exact amounts under every rule, refusals that write nothing, racing
processes, history and verify, forged payments, shrink, the plan route, and pickling.

Every amount is checked against exact rational arithmetic done here (``fractions.Fraction`` of the floats'
binary values), independently of the ledger's decimal sums.
"""

from __future__ import annotations

import copy
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import Reservation, ledger_entries, partition_spending
from dp_pipeline.accounting._records import PayBody, ReserveBody, append, budget_of, with_totals
from dp_pipeline.accounting.ledger import MemoryLedger
from dp_pipeline.accounting.rules import Charge
from dp_pipeline.accounting.testing import gaussian_event, laplace_event
from dp_pipeline.events import PrivacyEvent, composite_event
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.mechanisms import Exponential
from tests.accounting import _workers
from tests.accounting.conftest import dump_rows


def _acct(budget: Any, rule: str | None = None) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget, rule=rule)
    return acct


def _refused_writes_nothing(acct: PrivacyAccountant, reservation: Reservation, cost: Any) -> None:
    before = [e.hash for e in ledger_entries(acct.store, "d")], acct.spent("d"), reservation.spent()
    with pytest.raises(BudgetExceededError) as refused:
        reservation.spend("d", cost, label="too much")
    assert refused.value.reservation == reservation.key and repr(reservation.key) in str(refused.value)
    assert "Nothing was paid" in str(refused.value)
    assert ([e.hash for e in ledger_entries(acct.store, "d")], acct.spent("d"), reservation.spent()) == before


# ------------------------------------------------------------------------------------------ every rule


def test_basic_pure_pays_exactly_what_was_reserved() -> None:
    acct = _acct(PureDP(2.0))
    task = acct.reserve("d", PureDP(1.0), key="task")
    parts = [0.125, 0.375, 0.5]
    assert sum(Fraction(p) for p in parts) == Fraction(1.0)  # dyadic: exactly the reservation
    for p in parts:
        task.spend("d", PureDP(p), label=f"part {p}")
    assert task.spent().epsilon == 1.0 and task.remaining().epsilon == 0.0
    _refused_writes_nothing(acct, task, PureDP(2.0**-40))
    assert acct.spent("d").epsilon == 1.0  # the dataset was charged once: the reservation


def test_basic_approx_pays_epsilon_and_delta_exactly() -> None:
    acct = _acct(ApproxDP(2.0, 1e-5))
    task = acct.reserve("d", ApproxDP(1.0, 1e-6), key="task")
    assert Fraction(5e-7) * 2 == Fraction(1e-6)  # doubling is exact in binary
    task.spend("d", ApproxDP(0.5, 5e-7))
    task.spend("d", ApproxDP(0.5, 5e-7))
    assert task.remaining().guarantee == ApproxDP(0.0, 0.0)
    _refused_writes_nothing(acct, task, ApproxDP(2.0**-40, 0.0))
    # δ is a limit of its own: ε left, no δ left
    other = acct.reserve("d", ApproxDP(0.5, 1e-6), key="other")
    other.spend("d", ApproxDP(0.25, 1e-6))
    _refused_writes_nothing(acct, other, ApproxDP(0.125, 1e-12))
    other.spend("d", PureDP(0.25))  # a pure release needs no δ
    assert acct.spent("d").guarantee == ApproxDP(1.5, 2e-6)


def test_gdp_filter_pays_squares_of_mu() -> None:
    acct = _acct(GaussianDP(2.0))
    task = acct.reserve("d", GaussianDP(1.25), key="task")
    assert Fraction(0.75) ** 2 + Fraction(1.0) ** 2 == Fraction(1.25) ** 2
    task.spend("d", GaussianDP(0.75))
    task.spend("d", gaussian_event(1.0))  # Gaussian noise of σ = Δ/μ: charged at its exact μ = 1
    assert task.remaining().mu == 0.0 and task.spent().mu == 1.25
    _refused_writes_nothing(acct, task, GaussianDP(2.0**-20))
    with pytest.raises(Exception, match="no μ-GDP guarantee"):
        task.spend("d", ApproxDP(0.1, 1e-9))


def test_pure_or_gdp_pays_by_the_route_of_the_reservation() -> None:
    acct = _acct(ApproxDP(10.0, 1e-5), rule="pure_or_gdp")
    pure = acct.reserve("d", PureDP(1.0), key="pure")
    pure.spend("d", PureDP(0.25))
    noise = laplace_event(0.75)
    pure.spend("d", noise)  # charged at the exact loss Δ/b of its noise, b = Δ/ε rounded up
    # a pure reservation left the dataset's pure route open: a Gaussian release would close it
    _refused_writes_nothing(acct, pure, GaussianDP(2.0**-20))
    left = Fraction(3, 4) - 1 / Fraction(noise.parameters["scale"])
    assert 0 < Fraction(pure.remaining().epsilon) <= left < Fraction(2.0**-50)
    gauss = acct.reserve("d", GaussianDP(1.25), key="gauss")
    gauss.spend("d", GaussianDP(0.75))
    gauss.spend("d", GaussianDP(1.0))
    _refused_writes_nothing(acct, gauss, GaussianDP(2.0**-20))
    assert acct.verify().records == 1 + 2 + 4  # a budget, two reservations, four payments


def test_zcdp_pays_pure_by_epsilon_and_gaussian_by_rho() -> None:
    acct = _acct(ApproxDP(10.0, 1e-5), rule="zcdp")
    pure = acct.reserve("d", PureDP(1.0), key="pure")
    pure.spend("d", PureDP(0.25))
    pure.spend("d", PureDP(0.75))
    _refused_writes_nothing(acct, pure, PureDP(2.0**-40))
    _refused_writes_nothing(acct, pure, GaussianDP(2.0**-20))  # would close the dataset's pure route
    gauss = acct.reserve("d", GaussianDP(1.25), key="gauss")  # ρ = μ²/2 = 25/32
    assert Fraction(0.75) ** 2 / 2 + Fraction(1.0) ** 2 / 2 == Fraction(1.25) ** 2 / 2
    gauss.spend("d", GaussianDP(0.75))
    gauss.spend("d", GaussianDP(1.0))
    assert gauss.remaining().epsilon == 0.0
    _refused_writes_nothing(acct, gauss, PureDP(2.0**-20))
    acct.verify()


def test_a_reservation_on_partitions_pays_only_for_releases_in_them() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(2.0), relation="add_remove", partitions=1)
    north = acct.reserve("d", PureDP(1.0), key="north", partition="north")
    north.spend("d", PureDP(0.25), partition="north")
    for outside in (None, "south", ["north", "south"]):
        with pytest.raises(InvalidParameterError, match="partition"):
            north.spend("d", PureDP(0.25), partition=outside)
    whole = acct.reserve("d", PureDP(0.5), key="whole")
    whole.spend("d", PureDP(0.25), partition="south")  # the whole dataset's reservation covers any data
    whole.spend("d", PureDP(0.25))
    assert [e.kind for e in ledger_entries(acct.store, "d")] == [
        "budget",
        "reserve",
        "pay",
        "reserve",
        "pay",
        "pay",
    ]
    assert (
        partition_spending(acct.store, "d")["north"].epsilon == 1.5
    )  # north alone: the whole-dataset 0.5 and its 1
    # a shrink lowers the total of the partitions its reservation named; verify replays both
    acct.spend_plan("d", [PureDP(0.125), PureDP(0.25)], key="east run", partition="east")
    assert partition_spending(acct.store, "d")["east"].epsilon == 0.875
    acct.shrink("d", "east run", [PureDP(0.125)], reason="the second task was skipped")
    assert partition_spending(acct.store, "d")["east"].epsilon == 0.625 and acct.spent("d").epsilon == 1.5
    acct.verify()


@settings(max_examples=40, deadline=None)
@given(
    reserved=st.integers(1, 64),
    pays=st.lists(st.integers(1, 24), min_size=1, max_size=12),
)
def test_any_sequence_of_payments_never_exceeds_the_reservation(reserved: int, pays: list[int]) -> None:
    unit = 2.0**-4
    acct = _acct(PureDP(16.0))
    task = acct.reserve("d", PureDP(reserved * unit), key="task")
    paid = Fraction(0)
    for p in pays:
        cost = Fraction(p * unit)
        if paid + cost <= Fraction(reserved * unit):
            task.spend("d", PureDP(p * unit))
            paid += cost
        else:
            with pytest.raises(BudgetExceededError):
                task.spend("d", PureDP(p * unit))
        assert Fraction(task.spent().epsilon) == paid <= Fraction(reserved * unit)
    assert acct.spent("d").epsilon == reserved * unit
    acct.verify()


@settings(max_examples=25, deadline=None)
@given(mus=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=8))
def test_gaussian_payments_fit_exactly_when_their_squares_do(mus: list[float]) -> None:
    acct = _acct(GaussianDP(4.0))
    task = acct.reserve("d", GaussianDP(1.0), key="task")
    paid = Fraction(0)
    for mu in mus:
        if paid + Fraction(mu) ** 2 <= 1:
            task.spend("d", GaussianDP(mu))
            paid += Fraction(mu) ** 2
        else:
            with pytest.raises(BudgetExceededError):
                task.spend("d", GaussianDP(mu))
    assert Fraction(task.spent().mu) ** 2 >= paid  # rounded up
    acct.verify()


# ------------------------------------------------------------------------------------------ a plan


def test_a_plan_pays_its_declared_releases_at_its_tight_total() -> None:
    acct = _acct(ApproxDP(20.0, 1e-5))
    declared = [gaussian_event(0.3, delta=1e-7) for _ in range(10)]
    plan = acct.spend_plan("d", declared, key="run", delta=1e-6)
    reserved = Fraction(plan.cost.epsilon)
    summed = sum(Fraction(e.guarantee.epsilon) for e in declared)  # type: ignore[union-attr]
    # the tight total is far below Σε: paid one by one under basic composition, they would not fit
    assert reserved < summed / 2
    for e in declared:
        plan.spend("d", e, label="a declared task")
    routes = [r.body["route"] for r in acct.store.records("d") if r.kind == "pay"]
    assert routes[-1] == "plan" and len(routes) == 10
    _refused_writes_nothing(acct, plan, declared[0])  # an eleventh copy was not declared
    assert acct.spent("d").epsilon == plan.cost.epsilon
    acct.verify()


def test_a_release_priced_by_its_independent_parts_is_paid_whole_not_part_by_part() -> None:
    """Ten quantiles of one call (a composite of ten ε = 0.1 exponential mechanisms selecting on the same
    data independently) are priced together by their bounded-range composition, below Σε = 1. Paid whole,
    the release fits that price. Its parts paid one by one could each be chosen from the others' results,
    which that price does not cover: they are paid by the adaptive route (their exact Σε), six fit the
    reserved ε ≈ 0.63 and the seventh is refused."""
    acct = _acct(ApproxDP(2.0, 2e-6))
    part = Exponential(epsilon=0.1, sensitivity=1.0).event
    quantiles = composite_event([part] * 10, part.relation)
    priced = acct.plan_cost("d", [quantiles], delta=1e-6)
    assert priced.method == "bounded_range" and 0.6 < priced.epsilon < 0.65
    whole = acct.spend_plan("d", [quantiles], key="whole", delta=1e-6)
    assert whole.cost.epsilon == priced.epsilon
    whole.spend("d", quantiles)
    assert [r.body["route"] for r in acct.store.records("d") if r.kind == "pay"] == ["plan"]

    parts = acct.spend_plan("d", [quantiles], key="parts", delta=1e-6)
    for _ in range(6):
        parts.spend("d", part)
    spent = Fraction(parts.spent().epsilon)  # the exact Σε, rounded up to a float
    assert 6 * Fraction(0.1) <= spent < 6 * Fraction(0.1) * (1 + Fraction(1, 10**15))
    _refused_writes_nothing(acct, parts, part)
    routes = [r.body["route"] for r in acct.store.records("d") if r.kind == "pay"]
    assert routes == ["plan"] + ["adaptive"] * 6
    acct.verify()


@pytest.mark.parametrize("asked", [1e-6, None])
def test_a_plan_of_gaussian_releases_stated_in_mu_gdp_pays_them_under_basic_composition(
    asked: float | None,
) -> None:
    """Gaussian noise stated as μ-GDP (``Gaussian.from_mu``, and every Gaussian release ``allocate``
    calibrates) has no single (ε, δ), so basic composition cannot charge it as a spend of its own. Paid from
    a plan that declared it, it is priced as a plan of one release at the δ the plan was read at (asked for,
    or that of its cost) and paid by the plan route; it was refused (UnsupportedCompositionError) before."""
    import mpmath

    from tests.allocation_references import gdp_delta

    acct = _acct(ApproxDP(5.0, 1e-5))
    declared = [gaussian_event(0.4) for _ in range(3)]
    plan = acct.spend_plan("d", declared, key="run", delta=asked)
    read_at = plan.cost.delta  # type: ignore[union-attr]
    assert read_at == (asked if asked is not None else 1e-5)
    mu = mpmath.mpf(declared[0].guarantee.mu)  # type: ignore[union-attr]
    for e in declared:
        entry = plan.spend("d", e, label="a declared task")
        assert entry.cost.delta == read_at  # type: ignore[union-attr]
        epsilon = mpmath.mpf(entry.cost.epsilon)  # type: ignore[union-attr]
        with mpmath.workdps(40):  # its ε is (about) the least at which the release meets the plan's δ
            assert gdp_delta(mu, epsilon) <= read_at < gdp_delta(mu, epsilon * (1 - mpmath.mpf("1e-6")))
    routes = [r.body["route"] for r in acct.store.records("d") if r.kind == "pay"]
    assert routes[1:] == ["plan", "plan"]  # the first fits on its own (ε, δ); with it, the others do not
    _refused_writes_nothing(acct, plan, declared[0])  # a fourth copy was not declared
    assert acct.spent("d").epsilon == plan.cost.epsilon  # payments charge the dataset nothing more
    acct.verify()  # replays each payment at the δ it recorded


def test_shrink_hands_back_what_never_ran() -> None:
    acct = _acct(PureDP(4.0))
    tasks = [PureDP(0.5), PureDP(0.25), PureDP(1.0)]
    run = acct.spend_plan("d", tasks, key="run")
    run.spend("d", PureDP(0.5), label="the task that started")
    with pytest.raises(InvalidParameterError, match="not a sub-plan"):
        acct.shrink("d", "run", [PureDP(0.5), PureDP(0.5)], reason="more copies than declared")
    with pytest.raises(BudgetExceededError, match="do not fit the sub-plan"):
        acct.shrink("d", "run", [PureDP(0.25)], reason="the paid task is not kept")
    assert acct.spent("d").epsilon == 1.75  # nothing changed
    kept = acct.shrink("d", "run", [PureDP(0.5)], reason="two tasks were skipped")
    assert kept.cost == ApproxDP(0.5, 0.0) and acct.spent("d").epsilon == 0.5
    assert acct.history("d")[0].cost == ApproxDP(0.5, 0.0)
    _refused_writes_nothing(acct, run, PureDP(2.0**-30))
    assert acct.shrink("d", "run", [PureDP(0.5)], reason="again").cost == kept.cost  # nothing to hand back
    with pytest.raises(InvalidParameterError, match="reason"):
        acct.shrink("d", "run", [], reason=" ")
    empty = acct.reserve("d", PureDP(1.0), key="never started")
    assert acct.shrink("d", empty.key, [], reason="skipped").cost == ApproxDP(0.0, 0.0)
    assert acct.spent("d").epsilon == 0.5
    acct.verify()


# ------------------------------------------------------------------------------------------ its life


def test_cancel_pay_and_reopen_rules() -> None:
    acct = _acct(PureDP(2.0))
    task = acct.reserve("d", PureDP(1.0), key="task")
    task.spend("d", PureDP(0.25))
    with pytest.raises(LedgerError, match="cannot be cancelled"):
        task.cancel("the data was read by the payment")
    assert acct.reservation("d", "task").status == "open"
    task.commit()
    task.spend("d", PureDP(0.25))  # a committed reservation still pays
    idle = acct.reserve("d", PureDP(0.5), key="idle")
    idle.cancel("never started")
    with pytest.raises(LedgerError, match="was cancelled"):
        idle.spend("d", PureDP(0.125))
    with pytest.raises(InvalidParameterError, match="on dataset 'd'"):
        task.spend("other", PureDP(0.125))
    assert task.relation() == "replace_one"  # the reservation's own dataset: it names no other
    with pytest.raises(LedgerError, match="no reservation with key 'nope'"):
        acct.reservation("d", "nope")
    again = acct.reservation("d", "task")
    assert (again.dataset, again.key, again.status, again.cost) == ("d", "task", "committed", task.cost)
    assert copy.deepcopy(task) is task and copy.copy(task) is task


def test_history_and_verify_see_the_payments() -> None:
    acct = _acct(PureDP(2.0))
    task = acct.reserve("d", PureDP(1.0), key="task", label="the task")
    entry = task.spend("d", PureDP(0.25), label="count")
    task.spend("d", PureDP(0.5), label="sum")
    task.commit()
    history = acct.history("d")
    assert [(e.label, e.status, e.paid_from, e.key) for e in history] == [
        ("the task", "committed", None, "task"),
        ("count", "paid", "task", None),
        ("sum", "paid", "task", None),
    ]
    assert history[1] == entry and history[1].cost == ApproxDP(0.25, 0.0)
    charged = sum(Fraction(e.cost.epsilon) for e in history if e.paid_from is None)  # type: ignore[union-attr]
    assert charged == Fraction(acct.spent("d").epsilon) == 1
    assert [e.kind for e in ledger_entries(acct.store, "d")] == ["budget", "reserve", "pay", "pay", "commit"]
    assert acct.verify().records == 5


def _forge(acct: PrivacyAccountant, charge: str, paid: str) -> None:
    """Append a payment of PureDP(0.5) whose recorded charge and running sum are given, past the checks."""
    store = acct.store
    found = store.reservation("d", key="task")
    assert found is not None

    def run(tx: Any) -> None:
        head = tx.head
        budget = budget_of(head.state, "d")
        totals = budget.rule.read_totals(head.state.totals, "d")
        names = budget.rule.amounts
        event = PrivacyEvent(kind="guarantee", guarantee=PureDP(0.5), relation="replace_one").to_dict()
        recorded = Charge.from_json({"epsilon": charge, "delta": "0", "mu2": None}, names, "forged")
        release = ReserveBody(
            "forged", 1, False, None, "replace_one", [event], PureDP(0.5), "basic", recorded, totals
        )
        paid_sum = Charge.from_json({"epsilon": paid, "delta": "0", "mu2": None}, names, "forged")
        body = PayBody(release, paid_sum, "adaptive")
        append(tx, body, with_totals(head.state, totals), key="task", reservation=found.reserve.seq)

    store.atomic("d", run)


@pytest.mark.parametrize(
    ("charge", "paid", "problem"),
    [
        ("0.5", "1.25", "an over-payment"),  # the sum 0.75 + 0.5 exceeds what it holds
        ("0.125", "0.875", "below what the paid release costs"),  # a release recorded at a quarter
        ("0.5", "0.5", "differs from the sum of the payments"),  # a running sum put back
    ],
)
def test_a_forged_payment_is_reported(charge: str, paid: str, problem: str) -> None:
    acct = PrivacyAccountant(MemoryLedger())
    acct.set_budget("d", PureDP(2.0))
    task = acct.reserve("d", PureDP(1.0), key="task")
    task.spend("d", PureDP(0.75))
    acct.verify()
    _forge(acct, charge, paid)
    with pytest.raises(LedgerError, match=problem):
        acct.verify()


def test_the_ledger_refuses_a_hand_written_payment_and_a_cancel_after_one(sqlite_url: str) -> None:
    import sqlalchemy as sa

    acct = PrivacyAccountant(sqlite_url)
    acct.set_budget("d", PureDP(2.0))
    acct.reserve("d", PureDP(1.0), key="task").spend("d", PureDP(0.25))
    before = dump_rows(sqlite_url)
    engine = sa.create_engine(sqlite_url)
    last = acct.store.records("d")[-1]
    for kind, reservation, key in [("pay", 1, "task"), ("pay", 2, "other key"), ("release", 2, "task")]:
        with pytest.raises(sa.exc.IntegrityError, match="must name a reservation"), engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dp_ledger_records (dataset, seq, kind, created_at, idem_key, reservation, "
                    "body, prev_hash, hash) VALUES ('d', :seq, :kind, 't', :key, :res, '{}', :prev, 'x')"
                ),
                {"seq": last.seq + 1, "kind": kind, "key": key, "res": reservation, "prev": last.hash},
            )
    engine.dispose()
    assert dump_rows(sqlite_url) == before


def test_a_reservation_pickles_and_pays_in_another_handle(sqlite_url: str) -> None:
    acct = PrivacyAccountant(sqlite_url)
    acct.set_budget("d", PureDP(2.0))
    task = acct.reserve("d", PureDP(1.0), key="dag/task/run/1")
    copied = pickle.loads(pickle.dumps(task))
    assert copied is not task and (copied.dataset, copied.key, copied.status) == ("d", task.key, "open")
    copied.spend("d", PureDP(0.75))
    assert task.spent().epsilon == 0.75 and task.remaining().epsilon == 0.25
    with pytest.raises(LedgerError, match="cannot be pickled"):
        pickle.dumps(_acct(PureDP(1.0)).reserve("d", PureDP(0.5)))
    error = BudgetExceededError("d", 1, 2, 3, 4, reservation="k")
    assert pickle.loads(pickle.dumps(error)).reservation == "k"


# ------------------------------------------------------------------------------------------ processes

PAY = 2.0**-6
PAYS_THAT_FIT = 48


@pytest.mark.slow
@pytest.mark.processes
def test_processes_paying_from_one_reservation_never_exceed_it(
    pool: ProcessPoolExecutor, ledger_url: str
) -> None:
    url = ledger_url
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", PureDP(2.0))
    run = acct.reserve("d", PureDP(PAYS_THAT_FIT * PAY), key="dag/run")
    start_at = time.time() + 1.0
    futures = [pool.submit(_workers.pay_until_refused, run, PAY, start_at) for _ in range(_workers.WORKERS)]
    counts = [f.result(timeout=240) for f in futures]
    assert sum(counts) == PAYS_THAT_FIT, counts
    assert sum(1 for c in counts if c > 0) >= 2, f"no real race happened: {counts}"
    assert run.spent().epsilon == PAYS_THAT_FIT * PAY and acct.spent("d").epsilon == PAYS_THAT_FIT * PAY
    assert sum(1 for e in acct.history("d") if e.paid_from == "dag/run") == PAYS_THAT_FIT
    assert acct.verify().records == 2 + PAYS_THAT_FIT
    acct.close()


# ------------------------------------------------------------------------------------------ shares


def _run_plan(acct: PrivacyAccountant, epsilons: list[float]) -> Reservation:
    """A reservation of a plan of Laplace releases (as an Airflow run reserves its tasks' costs)."""
    return acct.spend_plan("d", [laplace_event(e) for e in epsilons], key="run")


def test_each_share_is_capped_at_its_claim_not_at_the_reservation() -> None:
    """Two attempts of ε = 0.25 each share a reservation of 0.5. The first pays a count within its share;
    a second count of 0.25 would fit the reservation (0.25 of it is unpaid) but not the share: refused,
    nothing written. Exact sums are checked with Fractions here."""
    acct = _acct(PureDP(1.0))
    run = _run_plan(acct, [0.25, 0.25])
    mine = run.claim("attempt-a", laplace_event(0.25), label="a")
    run.claim("attempt-b", laplace_event(0.25), label="b")
    mine.spend("d", laplace_event(0.25), label="a's count")
    assert Fraction(mine.spent().epsilon) == Fraction(0.25)
    assert Fraction(mine.remaining().epsilon) == 0
    before = [e.hash for e in ledger_entries(acct.store, "d")]
    with pytest.raises(BudgetExceededError) as refused:
        mine.spend("d", laplace_event(0.25), label="a's second count")
    assert refused.value.reservation == "run"
    assert [e.hash for e in ledger_entries(acct.store, "d")] == before
    # the run's reservation pays the claims only: 0.25 + 0.25 of 0.5
    assert Fraction(run.spent().epsilon) == Fraction(0.25) + Fraction(0.25)
    acct.verify()


def test_a_share_is_claimed_once_and_a_run_never_mixes_shares_with_payments_of_its_own() -> None:
    from dp_pipeline.exceptions import KeyAlreadyUsedError

    acct = _acct(PureDP(1.0))
    run = _run_plan(acct, [0.25, 0.25])
    share = run.claim("attempt-a", laplace_event(0.25))
    with pytest.raises(KeyAlreadyUsedError):
        run.claim("attempt-a", laplace_event(0.25))
    with pytest.raises(LedgerError, match="not both"):
        run.spend("d", laplace_event(0.25))
    with pytest.raises(LedgerError, match=r"no share"):
        run.share("attempt-z").spend("d", laplace_event(0.125))
    with pytest.raises(LedgerError):  # code paying within a share reaches no other share
        share.claim("attempt-c", laplace_event(0.25))
    with pytest.raises(LedgerError):
        share.share("attempt-b")
    with pytest.raises(LedgerError):
        share.commit()
    other = _acct(PureDP(1.0))
    own = _run_plan(other, [0.25, 0.25])
    own.spend("d", laplace_event(0.25))
    with pytest.raises(LedgerError, match="not both"):
        own.claim("attempt-a", laplace_event(0.25))
    acct.verify()
    other.verify()


def test_a_share_pays_the_parts_of_its_declared_release() -> None:
    """A share claimed for a composite release (two Gaussian parts) pays the parts one by one: its tight
    total covers any of them, as a plan's does."""
    acct = _acct(ApproxDP(10.0, 1e-5))
    parts = [gaussian_event(0.2), gaussian_event(0.3)]
    whole = composite_event(parts, parts[0].relation)
    run = acct.spend_plan("d", [whole], key="run", delta=1e-6)
    share = run.claim("attempt", whole)
    for part in parts:
        share.spend("d", part)
    with pytest.raises(BudgetExceededError):
        share.spend("d", parts[0])
    acct.verify()


def test_a_share_pickles_to_the_same_share(sqlite_url: str) -> None:
    acct = PrivacyAccountant(sqlite_url, create=True)
    acct.set_budget("d", PureDP(1.0))
    run = acct.spend_plan("d", [laplace_event(0.25)], key="run")
    share = pickle.loads(pickle.dumps(run.claim("attempt", laplace_event(0.25))))
    share.spend("d", laplace_event(0.125))
    share.spend("d", laplace_event(0.125))
    with pytest.raises(BudgetExceededError):
        share.spend("d", laplace_event(0.125))


def _forge_within(acct: PrivacyAccountant, share: str, cap: str, paid: str) -> None:
    """Append a payment of ε = 0.25 within ``share`` with the given recorded cap and share sum."""
    found = acct.store.reservation("d", key="run")
    assert found is not None

    def run(tx: Any) -> None:
        head = tx.head
        budget = budget_of(head.state, "d")
        totals = budget.rule.read_totals(head.state.totals, "d")
        names = budget.rule.amounts
        event = PrivacyEvent(kind="guarantee", guarantee=PureDP(0.25), relation="replace_one").to_dict()
        charge = Charge.from_json({"epsilon": "0.25", "delta": "0", "mu2": None}, names, "forged")
        release = ReserveBody(
            "forged", 1, False, None, "replace_one", [event], PureDP(0.25), "basic", charge, totals
        )
        total = Charge.from_json({"epsilon": paid, "delta": "0", "mu2": None}, names, "forged")
        capped = Charge.from_json({"epsilon": cap, "delta": "0", "mu2": None}, names, "forged")
        body = PayBody(release, total, "adaptive", share, capped)
        append(tx, body, with_totals(head.state, totals), key="run", reservation=found.reserve.seq)

    acct.store.atomic("d", run)


@pytest.mark.parametrize(
    ("share", "cap", "paid", "problem"),
    [
        ("attempt-a", "0.25", "0.50", "an over-payment"),  # a second 0.25 within a share of 0.25
        ("attempt-a", "0.5", "0.5", "differs from its claim"),  # the cap written larger
        ("attempt-a", "0.25", "0.25", "differs from the sum"),  # the share's sum put back
        ("attempt-z", "0.25", "0.25", "never claimed"),
    ],
)
def test_verify_checks_the_sum_of_each_share(share: str, cap: str, paid: str, problem: str) -> None:
    """The 0.75/0.5 breach at ledger level: a payment written past the writer's checks within a share that
    is already used up (while the reservation still has room) is found by verify."""
    acct = PrivacyAccountant(MemoryLedger())
    acct.set_budget("d", PureDP(1.0))
    run = _run_plan(acct, [0.25, 0.25])
    run.claim("attempt-a", laplace_event(0.25)).spend("d", laplace_event(0.25))
    acct.verify()
    _forge_within(acct, share, cap, paid)
    with pytest.raises(LedgerError, match=problem):
        acct.verify()


@settings(max_examples=40, deadline=None)
@given(
    caps=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    pays=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=12),
)
def test_no_share_ever_pays_more_than_its_claim(caps: list[int], pays: list[tuple[int, int]]) -> None:
    """Any sequence of payments into any shares: each share's accepted sum stays within its claim (exact
    eighths, summed here), every refusal writes nothing, and verify accepts the ledger."""
    acct = _acct(PureDP(8.0))
    run = acct.spend_plan("d", [PureDP(c / 8) for c in caps], key="run")
    shares = [run.claim(f"a{i}", PureDP(c / 8)) for i, c in enumerate(caps)]
    accepted = [Fraction(0)] * len(caps)
    for which, eighths in pays:
        if which >= len(caps):
            continue
        before = len(ledger_entries(acct.store, "d"))
        try:
            shares[which].spend("d", PureDP(eighths / 8))
        except BudgetExceededError:
            assert len(ledger_entries(acct.store, "d")) == before
            assert accepted[which] + Fraction(eighths, 8) > Fraction(caps[which], 8)
            continue
        accepted[which] += Fraction(eighths, 8)
        assert accepted[which] <= Fraction(caps[which], 8)
    acct.verify()
