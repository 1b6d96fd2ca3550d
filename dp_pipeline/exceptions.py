"""Exceptions and warnings raised by dp-pipeline.

Every error fails closed and explains itself: what was asked, what is known, and what to do next.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BudgetExceededError",
    "FastSamplerWarning",
    "InvalidParameterError",
    "KeyAlreadyUsedError",
    "LedgerError",
    "LedgerURLError",
    "MechanismSpentError",
    "PrivacyLeakWarning",
    "UnknownDatasetError",
    "UnsupportedCompositionError",
    "data_value_error",
    "printable",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter or an input has the wrong type or an invalid value.

    Subclasses both ``ValueError`` and ``TypeError`` (as scikit-learn's error of the same name does), so
    callers that catch either keep working. ``parameter`` names the offending argument when one can be named.
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class UnknownDatasetError(InvalidParameterError, KeyError):
    """The dataset has no budget in this ledger (also a KeyError).

    Attributes
    ----------
    dataset : str
    ledger : str or None
        The ledger's URL, password hidden.
    empty : bool
        The ledger has no dataset at all: it may have just been created at a mistyped path.
    advice : str or None
        How to set a budget (default: the Python call; the command line names its command).
    """

    def __init__(
        self, dataset: str, ledger: str | None = None, empty: bool = False, advice: str | None = None
    ) -> None:
        where = "this ledger" if ledger is None else f"the ledger {ledger}"
        message = f"dataset {dataset!r} has no privacy budget in {where}."
        if empty:
            message += (
                " That ledger has no budgets at all: if it was just created, the path, URL or connection may "
                "be wrong, and a new, empty ledger was opened there: check it before setting a budget on it."
            )
        message += " " + (
            advice
            or f"To set one: acct.set_budget({dataset!r}, ApproxDP(epsilon, delta)) or "
            f"acct.set_budget({dataset!r}, GaussianDP(mu))."
        )
        super().__init__(message, "dataset")
        self.dataset = dataset
        self.ledger = ledger
        self.empty = empty
        self.advice = advice

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.dataset, self.ledger, self.empty, self.advice))


class BudgetExceededError(RuntimeError):
    """A spend would take a dataset past its privacy budget; nothing was charged.

    Attributes
    ----------
    dataset : str
        The dataset whose budget would be exceeded.
    requested, spent, remaining, budget : object
        The requested cost, the amount already spent, what remains and the total budget (guarantee
        objects or numbers, in the budget's currency).
    group_size : int
        The group size k the request was charged for (``requested`` is the cost for the group).
    single : object or None
        For k > 1: what the request would cost one person, shown beside ``requested``.
    reservation : str or None
        For a release paid from a reservation: the reservation's key. ``spent``, ``remaining`` and
        ``budget`` are then the reservation's (what was paid from it, what is left, what it holds); the
        dataset was not charged.
    detail : str
        What the message adds after the numbers (why the request does not fit, what to do).

    A pickled error (a worker process, a task's log) keeps every attribute and its message.
    """

    def __init__(
        self,
        dataset: str,
        requested: object,
        spent: object,
        remaining: object,
        budget: object = None,
        detail: str = "",
        group_size: int = 1,
        single: object = None,
        reservation: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.requested = requested
        self.spent = spent
        self.remaining = remaining
        self.budget = budget
        self.group_size = group_size
        self.single = single
        self.reservation = reservation
        self.detail = detail
        group = f" (for a group of k = {group_size}; {single} for one person)" if single is not None else ""
        whose = (
            f"privacy budget of dataset {dataset!r}"
            if reservation is None
            else f"reservation {reservation!r} on dataset {dataset!r}"
        )
        message = (
            f"{whose} would be exceeded: requested {requested}{group}, "
            f"{'spent' if reservation is None else 'paid from it'} {spent}, remaining {remaining}"
        )
        if budget is not None:
            message += f" ({'budget' if reservation is None else 'reserved'} {budget})"
        message += (
            ". Nothing was charged. Lower the request (larger noise, fewer releases) or raise the "
            "dataset's budget deliberately."
            if reservation is None
            else ". Nothing was paid. Lower the request (larger noise, fewer releases) or reserve more "
            "for this work."
        )
        if detail:
            message += f" {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (
                self.dataset,
                self.requested,
                self.spent,
                self.remaining,
                self.budget,
                self.detail,
                self.group_size,
                self.single,
                self.reservation,
            ),
        )


class UnsupportedCompositionError(ValueError):
    """A guarantee cannot be expressed in the currency of the budget it is charged to.

    For example an (ε, δ > 0) guarantee implies no μ-GDP guarantee at all (f_{ε,δ}(0) = 1 − δ < G_μ(0) = 1),
    so it cannot be charged to a μ-GDP budget.
    """


class LedgerError(RuntimeError):
    """The ledger cannot be used: corrupt, tampered, written by a newer schema, or inconsistent."""


class LedgerURLError(InvalidParameterError, LedgerError):
    """A ledger URL that cannot name a database: invalid input (``InvalidParameterError``, the command exits
    2), and still a ``LedgerError`` for callers that catch that when a ledger cannot be opened."""


class KeyAlreadyUsedError(LedgerError):
    """A spend or reservation reused an idempotency key that its dataset already holds; nothing was written.

    A key pays for exactly one release. A second call with the key would let its caller draw fresh noise
    (a second, independent release) that the ledger never charged, so every call after the first is
    refused, whatever the first reservation's state.

    Attributes
    ----------
    dataset, key : str
        The dataset and the reused key.
    status : str
        The first reservation's state: ``"open"`` (its call is running, or died before committing),
        ``"committed"`` (it paid for a release) or ``"released"`` (returned to the budget).
    """

    _ADVICE: ClassVar[dict[str, str]] = {
        "open": (
            "another call holding this key is running or died before committing. Its holder commits or "
            "cancels it; an operator may cancel it with PrivacyAccountant.cancel(dataset, key, reason) "
            "only if that call certainly read no data"
        ),
        "committed": (
            "it already paid for a release. A retry would draw new noise that nobody paid for: use the "
            "first call's result; if that result was lost, a new release needs a new key and costs again"
        ),
        "released": "it was returned to the budget; a new attempt needs a new key",
    }

    def __init__(self, dataset: str, key: str, status: str) -> None:
        self.dataset = dataset
        self.key = key
        self.status = status
        advice = self._ADVICE.get(status, "a new release needs a new key")
        super().__init__(
            f"the key {key!r} on dataset {dataset!r} already has a {status} reservation, so this call was "
            f"refused and nothing was charged: {advice}."
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.dataset, self.key, self.status))


class PrivacyLeakWarning(UserWarning):
    """An operation may leak privacy beyond what is accounted, e.g. bounds computed from the data."""


class FastSamplerWarning(UserWarning):
    """Noise is drawn by the fast path (``fast_rng``): textbook floating-point samplers that are not
    floating-point safe, so the ε charged for such a release is not a bound on what its floats reveal
    (Mironov 2012). Raised once per process, at the first such release; the ledger marks every charged
    release drawn this way (``sampler="fast"`` on its event, shown by ``history()``)."""


def data_value_error(
    where: str, count: int, problem: str, parameter: str | None, hint: str = ""
) -> InvalidParameterError:
    """The refusal of some values of the data: where they are, how many and what is wrong, never a value.

    Error messages end up in logs and terminals (Airflow serves task logs in its UI), so a refusal of data
    never quotes what it refuses: ``where`` names the parameter, column or feature, ``count`` says how many
    values are refused and ``problem`` what kind of problem they have (e.g. "not 0/1"). Raise the result
    ``from None`` when it replaces another exception, whose message may quote the value.
    """
    noun = "value is" if count == 1 else "values are"
    message = f"{where}: {count} {noun} {problem} (not shown: data values stay private)"
    return InvalidParameterError(f"{message}; {hint}" if hint else message, parameter)


class MechanismSpentError(RuntimeError):
    """A one-shot mechanism (see :meth:`dp_pipeline.mechanisms.Mechanism.one_shot`) was asked for a second
    draw, or a copy of it (copied, pickled, or inherited by a forked process) was asked for any: one charge
    pays for one draw, so the draw is refused and nothing is released or charged."""


def printable(text: object) -> str:
    """``text`` with every non-printable character escaped as in a Python literal (``\\x1b``, ``\\u202e``).

    Labels, keys and dataset names are written by users and pipelines; shown raw, an ANSI escape in one
    could clear a terminal or hide text, a bidirectional override reorder it, a newline fake a table row.
    Every human-readable output (the command's tables and messages, ``plan check``, the Airflow check
    command, log lines) shows them through this function. JSON output is left exact.
    """
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))
