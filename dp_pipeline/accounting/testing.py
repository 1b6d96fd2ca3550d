"""Contract tests that a new ledger backend or budget rule subclasses (pytest; needs the ``dev`` extra).

In the manner of dp-accounting's abstract ``PrivacyAccountantTest``, each class holds the tests every
implementation must pass; a subclass says how to build the implementation and is collected by pytest::

    from dp_pipeline.accounting.testing import BudgetRuleContract, LedgerStoreContract

    class TestMyStore(LedgerStoreContract):
        def make_store(self, request):
            return MyStore(...)

    class TestMyRule(BudgetRuleContract):
        def make_rules(self):
            return [MyRule.create(ApproxDP(1.0, 1e-6))]

:class:`LedgerStoreContract` checks the store protocol: atomic appends, lookups inside a transaction,
rollback, the hash chain, and a full accountant run. :class:`BudgetRuleContract` checks a rule's arithmetic
against the accountant and against independent computations: nothing spent fits and leaves the whole
budget; what is spent never decreases; the accountant accepts a spend exactly when the rule's ``fits``
says so, and a refused spend writes nothing; spending exactly what remains is accepted; and a plan is
never charged less than its privacy loss, bounded from below by dp-accounting's optimistic privacy-loss
distributions or, for μ-GDP costs, by √Σμᵢ² in 50-digit arithmetic (mpmath).

References
----------
Google, dp-accounting, ``dp_accounting/privacy_accountant_test.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

try:
    import hypothesis
    import mpmath
    import pytest
    from hypothesis import strategies as st
except ImportError as _err:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f'the contract tests need pytest, hypothesis and mpmath: pip install "dp-pipeline[dev]" ({_err})'
    ) from None

from dp_pipeline._exact import divide_up
from dp_pipeline.accounting._accountant import PrivacyAccountant
from dp_pipeline.accounting.ledger._base import DatasetState, LedgerStore, LedgerTransaction, check_chain
from dp_pipeline.accounting.rules import BudgetRule, Totals, stored_rule
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError, UnsupportedCompositionError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

__all__ = ["BudgetRuleContract", "LedgerStoreContract", "gaussian_event", "laplace_event"]


def laplace_event(epsilon: float, sensitivity: float = 1.0) -> PrivacyEvent:
    """The event of Laplace noise of scale b = Δ/ε rounded up, as :class:`~dp_pipeline.mechanisms.Laplace`
    states it (built here as data: accounting never imports the mechanisms)."""
    scale = divide_up(sensitivity, epsilon)
    return PrivacyEvent(
        kind="laplace", guarantee=PureDP(epsilon), sensitivity=sensitivity, parameters={"scale": scale}
    )


def gaussian_event(mu: float, delta: float | None = None, sensitivity: float = 1.0) -> PrivacyEvent:
    """The event of Gaussian noise of σ = Δ/μ rounded up: μ-GDP (as ``Gaussian.from_mu`` states it), or its
    (ε, δ) reading when ``delta`` is given."""
    sigma = divide_up(sensitivity, mu)
    exact = GaussianDP(divide_up(sensitivity, sigma))
    guarantee: Guarantee = exact if delta is None else exact.to_approx_dp(delta)
    return PrivacyEvent(
        kind="gaussian", guarantee=guarantee, sensitivity=sensitivity, parameters={"sigma": sigma}
    )


# ------------------------------------------------------------------------------------------------------
# ledger stores


def _same_state(tx: LedgerTransaction) -> DatasetState:
    head = tx.head
    assert head is not None
    return DatasetState(head.state.budget, head.state.method, dict(head.state.totals))


class LedgerStoreContract:
    """What every :class:`~dp_pipeline.accounting.ledger.LedgerStore` must do. Subclass and define
    :meth:`make_store` (a new, empty store); the store is closed after each test."""

    def make_store(self, request: pytest.FixtureRequest) -> LedgerStore:
        """A new, empty store (``request`` gives access to other fixtures, e.g. a database URL)."""
        raise NotImplementedError("subclasses of LedgerStoreContract define make_store")

    @pytest.fixture
    def store(self, request: pytest.FixtureRequest) -> Iterator[LedgerStore]:
        store = self.make_store(request)
        yield store
        store.close()

    def test_implements_the_protocol_and_starts_empty(self, store: LedgerStore) -> None:
        assert isinstance(store, LedgerStore) and isinstance(store.url, str)
        assert store.datasets() == [] and store.head("d") is None and store.records("d") == []
        assert store.reservation("d", key="k") is None and store.open_reservations("d") == []

    def test_lookups_inside_a_transaction_see_its_own_appends(self, store: LedgerStore) -> None:
        PrivacyAccountant(store).set_budget("d", ApproxDP(1.0, 0.0))

        def run(tx: LedgerTransaction) -> tuple[Any, ...]:
            assert tx.reservation(key="k1") is None
            reserve = tx.append("reserve", {"label": "x"}, _same_state(tx), key="k1")
            open_one = tx.reservation(key="k1")
            commit = tx.append("commit", {}, _same_state(tx), key="k1", reservation=reserve.seq)
            return reserve, commit, open_one, tx.reservation(seq=reserve.seq), tx.reservation(key="k1")

        reserve, commit, open_one, by_seq, by_key = store.atomic("d", run)
        assert open_one.status == "open" and open_one.reserve == reserve
        assert by_seq.status == by_key.status == "committed" and by_key.end == commit
        stored = store.reservation("d", key="k1")
        assert stored is not None and stored.reserve == reserve and stored.end == commit
        head = store.head("d")
        assert head is not None and head.seq == commit.seq == 3 and head.hash == commit.hash

    def test_records_after_a_seq_include_the_transactions_own_appends(self, store: LedgerStore) -> None:
        acct = PrivacyAccountant(store)
        acct.set_budget("d", ApproxDP(1.0, 0.0))
        acct.spend("d", PureDP(0.5), key="first")
        committed = store.records("d")

        def run(tx: LedgerTransaction) -> tuple[list[Any], list[Any], list[Any]]:
            before = tx.records_after(1)
            record = tx.append("reserve", {"label": "x"}, _same_state(tx), key="k2")
            return before, tx.records_after(2), [record]

        before, after, appended = store.atomic("d", run)
        assert before == committed[1:] and after == [committed[2], *appended]

    def test_a_transaction_that_raises_after_appending_writes_nothing(self, store: LedgerStore) -> None:
        acct = PrivacyAccountant(store)
        acct.set_budget("d", ApproxDP(1.0, 0.0))
        acct.spend("d", PureDP(0.5), key="first")
        before = (store.records("d"), store.head("d"))

        def run(tx: LedgerTransaction) -> None:
            record = tx.append("reserve", {"label": "doomed"}, _same_state(tx), key="k2")
            assert tx.reservation(key="k2") is not None  # visible inside the transaction
            tx.append("commit", {}, _same_state(tx), key="k2", reservation=record.seq)
            raise RuntimeError("refused after appending")

        with pytest.raises(RuntimeError, match="refused after appending"):
            store.atomic("d", run)
        assert (store.records("d"), store.head("d")) == before
        assert store.reservation("d", key="k2") is None
        acct.spend("d", PureDP(0.5))  # the store is usable afterwards
        assert acct.remaining("d").epsilon == 0.0

    def test_records_form_one_hash_chain_per_dataset(self, store: LedgerStore) -> None:
        acct = PrivacyAccountant(store)
        acct.set_budget("b", GaussianDP(1.0))
        acct.set_budget("a", ApproxDP(1.0, 1e-6))
        acct.spend("a", PureDP(0.25), label="ünïcode ✓", key="a/1")
        acct.spend("b", GaussianDP(0.5))
        assert store.datasets() == ["a", "b"]
        for name, count in (("a", 3), ("b", 3)):
            records = store.records(name)
            assert [r.seq for r in records] == list(range(1, count + 1))
            assert check_chain(name, records, store.head(name)) is None
        assert store.records("a")[1].body["label"] == "ünïcode ✓"  # bodies round-trip as plain JSON

    def test_open_reservations_and_their_ends(self, store: LedgerStore) -> None:
        acct = PrivacyAccountant(store)
        acct.set_budget("d", ApproxDP(1.0, 0.0))
        acct.reserve("d", PureDP(0.125), key="stays-open")
        acct.reserve("d", PureDP(0.125), key="committed").commit()
        acct.reserve("d", PureDP(0.125), key="cancelled").cancel("read no data")
        assert [r.key for r in store.open_reservations("d")] == ["stays-open"]
        statuses = {key: store.reservation("d", key=key) for key in ("stays-open", "committed", "cancelled")}
        assert {key: found.status for key, found in statuses.items() if found} == {
            "stays-open": "open",
            "committed": "committed",
            "cancelled": "released",
        }
        assert acct.spent("d").epsilon == 0.25 and acct.verify().records == len(store.records("d"))


# ------------------------------------------------------------------------------------------------------
# budget rules


def _default_events() -> st.SearchStrategy[PrivacyEvent]:
    scale = st.floats(min_value=0.02, max_value=1.0)
    return st.one_of(
        scale.map(laplace_event),
        scale.map(gaussian_event),
        scale.map(lambda mu: gaussian_event(mu, 1e-7)),
        scale.map(lambda eps: PrivacyEvent(kind="guarantee", guarantee=PureDP(eps))),
        scale.map(lambda eps: PrivacyEvent(kind="guarantee", guarantee=ApproxDP(eps, 1e-8))),
        scale.map(lambda mu: PrivacyEvent(kind="guarantee", guarantee=GaussianDP(mu))),
    )


def _plan_events() -> st.SearchStrategy[list[PrivacyEvent]]:
    scale = st.floats(min_value=0.05, max_value=1.0)
    return st.lists(st.one_of(scale.map(laplace_event), scale.map(gaussian_event)), min_size=1, max_size=6)


def _charge(rule: BudgetRule, event: PrivacyEvent) -> Any:
    """The rule's charge of one event for one person, or None when the rule cannot charge it."""
    try:
        return rule.charge_event(event, 1)[0]
    except UnsupportedCompositionError:
        return None


