"""Named points where a crash test can kill the run (`TRANSCRIPTS_FAILPOINT=<name>`): proof of crash safety.

Points: `batch` (inside the process reading a batch: a worker process or a Dask worker), `extract` (a batch
staged), `parquet` (new version half written), `publish` (version folder in place, not yet swapped in), `warehouse`
(new warehouse built, not yet swapped in; or changed in place, not yet committed). Unset, `reach()` is one dict
lookup. `warehouse_log` is reached only by a run changing the warehouse in place: committed to DuckDB's log, not yet
checkpointed into the file (not in POINTS: a first run never gets there). `transcripts data move` (sinks/move.py)
has its own: `move_entry` (an entry moved into the staging folder), `move_copy` (a file copied across
filesystems), `move_renamed` (the staging folder renamed to the target, the source not yet cleared). `transcripts
publish` (sinks/publish.py) has `team_upload` (an object sent, the manifest not yet written). `recorded` is the end
of a load, its outcome in the ledger, before it returns (`transcripts watch`: a signal there abandons nothing).
`server_state` (flows/service/server.py): the managed Prefect server started and its idle watch with it, the
server not yet recorded. Every
failpoint is also a pause point (`TRANSCRIPTS_PAUSEPOINT=<name>:<file>`, see `pause`).
"""

from __future__ import annotations

import os
import signal

POINTS = ("batch", "extract", "parquet", "publish", "warehouse")


def reach(name: str) -> None:
    """SIGKILL this process if the failpoint `name` is armed (as a real `kill -9` from outside would); wait there if
    it is armed as a pause point (`pause`: a test signals the process at that point)."""
    pause(name)
    if os.environ.get("TRANSCRIPTS_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


PAUSE_WAIT_SECONDS = 120.0


def pause(name: str) -> None:
    """Wait at the point `name` if `TRANSCRIPTS_PAUSEPOINT=<name>:<file>` arms it: create `<file>.reached`, then wait
    until `<file>` exists (at most PAUSE_WAIT_SECONDS). A test holds a process there to look at what it has done so far
    (`team_manifest`: a publish with every object sent and its manifest not yet written)."""
    armed, _, flag = os.environ.get("TRANSCRIPTS_PAUSEPOINT", "").partition(":")
    if armed != name or not flag:
        return
    import time  # here: only an armed pause point waits

    with open(f"{flag}.reached", "w", encoding="utf-8"):
        pass
    deadline = time.monotonic() + PAUSE_WAIT_SECONDS
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)
