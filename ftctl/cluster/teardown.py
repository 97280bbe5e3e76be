"""Stopping every process of a local cluster, including those nobody recorded.

Shared by ``cluster down``, a failed start, the watchdog of a per-run cluster and
``cluster prune`` of abandoned clusters.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from ftctl.cluster import process
from ftctl.cluster.state import ClusterState, remove_state

# Put on every daemon's command line so leftovers can be found by state dir after a crash.
MARKER_PROPERTY = "ftctl.cluster.dir"
MARKER_PREFIX = f"-D{MARKER_PROPERTY}="


def teardown(state_dir: Path, state: ClusterState | None, grace: float) -> list[int]:
    """Stop everything belonging to the cluster in ``state_dir`` and drop its state file.

    Three nets, because any one alone can miss processes: the recorded daemons and
    their descendants; members of their process groups (orphaned executors); and any
    JVM carrying this state dir on its command line or Python/JVM running in its work
    dir (leftovers of a start that crashed before recording them).
    """
    procs: list[psutil.Process] = []
    if state is not None:
        daemons = [state.master, *state.workers]
        for daemon in daemons:
            proc = process.same_process(daemon.pid, daemon.create_time)
            if proc is not None:
                procs += process.tree(proc)
        # Dead leaders too: their groups outlive them while orphans remain in them.
        procs += process.group_members([d.pid for d in daemons], state.started_at)
    procs += process.processes_mentioning(marker_arg(state_dir), work_dir=state_dir / "work")
    pids = process.terminate_all(procs, grace=grace)
    remove_state(state_dir)
    return pids


def quote_java_opt(option: str) -> str:
    """Quote one option for SPARK_DAEMON_JAVA_OPTS, which Spark's launcher splits on
    whitespace unless quoted (a state dir may contain spaces)."""
    if not any(ch.isspace() or ch in "\"'\\" for ch in option):
        return option
    return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'


def marker_arg(state_dir: Path) -> str:
    """The JVM option that tags a daemon with its cluster's state dir.

    Compared as a whole argument, never as a substring: ``/tmp/c`` must not match a
    cluster in ``/tmp/c2``.
    """
    return f"{MARKER_PREFIX}{state_dir}"
