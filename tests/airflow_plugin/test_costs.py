"""DPCost: costs declared as JSON-ready specs (``params={"dp_cost": ...}``)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_cost_specs_for_params() -> None:
    from dp_pipeline import ApproxDP, GaussianDP, PureDP
    from dp_pipeline.airflow import DPCost
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    assert DPCost.from_spec({"dataset": "d", "epsilon": 0.5}).cost == PureDP(0.5)
    assert DPCost.from_spec({"dataset": "d", "epsilon": 0.5, "delta": 1e-6}).cost == ApproxDP(0.5, 1e-6)
    assert DPCost.from_spec({"dataset": "d", "mu": 0.3, "group_size": 2}).group_size == 2
    assert DPCost.from_spec({"dataset": "d", "mu": 0.3}).cost == GaussianDP(0.3)
    event = Laplace(epsilon=0.5, sensitivity=1.0).event
    assert DPCost.from_spec({"dataset": "d", "event": event.to_dict()}).cost == event
    bad_specs = (
        {"dataset": "d"},
        {"dataset": "d", "epsilon": 1, "mu": 1},
        {"epsilon": 1},
        {"dataset": "d", "x": 1},
    )
    for bad in bad_specs:
        with pytest.raises(InvalidParameterError):
            DPCost.from_spec(bad)
