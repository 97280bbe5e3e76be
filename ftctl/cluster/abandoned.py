"""Local clusters nobody will ever stop: what ``cluster status`` lists and ``prune`` removes.

A per-run cluster records its owner (pid and start time) in ``cluster.json``; its watchdog
tears it down when the owner dies. If the watchdog died too (``kill -9`` of both, a
machine under memory pressure), the daemons keep running with nobody to stop them. They
are found two ways: by the state-dir marker every daemon JVM carries on its command line
(wherever it was started from), and by the per-run state dirs under ``.ftctl/runs``.
A cluster is abandoned when its recorded owner is gone, or when daemons carry the marker
of a state dir that no longer records a cluster. A ``cluster up`` cluster has no owner and
is never abandoned while its state file exists. Docker containers are handled the same
way by ``ftctl.docker.prune``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ftctl.cluster import process
from ftctl.cluster.state import (
    ClusterState,
    is_docker_state_dir,
    load_state,
    state_lock_if_free,
)
from ftctl.cluster.teardown import MARKER_PREFIX, teardown

RUNS_DIR = Path(".ftctl") / "runs"  # per-run state dirs, under the current directory
PRUNE_GRACE = 2.0


@dataclass
class AbandonedCluster:
    state_dir: str
    reason: str
    pids: list[int] = field(default_factory=list)


def _marked_state_dirs() -> dict[Path, list[int]]:
    """State dirs named by the marker of a running JVM, with those JVMs' pids."""
    found: dict[Path, list[int]] = {}
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if not (proc.info["name"] or "").lower().startswith("java"):
                continue
            for arg in proc.info["cmdline"] or []:
                if arg.startswith(MARKER_PREFIX):
                    found.setdefault(Path(arg[len(MARKER_PREFIX):]), []).append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _recorded_pids(state: ClusterState) -> list[int]:
    daemons = [state.master, *state.workers]
    return [d.pid for d in daemons if process.same_process(d.pid, d.create_time) is not None]


def abandoned_reason(state: ClusterState | None) -> str | None:
    """Why the cluster is abandoned, or None while someone may still stop it."""
    if state is None:
        return "its state file is gone"
    if state.owner_pid is not None and (
        process.same_process(state.owner_pid, state.owner_create_time) is None
    ):
        return f"its ftctl process ({state.owner_pid}) is gone"
    return None


def _candidates(roots: list[Path]) -> dict[Path, list[int]]:
    candidates = _marked_state_dirs()
    for root in roots:
        if root.is_dir():
            for state_dir in root.iterdir():
                if (state_dir / "cluster.json").is_file():
                    candidates.setdefault(state_dir.resolve(), [])
    return candidates


def _judge(state_dir: Path, marked: list[int]) -> AbandonedCluster | None:
    if is_docker_state_dir(state_dir):
        return None  # containers: ftctl.docker.prune
    state = load_state(state_dir)
    reason = abandoned_reason(state)
    if reason is None or (state is None and not marked):
        return None
    pids = sorted(set(marked) | set(_recorded_pids(state) if state else []))
    return AbandonedCluster(str(state_dir), reason, pids)


def find_abandoned(roots: list[Path] | None = None) -> list[AbandonedCluster]:
    """Abandoned local clusters: marked JVMs anywhere, plus state dirs under ``roots``
    (default: ``.ftctl/runs`` here). A state dir whose lock is held is being started
    or stopped right now and is left alone."""
    found = []
    for state_dir, marked in sorted(_candidates(_roots(roots)).items()):
        with state_lock_if_free(state_dir) as free:
            judged = _judge(state_dir, marked) if free else None
        if judged is not None:
            found.append(judged)
    return found


def prune_abandoned(roots: list[Path] | None = None) -> list[AbandonedCluster]:
    """Stop every abandoned local cluster (whole process trees) and drop its state file.

    Decided and done under each state dir's lock, so a cluster that another ftctl is
    starting at that moment is never mistaken for an abandoned one.
    """
    pruned = []
    for state_dir, marked in sorted(_candidates(_roots(roots)).items()):
        with state_lock_if_free(state_dir) as free:
            judged = _judge(state_dir, marked) if free else None
            if judged is None:
                continue
            judged.pids = teardown(state_dir, load_state(state_dir), grace=PRUNE_GRACE)
        pruned.append(judged)
    return pruned


def _roots(roots: list[Path] | None) -> list[Path]:
    return [RUNS_DIR.resolve()] if roots is None else roots

