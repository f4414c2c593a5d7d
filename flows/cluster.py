"""Scale-out: the flow's extraction tasks on a Dask cluster, through prefect-dask's `DaskTaskRunner`.

Only the extraction tasks go to the cluster; the commit stays in the flow's own process, the one writer, under the
data directory's lock. A Dask worker reads its batch of sources and stages the rows under the data directory's
`staging/` folder, exactly as a local worker process does, and returns the small per-source results: so every node
must see the sources and the data directory at the same paths (a shared filesystem). `local` starts a
`distributed.LocalCluster` on this machine for the run and stops it after.
"""

from __future__ import annotations

import logging
from typing import Any

LOCAL = "local"


def dask_runner(address: str, *, workers: int = 2) -> Any:
    """A `DaskTaskRunner` for a scheduler address (`tcp://host:8786`) or `local` (a LocalCluster of `workers`
    single-threaded processes: parsing is Python and holds the GIL)."""
    from prefect_dask.task_runners import DaskTaskRunner

    # distributed logs its cluster's every step at INFO (~30 lines a run), and Prefect's handler on the root logger
    # prints them on the command's stderr between our own lines: its warnings and errors are what a person needs.
    logging.getLogger("distributed").setLevel(logging.WARNING)

    if address == LOCAL:
        return DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={
                "n_workers": max(1, workers),
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,  # no dashboard ...
                # ... but the scheduler still serves health and metrics over HTTP, by default on port 8787, and
                # with that port taken (another cluster, a notebook) it warns on stderr and takes another: a free
                # port of 127.0.0.1 from the start.
                "scheduler_kwargs": {"dashboard": False, "dashboard_address": "127.0.0.1:0"},
            },
        )
    return DaskTaskRunner(address=address)
