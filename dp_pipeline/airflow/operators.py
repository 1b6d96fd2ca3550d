"""PrivacyBudgetOperator: reserve a task's privacy cost on the ledger, then run its callable.

One budget for the task's code
------------------------------
The callable receives the attempt's reservation as ``dp`` (when it declares it): code written for a plain
accountant works unchanged with ``accountant=dp`` (``df.pipe(dp_mean, ..., accountant=dp, dataset=...)``, a
transformer's ``accountant=dp``), and each of its releases is paid from the reservation and recorded under
it, so the task is charged once. A release beyond the reserved cost is refused (``BudgetExceededError``).
The ``accountant`` the callable receives is read-only (:meth:`PrivacyBudgetOperator.get_reader`): it reads
budgets and history, and refuses every charge (``LedgerError``, nothing written), so the task's code cannot
charge its dataset a second time through what it is given. (An accountant the code opens for itself is its
own: a release through it is charged again, which over-counts but never under-counts.)

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
partitions=L)``) the rendered name ``visits/2026-11-24`` charges partition ``2026-11-24`` of ``visits``; a
name that is itself a dataset is charged whole, and one that names a partition of a dataset that is not
partitioned fails the task before anything is charged. The name is split here, once
(:func:`~dp_pipeline.airflow.attempt.charged_cost`): the callable receives the dataset as ``dataset`` and the
partition as ``partition`` (None for a whole dataset), to pass on explicitly (``dataset=dataset,
partition=partition, accountant=dp``); a release through ``dp`` that names no partition, or another, is
refused.

Noise left free
---------------
In a DAG whose runs have a budget share (``run_budget(dag, share=...)``), ``mechanism`` may be a
:class:`~dp_pipeline.PlannedRelease` (kind, sensitivity, weight, group size): the run's setup
calibrates it with the other tasks to the share (see :mod:`dp_pipeline.airflow.allocating`), and the callable
receives the calibrated mechanism (one-shot) as ``mechanism``. The attempt pays that mechanism's event
within its share of the run's reservation when the callable starts (so its code adds the noise with
``mechanism`` and does not pay again through ``dp``). Outside such a run the task is refused before
anything is charged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.standard.operators.python import PythonOperator

from dp_pipeline.airflow.attempt import Attempt, check_mapped_cost
from dp_pipeline.airflow.costs import CostLike, DPCost
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID, OnExhausted, check_on_exhausted
from dp_pipeline.airflow.hooks import PrivacyLedgerHook

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant

__all__ = ["INJECTED_ARGUMENTS", "PrivacyBudgetOperator"]

INJECTED_ARGUMENTS: tuple[str, ...] = ("mechanism", "accountant", "dataset", "partition", "dp")
"""Arguments a DP callable may declare by name, on top of Airflow's context keys."""


class PrivacyBudgetOperator(PythonOperator):
    """Run a Python callable that releases DP results, after reserving its cost on the privacy ledger.

    The callable receives, by name, whichever of these arguments it declares (or all of them with
    ``**kwargs``), together with Airflow's context keys (``ti``, ``ds``, ``params``, ...) and ``op_kwargs``:

    - ``dp``: the attempt's reservation, a spender to pass as ``accountant=`` to the frame functions and
      transformers: each release is paid from the task's reserved cost (see the module docstring);
    - ``mechanism``: the declared mechanism (or event, or guarantee), to add the noise with; for a
      :class:`~dp_pipeline.PlannedRelease`, the mechanism the run's share calibrated;
    - ``accountant``: a read-only :class:`~dp_pipeline.PrivacyAccountant` of the ledger
      (:meth:`get_reader`), for reading budgets and history; it refuses every charge: pay with ``dp``;
    - ``dataset`` and ``partition``: the dataset the rendered name charges, and its partition (None when
      the name charges the dataset whole).

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
        self._dp_attempt: Attempt | None = None  # the running attempt, from execute to its callable

    def get_accountant(self) -> PrivacyAccountant:
        """The accountant of ``ledger_conn_id``, which charges the attempt (a subclass may reach its ledger
        another way)."""
        return PrivacyLedgerHook(self.ledger_conn_id).get_accountant()

    def get_reader(self) -> PrivacyAccountant:
        """The read-only accountant of ``ledger_conn_id`` handed to the callable as ``accountant``.

        It reads budgets, history and reports, and refuses every charge with
        :class:`~dp_pipeline.exceptions.LedgerError` (nothing written): inside the task, releases are paid
        through ``dp``, from what the attempt reserved, so the task is charged once.
        """
        return PrivacyLedgerHook(self.ledger_conn_id, read_only=True).get_accountant()

    def execute(self, context: Any) -> Any:
        """Reserve the cost (or find the run's reservation), run the callable paying from it, then commit
        (or release if the callable never ran)."""
        check_mapped_cost(self.dp_cost, context)
        attempt = Attempt.open(
            self.get_accountant(),
            self.dp_cost,
            context,
            ledger_conn_id=self.ledger_conn_id,
            on_exhausted=self.on_exhausted,
            rendered=self.dataset,
        )
        handed = attempt.mechanism()
        context.update(
            {
                "mechanism": self.mechanism if handed is None else handed,
                "accountant": self.get_reader(),
                "dataset": attempt.cost.dataset,
                "partition": attempt.cost.partition,
                "dp": attempt.spender,
            }
        )
        self._dp_attempt = attempt
        try:
            result = super().execute(context)
        except BaseException as exc:
            attempt.finish(exc)
            raise
        finally:
            self._dp_attempt = None
        attempt.finish()
        return result

    def _check_arguments(self) -> None:
        try:
            signature = inspect.signature(self.python_callable)
        except (TypeError, ValueError):  # builtins without a signature: nothing to check
            return
        signature.bind(*self.op_args, **self.op_kwargs)

    def _start(self) -> None:
        """Check the callable's arguments bind, then start the attempt (:meth:`Attempt.start
        <dp_pipeline.airflow.attempt.Attempt.start>`: pay what the declaration says is paid before the
        code runs)."""
        self._check_arguments()
        assert self._dp_attempt is not None, "the callable runs only from execute()"
        self._dp_attempt.start()

    def execute_callable(self) -> Any:
        """Start the attempt, then call the callable."""
        self._start()
        return super().execute_callable()

    async def aexecute_callable(self) -> Any:
        """The asynchronous form of :meth:`execute_callable`."""
        self._start()
        return await super().aexecute_callable()
