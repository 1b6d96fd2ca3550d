"""PrivacyBudgetOperator: reserve a task's privacy cost on the ledger, then run its callable.

One budget for the task's code
------------------------------
The callable receives the attempt's reservation as ``dp`` (when it declares it) and runs inside
:func:`~dp_pipeline.accounting.scope.paying_from`: code written for a plain accountant works unchanged with
``accountant=dp`` (``df.pipe(dp_mean, ..., accountant=dp, dataset=...)``, a transformer's ``accountant=dp``),
and each of its releases is paid from the reservation and recorded under it, so the task is charged once.
A release beyond the reserved cost is refused (``BudgetExceededError``), and one made through the plain
dataset accountant inside the task is refused (``ScopedSpendError``), since it would charge the dataset a
second time.

Unspent reserved budget stays charged once the callable has started: the callable may have released data by
other means (a file it wrote), which the ledger cannot see, so the declared cost is the most its attempt can
have released. In a DAG that reserves per run (:func:`dp_pipeline.airflow.runs.run_budget`), ``dp`` is the
attempt's share of the run's reservation instead, claimed when the callable starts and capped at the
declared cost.

The declaration decides what is paid before the code runs
--------------------------------------------------------
A declared :class:`~dp_pipeline.mechanisms.Mechanism` is handed to the callable as ``mechanism``, as a
one-shot view (a charge covers one draw: a second draw, or a draw on a copy, raises
:class:`~dp_pipeline.exceptions.MechanismSpentError`), and its draw is paid before the callable starts,
whether or not the callable takes ``mechanism``: ``dp`` then pays only what the declared cost holds beyond
it. A declared event or guarantee (``Laplace(...).event``, ``PureDP(0.5)``) hands nothing that can draw:
the callable pays its releases through ``dp``. The callable's parameter names decide nothing.

Retry policy
------------
Every attempt has its own reservation, keyed ``dag_id/task_id/run_id/map_index/try_number``.

- An attempt that **started running the callable** stays charged, whether the callable returned or raised:
  it may have read the data, and a retry redraws the noise, so each attempt is a release of its own.
- An attempt that **fails before the callable runs** (its arguments cannot be bound, the task is stopped
  between reservation and call, ...) releases its reservation, with the reason recorded in the ledger.
- An attempt whose process dies between reservation and commit leaves the reservation pending; the ledger
  keeps counting it (fail closed) until an operator releases it with a reason.
- A refusal (:class:`~dp_pipeline.airflow.exceptions.PrivacyBudgetExhausted`) charges nothing and is not
  retried.
- A second delivery of the same attempt (its key is already reserved: the first delivery runs, ran or was
  released) raises :class:`~dp_pipeline.airflow.exceptions.AttemptAlreadyChargedError` and runs nothing.

Mapped tasks (``.partial(...).expand(...)``) are charged once per map index, up to ``max_map_length``
(Airflow's ``[core] max_map_length`` when not declared): a map index beyond it is refused before it reads
data, so that a run never charges more than the DAG check counted. A map index whose cost differs from its
``.partial()`` arguments (an upstream result mapped over ``group_size``, or over ``dataset`` with
``expand_kwargs(..., strict=False)``) fails the same way: the check counted the ``.partial()`` cost.

``dataset`` is a template field: ``dataset="visits/{{ ds }}"`` charges the name rendered for the run. On a
dataset ``visits`` declared partitioned (``set_budget("visits", ..., relation="add_remove",
partitions=L)``) the rendered name
``visits/2026-11-24`` charges partition ``2026-11-24`` of ``visits``; a name that is itself a dataset is
charged whole, and one that names a partition of a dataset that is not partitioned fails the task before
anything is charged. The callable's ``dataset`` is the rendered name: ``dataset=dataset`` with
``accountant=dp`` pays from the task's reservation on that partition (see
:meth:`~dp_pipeline.accounting.reservation.Reservation.locate`), and a release through ``dp`` that names no
partition, or another, is refused.

Noise left free
---------------
In a DAG whose runs have a budget share (``run_budget(dag, share=...)``), ``mechanism`` may be a
:class:`~dp_pipeline.allocation.PlannedRelease` (kind, sensitivity, weight, group size): the run's setup
calibrates it with the other tasks to the share (see :mod:`dp_pipeline.airflow.allocating`), and the callable
receives the calibrated mechanism (one-shot) as ``mechanism``. The attempt pays that mechanism's event
within its share of the run's reservation when the callable starts (so its code adds the noise with
``mechanism`` and does not pay again through ``dp``). Outside such a run the task is refused before
anything is charged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.standard.operators.python import PythonOperator

from dp_pipeline.accounting.scope import paying_from
from dp_pipeline.airflow._attempts import handed_mechanism, pay_share, run_reservation, start_attempt
from dp_pipeline.airflow._runtime import (
    OnExhausted,
    attempt_key,
    attempt_label,
    charged_cost,
    check_mapped_cost,
    check_on_exhausted,
    reserve_or_refuse,
    task_name,
)
from dp_pipeline.airflow.allocating import calibrated_cost
from dp_pipeline.airflow.costs import CostLike, DPCost
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID
from dp_pipeline.airflow.hooks import PrivacyLedgerHook

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant
    from dp_pipeline.accounting.reservation import Reservation
    from dp_pipeline.mechanisms import Mechanism

__all__ = ["INJECTED_ARGUMENTS", "PrivacyBudgetOperator"]

INJECTED_ARGUMENTS: tuple[str, ...] = ("mechanism", "accountant", "dataset", "dp")
"""Arguments a DP callable may declare by name, on top of Airflow's context keys."""


