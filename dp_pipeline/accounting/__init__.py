"""Privacy accounting: pure composition maths and the stateful accountant. Never imports mechanisms."""

from dp_pipeline.accounting.accountant import (
    BudgetReport,
    LedgerEntry,
    PrivacyAccountant,
    ReleaseEntry,
    Reservation,
    UnknownDatasetError,
    VerifyReport,
)
from dp_pipeline.accounting.composition import (
    Composition,
    as_approx_dp,
    as_gdp,
    compose_basic,
    compose_gdp,
    compose_plan,
    compose_plan_gdp,
    event_gdp,
    group_event,
)
from dp_pipeline.accounting.policy import BudgetPolicy
from dp_pipeline.accounting.reports import Quote
from dp_pipeline.accounting.request import Request
from dp_pipeline.accounting.spender import UNACCOUNTED, DatasetHandle, Spender

__all__ = [
    "UNACCOUNTED",
    "BudgetPolicy",
    "BudgetReport",
    "Composition",
    "DatasetHandle",
    "LedgerEntry",
    "PrivacyAccountant",
    "Quote",
    "ReleaseEntry",
    "Request",
    "Reservation",
    "Spender",
    "UnknownDatasetError",
    "VerifyReport",
    "as_approx_dp",
    "as_gdp",
    "compose_basic",
    "compose_gdp",
    "compose_plan",
    "compose_plan_gdp",
    "event_gdp",
    "group_event",
]
