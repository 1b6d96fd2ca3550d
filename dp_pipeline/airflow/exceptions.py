"""Exceptions a DP task raises when its cost does not fit its dataset's budget."""

from __future__ import annotations

from typing import Any, cast

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from dp_pipeline.exceptions import BudgetExceededError, KeyAlreadyUsedError, printable

__all__ = [
    "AttemptAlreadyChargedError",
    "LedgerConnectionError",
    "PrivacyBudgetExhausted",
    "PrivacyBudgetSkipped",
    "PrivacyCostError",
]


class _RefusalMixin:
    """Shared construction of the refusal exceptions from a :class:`BudgetExceededError`."""

    dataset: str
    requested: object
    spent: object
    remaining: object
    budget: object
    detail: str
    refusal_detail: str = "The task was refused before it ran and is not retried."

    def __init__(
        self,
        dataset: str,
        requested: object,
        spent: object,
        remaining: object,
        budget: object = None,
        detail: str = "",
    ) -> None:
        self.detail = detail
        refusal = cast(BudgetExceededError, self)  # both subclasses are BudgetExceededErrors
        BudgetExceededError.__init__(refusal, dataset, requested, spent, remaining, budget, detail)

    @classmethod
    def from_error(cls, error: BudgetExceededError, *, task: str = "") -> Any:
        """Wrap the accountant's refusal, keeping its numbers and its detail (the rule, the partitions the
        request read) and naming the refused task."""
        where = f"Task {task}: " if task else ""
        said = f" {error.detail}" if error.detail else ""
        return cls(
            error.dataset,
            error.requested,
            error.spent,
            error.remaining,
            error.budget,
            detail=f"{where}{cls.refusal_detail}{said}",
        )

    def serialize(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        """Airflow's exception serialisation, with every number kept as text."""
        cls = type(self)
        args = (self.dataset, str(self.requested), str(self.spent), str(self.remaining))
        budget = None if self.budget is None else str(self.budget)
        return f"{cls.__module__}.{cls.__name__}", args, {"budget": budget, "detail": self.detail}

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.dataset, self.requested, self.spent, self.remaining, self.budget, self.detail),
        )


def _rebuild(cls: type[Any], *args: Any) -> Any:
    *numbers, detail = args
    return cls(*numbers, detail=detail)


class PrivacyBudgetExhausted(_RefusalMixin, AirflowFailException, BudgetExceededError):  # noqa: N818
    """A task's privacy cost does not fit its dataset's remaining budget; the task fails without retry.

    A subclass of both :class:`airflow.sdk.exceptions.AirflowFailException` (Airflow fails the task and
    ignores ``retries``) and :class:`dp_pipeline.BudgetExceededError`. Nothing was charged.

    Parameters
    ----------
    dataset : str
        The dataset whose budget would be exceeded.
    requested, spent, remaining, budget : object
        The task's cost, what is spent, what remains and the dataset's budget, in the budget's currency.
    detail : str
        Appended to the message.
    """


class PrivacyBudgetSkipped(_RefusalMixin, AirflowSkipException, BudgetExceededError):  # noqa: N818
    """Like :class:`PrivacyBudgetExhausted`, but the task ends *skipped* (``on_exhausted="skip"``)."""

    refusal_detail = "The task was skipped before it ran."


class PrivacyCostError(AirflowFailException):
    """A task's declared cost cannot be charged at all (no budget for the dataset, or a cost in a
    currency the budget cannot express); the task fails without retry, since retrying cannot help."""


class AttemptAlreadyChargedError(AirflowException):
    """The ledger already holds a reservation under this attempt's key; this run does not run the task.

    The same attempt is delivered a second time: while its first delivery runs (the reservation is
    open) or after it ran (committed or released). The key pays for one release, so this delivery would
    release data that nobody paid for. Airflow's retry gives the next attempt a key of its own, which is
    charged normally. (A guarded attempt that *resumes* after a deferral or a reschedule continues under
    its committed reservation instead; see :mod:`dp_pipeline.airflow.guards`.)

    Attributes
    ----------
    dataset, key : str
        The dataset and the attempt's key.
    status : str
        The state of the attempt's reservation: ``"open"``, ``"committed"`` or ``"released"``.
    """

    dataset: str = ""
    key: str = ""
    status: str = ""

    @classmethod
    def from_error(cls, error: KeyAlreadyUsedError, *, task: str) -> AttemptAlreadyChargedError:
        """Wrap the accountant's refusal of a reused key, naming the task and keeping the state."""
        refusal = cls(
            f"Task {task}: the ledger already holds a {error.status} reservation for this attempt (key "
            f"{printable(error.key)}); running the same attempt again would release data without a new "
            "charge, so it does not run. A retry is a new attempt with a key of its own."
        )
        refusal.dataset, refusal.key, refusal.status = error.dataset, error.key, error.status
        return refusal


class LedgerConnectionError(ValueError):
    """An Airflow Connection cannot be turned into a ledger URL."""
