"""Run a DAG in-process with ``dag.test()``, for tests and demos of DP tasks.

Airflow 3.1+ runs ``dag.test()`` only for DAGs that are serialized in the metadata database, which a DAG
built inside a test or a script is not ("dag is not serialized"). :func:`run_dag` bags the DAG (applying the
cluster policies, as the DAG processor would), syncs it to the database, then calls ``dag.test()``.

It relies on modules that are not part of Airflow's public interface (``airflow.dag_processing``); it is
tested against the Airflow version the ``airflow`` extra pins. The metadata database must exist
(``airflow db migrate``).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["run_dag", "task_states"]


def run_dag(dag: Any, **kwargs: Any) -> Any:
    """Serialize ``dag`` into the metadata database and run it with ``dag.test(**kwargs)``.

    Parameters
    ----------
    dag : airflow.sdk.DAG
        The DAG, from a DAG file or built in code.
    **kwargs
        Passed to ``dag.test()`` (``run_conf``, ``conn_file_path``, ...).

    Returns
    -------
    DagRun
        The finished run; ``dag_run.get_task_instances()`` gives the task states.
    """
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=os.devnull, collect_dags=False)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)
    return dag.test(**kwargs)


def task_states(dag_run: Any) -> dict[str, str]:
    """Task id (``task_id[map_index]`` for mapped tasks) → final state, for a finished DagRun."""
    result = {}
    for ti in dag_run.get_task_instances():
        name = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        state = ti.state.value if hasattr(ti.state, "value") else ti.state
        result[name] = str(state)
    return result
