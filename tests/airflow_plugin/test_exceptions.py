"""The refusal a DP task raises: its numbers, pickling and Airflow's serialisation."""

from __future__ import annotations

import pickle

import pytest

pytestmark = pytest.mark.airflow


def test_refusal_exception_names_the_numbers_and_survives_pickling(ledger) -> None:
    from dp_pipeline import BudgetExceededError, PureDP
    from dp_pipeline.airflow import PrivacyBudgetExhausted

    ledger.set_budget("patients", PureDP(1.0))
    ledger.spend("patients", PureDP(0.75))
    with pytest.raises(BudgetExceededError) as caught:
        ledger.reserve("patients", PureDP(0.5), key="k")
    refusal = PrivacyBudgetExhausted.from_error(caught.value, task="dag.task")
    text = str(refusal)
    for part in ("'patients'", "requested", "spent", "remaining", "0.5", "0.75", "0.25", "dag.task"):
        assert part in text, part
    copy = pickle.loads(pickle.dumps(refusal))
    assert type(copy) is PrivacyBudgetExhausted
    assert str(copy) == text
    assert (copy.dataset, copy.requested, copy.spent, copy.remaining) == (
        refusal.dataset,
        refusal.requested,
        refusal.spent,
        refusal.remaining,
    )
    path, args, kwargs = refusal.serialize()
    assert path == "dp_pipeline.airflow.exceptions.PrivacyBudgetExhausted"
    assert args[0] == "patients"
    assert "0.25" in str(PrivacyBudgetExhausted(*args, **kwargs))
