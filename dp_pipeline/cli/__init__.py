"""The ``dp-pipeline`` command: budgets, the ledger and plan checks from a shell.

::

    dp-pipeline ledger init                          --ledger sqlite:///ledger.db
    dp-pipeline budget set patients --epsilon 3 --delta 1e-6
    dp-pipeline budget set genomes --mu 1
    dp-pipeline budget set visits --epsilon 2 --partitions 2     one person in at most 2 partitions
    dp-pipeline budget show patients [--json]
    dp-pipeline budget list
    dp-pipeline budget history patients [--limit N] [--since DATE]
    dp-pipeline plan check patients plan.json        exit 1 when the plan does not fit
    dp-pipeline plan check visits plan.json --partition 2026-11-24      on a partition of a dataset
    dp-pipeline plan allocate patients releases.json the least noise that fits (JSON in, JSON out)
    dp-pipeline ledger verify [patients]             exit 1 when a record was tampered with
    dp-pipeline ledger cancel patients KEY --reason "worker died before reading data"

The ledger is named by ``--ledger URL`` or the environment variable ``DP_PIPELINE_LEDGER``; there is no
default, and only ``ledger init`` creates a ledger, so a mistyped URL never starts an empty one. Output is
Rich tables, or JSON with ``--json``. Errors print one line to stderr: exit status 1 when the ledger
refuses or fails (budget exceeded, plan does not fit, verification failed, unreadable ledger), 2 for
invalid input (bad numbers, unknown dataset, bad plan file, no ledger URL, usage errors).

A plan file is a JSON list of releases, each one of::

    {"mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1}
    {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-6, "sensitivity": 1}
    {"mechanism": "gaussian", "mu": 0.5, "sensitivity": 1}
    {"epsilon": 0.5, "delta": 1e-6}          a release known by its guarantee ("delta" optional)
    {"mu": 0.5}                              a μ-GDP release

with optional ``"group_size"`` (k ≥ 1) and ``"label"``. Mechanisms: ``laplace``, ``gaussian``,
``staircase``, ``randomized_response`` (binary, or k-ary with ``"categories"``: a list or a count),
``bounded_laplace`` and ``bounded_staircase``; their other keys are the mechanism's parameters.
"""

from dp_pipeline.cli._app import app
from dp_pipeline.cli._budget import budget_app
from dp_pipeline.cli._ledger import ledger_app
from dp_pipeline.cli._plan import plan_app

__all__ = ["app"]

app.add_typer(budget_app, name="budget")
app.add_typer(ledger_app, name="ledger")
app.add_typer(plan_app, name="plan")