class PrivacyBudgetOperator(PythonOperator):
    """Run a Python callable that releases DP results, after reserving its cost on the privacy ledger.

    The callable receives, by name, whichever of these arguments it declares (or all of them with
    ``**kwargs``), together with Airflow's context keys (``ti``, ``ds``, ``params``, ...) and ``op_kwargs``:

    - ``dp``: the attempt's reservation, a spender to pass as ``accountant=`` to the frame functions and
      transformers: each release is paid from the task's reserved cost (see the module docstring);
    - ``mechanism``: the declared mechanism (or event, or guarantee), to add the noise with; for a
      :class:`~dp_pipeline.allocation.PlannedRelease`, the mechanism the run's share calibrated;
    - ``accountant``: the :class:`~dp_pipeline.PrivacyAccountant` of the ledger, for reading budgets
      (spending on the task's dataset through it is refused inside the task: pay with ``dp``);
    - ``dataset``: the dataset name.

    Parameters
    ----------
    dataset : str
        The ledger dataset the cost is charged to; a template field (rendered for each run, see
        :mod:`dp_pipeline.airflow.templating`).
    mechanism : Mechanism, PrivacyEvent, Guarantee or PlannedRelease
        What one run releases; its cost is known before any data is read. A PlannedRelease leaves the
        noise free for the run's budget share to calibrate (see the module docstring).
    python_callable : callable
        The code that reads the data and releases the noisy result (its return value goes to XCom).
    group_size : int, default 1
        Records one individual may contribute (group privacy).
    label : str, optional
        The ledger history label; defaults to ``dag_id.task_id`` (with the map index).
    max_map_length : int, optional
        Mapped: the most map indexes one run charges (see :class:`~dp_pipeline.airflow.costs.DPCost`).
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger (:class:`~dp_pipeline.airflow.hooks.PrivacyLedgerHook`).
    on_exhausted : {"fail", "skip"}, default "fail"
        A refused task fails without retry (:class:`~dp_pipeline.airflow.exceptions.PrivacyBudgetExhausted`)
        or ends skipped (:class:`~dp_pipeline.airflow.exceptions.PrivacyBudgetSkipped`).
    **kwargs
        Everything :class:`~airflow.providers.standard.operators.python.PythonOperator` accepts
        (``op_args``, ``op_kwargs``, ``templates_dict``, ``retries``, ...).

    Notes
    -----
    The cost is validated when the DAG is defined (no I/O); the ledger is opened only in ``execute``. See the
    module docstring for the retry policy.

    Examples
    --------
    >>> def count(mechanism):                                        # doctest: +SKIP
    ...     return mechanism.randomize(len(load_patients()))
    >>> PrivacyBudgetOperator(task_id="count", dataset="patients",   # doctest: +SKIP
    ...                       mechanism=Laplace(epsilon=0.5, sensitivity=1.0), python_callable=count)
    """

    template_fields: Sequence[str] = ("dataset", "templates_dict", "op_args", "op_kwargs")
    ui_color: ClassVar[str] = "#e6dcf5"  # type: ignore[misc]
    declares_dp_cost: ClassVar[bool] = True
    """Mapped, its cost is in its partial kwargs (read by
    :func:`dp_pipeline.airflow.declared.operator_cost`)."""

    def __init__(
        self,
        *,
        dataset: str,
        mechanism: CostLike,
        python_callable: Callable[..., Any],
        group_size: int = 1,
        label: str | None = None,
        max_map_length: int | None = None,
        ledger_conn_id: str = DEFAULT_CONN_ID,
        on_exhausted: OnExhausted = "fail",
        **kwargs: Any,
    ) -> None:
        super().__init__(python_callable=python_callable, **kwargs)
        self.dataset = dataset
        self.mechanism = mechanism
        self.group_size = group_size
        self.dp_label = label  # ``label`` is Airflow's display name of the task
        self.max_map_length = max_map_length
        self.ledger_conn_id = ledger_conn_id
        self.on_exhausted = check_on_exhausted(on_exhausted)
        self.dp_cost = DPCost(
            dataset=dataset, cost=mechanism, group_size=group_size, label=label, max_map_length=max_map_length
        )
        self._dp_callable_started = False
        self._dp_attempt: tuple[Reservation, DPCost, Any, bool, Mechanism | None] | None = None

    def get_accountant(self) -> PrivacyAccountant:
        """The accountant of ``ledger_conn_id`` (a subclass may reach its ledger another way)."""
        return PrivacyLedgerHook(self.ledger_conn_id).get_accountant()

    def execute(self, context: Any) -> Any:
        """Reserve the cost (or find the run's reservation), run the callable paying from it, then commit
        (or cancel if the callable never ran)."""
        check_mapped_cost(self.dp_cost, context)
        accountant = self.get_accountant()
        declared = charged_cost(accountant, self.dp_cost, context, rendered=self.dataset)
        cost, calibrated = calibrated_cost(declared, context)
        run = run_reservation(accountant, cost, context, self.ledger_conn_id)
        reservation: Reservation = (
            run
            if run is not None
            else reserve_or_refuse(accountant, cost, context, on_exhausted=self.on_exhausted)
        )
        own = None if run is not None else reservation  # the attempt's own reservation, committed here
        spender = reservation if run is None else run.share(attempt_key(context))
        handed = handed_mechanism(cost, calibrated)
        self._dp_callable_started = False
        self._dp_attempt = (reservation, cost, context, run is not None, handed)
        mechanism = self.mechanism if handed is None else handed.one_shot()
        context.update(
            {"mechanism": mechanism, "accountant": accountant, "dataset": self.dataset, "dp": spender}
        )
        try:
            result = super().execute(context)
        except BaseException as exc:
            if own is not None:
                self._end_attempt(own, context, exc)
            raise
        finally:
            self._dp_attempt = None
        if own is not None:
            own.commit()
            self.log.info("committed %s for %s", cost.describe(), task_name(context))
        return result

    def _end_attempt(self, reservation: Any, context: Mapping[str, Any], exc: BaseException) -> None:
        name = task_name(context)
        if self._dp_callable_started:
            try:
                reservation.commit()
            except Exception:
                self.log.exception("could not commit the reservation of %s; it stays open and counted", name)
                return
            self.log.warning(
                "%s failed after its callable started (%s); the attempt stays charged, since it may have "
                "read data and a retry redraws noise",
                name,
                type(exc).__name__,
            )
            return
        reason = f"attempt failed before its callable ran: {type(exc).__name__}: {exc}"
        try:
            reservation.cancel(reason=reason[:500])
        except Exception:
            self.log.exception("could not release the reservation of %s; the ledger keeps counting it", name)
            return
        self.log.warning("%s failed before its callable ran; its reservation was released", name)

    def _check_arguments(self) -> None:
        try:
            signature = inspect.signature(self.python_callable)
        except (TypeError, ValueError):  # builtins without a signature: nothing to check
            return
        signature.bind(*self.op_args, **self.op_kwargs)

    def _start(self) -> Reservation:
        """Check the callable's arguments bind, then pay what the declaration says is paid before the code
        runs: in a run, claim the attempt's share of the run's reservation (and pay the handed mechanism
        within it, see :func:`~dp_pipeline.airflow._attempts.start_attempt`); on the attempt's own
        reservation,
        pay the handed mechanism from it. Mark the attempt as started and return the spender (``dp``)."""
        self._check_arguments()
        assert self._dp_attempt is not None, "the callable runs only from execute()"
        reservation, cost, context, in_run, handed = self._dp_attempt
        spender: Reservation = reservation
        if in_run:
            spender = start_attempt(
                reservation, cost, context, hands_mechanism=handed is not None, on_exhausted=self.on_exhausted
            )
        elif handed is not None:  # dp pays only beyond the mechanism's one draw
            pay_share(spender, cost, f"{attempt_label(cost, context)}: the mechanism handed to the task")
        self._dp_callable_started = True
        return spender

    def execute_callable(self) -> Any:
        """Start the attempt, then call the callable paying from the attempt's reservation."""
        with paying_from(self._start()):
            return super().execute_callable()

    async def aexecute_callable(self) -> Any:
        """The asynchronous form of :meth:`execute_callable`."""
        with paying_from(self._start()):
            return await super().aexecute_callable()
