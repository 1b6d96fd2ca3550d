"""Privacy accounting: pure composition maths and the stateful accountant. Never imports mechanisms."""

from dp_pipeline.accounting._accountant import (
    BudgetReport,
    LedgerEntry,
    PrivacyAccountant,
    ReleaseEntry,
    Reservation,
    UnknownDatasetError,
    VerifyReport,
)
from dp_pipeline.accounting._composition import (
    Composition,
    as_approx_dp,
    as_gdp,
    compose_basic,
    compose_gdp,
    compose_plan,
    compose_plan_gdp,
    event_gdp,
    group_event,
    group_plan,
)
from dp_pipeline.accounting._policy import BudgetPolicy
from dp_pipeline.accounting._reports import (
    Quote,
    ledger_entries,
    open_reservations,
    partition_reading,
    partition_spending,
)
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting._reservation import AttemptShare
from dp_pipeline.accounting._spender import UNACCOUNTED, DatasetHandle, Spender
from dp_pipeline.accounting._verify import anchor

__all__ = [
    "UNACCOUNTED",
    "AttemptShare",
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
    "anchor",
    "as_approx_dp",
    "as_gdp",
    "compose_basic",
    "compose_gdp",
    "compose_plan",
    "compose_plan_gdp",
    "event_gdp",
    "group_event",
    "group_plan",
    "ledger_entries",
    "open_reservations",
    "partition_reading",
    "partition_spending",
]
