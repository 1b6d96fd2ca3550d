"""Planning before anything runs: whether plans of releases fit a dataset's budget, and how much noise a
budget share leaves free releases.

Pure with respect to the ledger: the functions here read budgets and totals, and write nothing. They know no
scheduler: the Airflow provider reads DAGs into these values and formats the answers
(:mod:`dp_pipeline.airflow.planning`), and ``dp-pipeline plan check`` can ask the same questions of one
plan.

- :mod:`dp_pipeline.planning._plans`: :class:`PlanPart` (releases on a dataset or on one of its partitions,
  composed as one plan) and :func:`check_plans`, which prices each part against the whole budget and
  against what remains, and the parts of one dataset together.
- :mod:`dp_pipeline.planning._shares`: :func:`calibrate_share`, which calibrates free releases beside fixed
  ones to a budget share under a dataset's rule and neighbouring relation.
"""

from __future__ import annotations

from dp_pipeline.planning._plans import PlanCheck, PlanPart, check_plan, check_plans, check_together
from dp_pipeline.planning._shares import (
    ShareCalibration,
    calibrate_share,
    describe_noise,
    noise_parameters,
    share_terms,
)

__all__ = [
    "PlanCheck",
    "PlanPart",
    "ShareCalibration",
    "calibrate_share",
    "check_plan",
    "check_plans",
    "check_together",
    "describe_noise",
    "noise_parameters",
    "share_terms",
]