def _loss(cost: Guarantee) -> float:
    """The amount a report orders by: μ of a μ-GDP amount, else ε."""
    return cost.mu if isinstance(cost, GaussianDP) else cost.epsilon  # type: ignore[attr-defined]


def _optimistic_pld_epsilon(events: Sequence[PrivacyEvent], delta: float) -> float:
    """A lower bound on the plan's ε at δ, independent of dp-pipeline's composition: dp-accounting's
    optimistic (rounded-down) privacy-loss distributions of the Laplace and Gaussian noise, composed."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    composed = None
    for e in events:
        noise = e.parameters.get("scale", e.parameters.get("sigma"))
        build = pld.from_laplace_mechanism if e.kind == "laplace" else pld.from_gaussian_mechanism
        one = build(
            noise, sensitivity=e.sensitivity, pessimistic_estimate=False, value_discretization_interval=1e-4
        )
        composed = one if composed is None else composed.compose(one)
    assert composed is not None
    return float(composed.get_epsilon_for_delta(delta))


def _mu_lower_bound(events: Sequence[PrivacyEvent]) -> mpmath.mpf:
    """√Σμᵢ² in 50-digit arithmetic, μᵢ = Δ/σ of Gaussian noise and −2Φ⁻¹(e^{−ε/2}/2) of Laplace noise (the
    μ of its trade-off, Dong, Roth & Su 2022)."""
    with mpmath.workdps(50):
        total = mpmath.mpf(0)
        for e in events:
            sensitivity = mpmath.mpf(e.sensitivity)
            if e.kind == "gaussian":
                mu = sensitivity / mpmath.mpf(e.parameters["sigma"])
            else:
                eps = sensitivity / mpmath.mpf(e.parameters["scale"])
                mu = 2 * mpmath.sqrt(2) * mpmath.erfinv(-mpmath.expm1(-eps / 2))
            total += mu * mu
        return mpmath.sqrt(total)


def _settings(examples: int) -> hypothesis.settings:
    # each subclass runs the same test method on its own instance: that is the point of a contract
    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[hypothesis.HealthCheck.differing_executors, hypothesis.HealthCheck.too_slow],
    )


class BudgetRuleContract:
    """What every :class:`~dp_pipeline.accounting.rules.BudgetRule` must do. Subclass and define
    :meth:`make_rules` (registered rules with their budgets, as ``create`` makes them); :meth:`events` may be
    narrowed. Events a rule cannot charge (UnsupportedCompositionError) count as refused."""

    def make_rules(self) -> list[BudgetRule]:
        """The rules to test, each with a budget (``Rule.create(budget)``)."""
        return []

    def events(self) -> st.SearchStrategy[PrivacyEvent]:
        """Single releases to spend: Laplace and Gaussian noise, and bare guarantees of every kind."""
        return _default_events()

    def remaining_spend(self, rule: BudgetRule, totals: Totals) -> Guarantee | None:
        """A guarantee that spends exactly what ``rule.remaining(totals)`` reports (None: none exists, and
        the check is skipped). Default: the remaining amount itself."""
        return rule.remaining(totals)[0]

    def _accountant(self, rule: BudgetRule) -> PrivacyAccountant:
        acct = PrivacyAccountant("memory://")
        acct.set_budget("d", rule.budget, rule=rule.names[0])  # type: ignore[arg-type]
        return acct

    def test_make_rules(self) -> None:
        rules = self.make_rules()
        assert rules, "make_rules() returns no rule to test"
        for rule in rules:  # registered: the ledger's stored name and the budget find the class again
            assert stored_rule(rule.name, rule.budget, "test") is type(rule)
            assert type(rule).create(rule.budget) == rule

    def test_nothing_spent_fits_and_leaves_the_whole_budget(self) -> None:
        for rule in self.make_rules():
            empty = rule.empty()
            assert rule.fits(empty)
            assert _loss(rule.spent(empty)[0]) == 0.0
            assert rule.remaining(empty)[0] == rule.budget
            assert rule.read_totals(empty.to_json(), "test").same_as(empty)

    @_settings(60)
    @hypothesis.given(data=st.data())
    def test_spent_never_decreases_and_a_refusal_is_final(self, data: st.DataObject) -> None:
        for rule in self.make_rules():
            totals, last, refused = rule.empty(), 0.0, False
            for event in data.draw(st.lists(self.events(), max_size=12)):
                charge = _charge(rule, event)
                if charge is None:
                    continue
                totals = rule.add(totals, charge)
                spent = _loss(rule.spent(totals)[0])
                assert spent >= last
                fits = rule.fits(totals)
                assert not (refused and fits)  # sums only grow: once over the budget, always over
                last, refused = spent, not fits

    @_settings(15)
    @hypothesis.given(data=st.data())
    def test_the_accountant_accepts_exactly_what_fits_and_a_refusal_writes_nothing(
        self, data: st.DataObject
    ) -> None:
        for rule in self.make_rules():
            acct, totals = self._accountant(rule), rule.empty()
            for event in data.draw(st.lists(self.events(), max_size=10)):
                charge = _charge(rule, event)
                fits = charge is not None and rule.fits(rule.add(totals, charge))
                before = acct.store.records("d")
                try:
                    acct.spend("d", event)
                except (BudgetExceededError, UnsupportedCompositionError):
                    assert not fits
                    assert acct.store.records("d") == before
                    continue
                assert fits
                totals = rule.add(totals, charge)
                assert acct.spent("d").guarantee == rule.spent(totals)[0]
                assert acct.remaining("d").guarantee == rule.remaining(totals)[0]
            acct.verify()

    @_settings(15)
    @hypothesis.given(data=st.data())
    def test_spending_exactly_what_remains_fits(self, data: st.DataObject) -> None:
        for rule in self.make_rules():
            acct, totals = self._accountant(rule), rule.empty()
            for event in data.draw(st.lists(self.events(), max_size=6)):
                charge = _charge(rule, event)
                if charge is not None and rule.fits(rule.add(totals, charge)):
                    acct.spend("d", event)
                    totals = rule.add(totals, charge)
            rest = self.remaining_spend(rule, totals)
            if rest is None or _loss(rest) == 0.0:
                continue
            acct.spend("d", rest)  # accepted: remaining() is rounded down, never above what fits
            assert acct.verify().records == len(acct.store.records("d"))

    @_settings(10)
    @hypothesis.given(events=_plan_events())
    def test_a_plan_is_never_charged_below_its_privacy_loss(self, events: list[PrivacyEvent]) -> None:
        for rule in self.make_rules():
            try:
                planned = rule.charge_plan(events, 1, None, rule.empty())
            except UnsupportedCompositionError:
                continue
            cost = planned.cost
            if isinstance(cost, GaussianDP):
                assert mpmath.mpf(cost.mu) >= _mu_lower_bound(events)
                cost = cost.to_approx_dp(1e-6)
            assert isinstance(cost, ApproxDP)
            if cost.delta == 0.0:  # pure: the loss at δ = 0 is exactly Σεᵢ, εᵢ = Δᵢ/bᵢ of the noise
                assert all(e.kind == "laplace" for e in events)
                exact = sum(
                    (Fraction(e.sensitivity or 1.0) / Fraction(e.parameters["scale"]) for e in events),
                    Fraction(0),
                )
                assert Fraction(cost.epsilon) >= exact
            else:
                assert cost.epsilon >= _optimistic_pld_epsilon(events, cost.delta)
