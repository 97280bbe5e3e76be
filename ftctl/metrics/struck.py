"""Which worker faults struck no instance: a kill of a worker that ran none of the run's
tasks tests nothing, and a run must say so rather than pass quietly.

Read from the history alone: each task's ``instance-registered`` names the worker it
runs on; a ``kill-worker`` names its worker in ``resolved``, a ``kill-group`` each of its
workers in a ``fault-step`` (``worker-killed``). An instance counts as on a worker from
its newest registration before the kill (a fenced one re-registers when restarted).
"""

from __future__ import annotations

from dataclasses import dataclass

from ftctl.kernel.history import HistoryEvent, Records, read_history


@dataclass(frozen=True)
class WorkerKill:
    fault: str  # the occurrence ("index.occurrence")
    type: str
    target: str
    t: float
    worker: str


def worker_kills(events: list[HistoryEvent], shift: float | None = None) -> list[WorkerKill]:
    """Every worker killed, at the moment it was struck: the record's ``at`` (the host's
    clock) plus ``shift`` (host clock to the history's) where known, since a kill's
    record is written once the kill is done, after the restarts it caused may have
    registered; else the record's own time."""
    out: list[WorkerKill] = []

    def when(e: HistoryEvent) -> float:
        at = e.data.get("at")
        return float(at) + shift if shift is not None and at is not None else e.t

    for e in events:
        if (e.kind == "fault-step" and e.data.get("step") == "worker-killed"
                and e.data.get("worker")):
            out.append(WorkerKill(str(e.fault), str(e.data.get("type")),
                                  str(e.data.get("target", "")), when(e),
                                  str(e.data["worker"])))
        elif e.kind == "fault-injected" and e.data.get("type") == "kill-worker" and (
                e.data.get("resolved") and e.data.get("via") != "agent"):
            out.append(WorkerKill(str(e.fault), "kill-worker", str(e.data.get("target", "")),
                                  when(e), str(e.data["resolved"])))
    return out


def on_worker(events: list[HistoryEvent], worker: str, t: float) -> list[str] | None:
    """The instances running on ``worker`` at ``t``; None if the tasks did not say where
    they run (a run of an older ftctl, or tasks that cannot read their executor)."""
    where: dict[str, str | None] = {}
    for e in events:
        if e.t > t:
            break
        if e.kind == "instance-registered" and e.instance is not None:
            where[e.instance] = e.data.get("worker")
    if not where or all(w is None for w in where.values()):
        return None
    return sorted(i for i, w in where.items() if w == worker)


def last_placement(records: Records) -> dict[str, str]:
    """Instance -> the worker its newest task registered on (those that said)."""
    out: dict[str, str] = {}
    for e in sorted(read_history(records), key=lambda e: e.seq):
        if e.kind == "instance-registered" and e.instance and e.data.get("worker"):
            out[e.instance] = str(e.data["worker"])
    return out


def struck_nothing(records: Records, shift: float | None = None) -> list[str]:
    """One sentence per worker fault whose workers ran no instance when they were killed
    (``shift``: see ``worker_kills``)."""
    events = sorted(read_history(records), key=lambda e: e.seq)
    by_fault: dict[str, list[WorkerKill]] = {}
    for k in worker_kills(events, shift):
        by_fault.setdefault(k.fault, []).append(k)
    out: list[str] = []
    for kills in by_fault.values():
        hit = [on_worker(events, k.worker, k.t) for k in kills]
        if any(h is None for h in hit) or any(hit):
            continue
        workers = ", ".join(k.worker for k in kills)
        first = kills[0]
        out.append(f"{first.type} {first.target} at {first.t:.1f} s struck no instance: "
                   f"{'worker' if len(kills) == 1 else 'workers'} {workers} ran none of "
                   "the run's tasks")
    return out
