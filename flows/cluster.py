"""Scale-out: the flow's extraction tasks on a Dask cluster, through prefect-dask's `DaskTaskRunner`.

Only the extraction tasks go to the cluster; the commit stays in the flow's own process, the one writer, under the
data directory's lock. A Dask worker reads its batch of sources and stages the rows under the data directory's
`staging/` folder, exactly as a local worker process does, and returns the small per-source results: so every node
must see the sources and the data directory at the same paths (a shared filesystem). `local` starts a
`distributed.LocalCluster` on this machine for the run and stops it after.
"""

from __future__ import annotations

from typing import Any

LOCAL = "local"


def dask_runner(address: str, *, workers: int = 2) -> Any:
    """A `DaskTaskRunner` for a scheduler address (`tcp://host:8786`) or `local` (a LocalCluster of `workers`
    single-threaded processes: parsing is Python and holds the GIL)."""
    from prefect_dask.task_runners import DaskTaskRunner

    if address == LOCAL:
        return DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={
                "n_workers": max(1, workers),
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,  # no web dashboard on a port nobody asked for
            },
        )
    return DaskTaskRunner(address=address)
