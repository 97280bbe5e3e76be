"""The fault schedule of a run: from ``--kill`` or ``--scenario`` (``--replay``'s comes from
a stored run, ``ftctl.run.chaos``), checked against the topology and the cluster before
anything starts. Both hosts plan through it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos.nemesis import Nemesis
from chaos.schedule import PlannedFault, ScheduleError, fault_seed, plan, random_kills
from ftctl.config.errors import ConfigError
from ftctl.config.fault_kinds import kinds_where
from ftctl.config.load import load_scenario
from ftctl.config.scenario import (
    CONTAINER_FAULTS,
    FAULT_TYPES,
    RECOVERING,
    WORKER_KEY,
    parse_target,
)

TARGET_FAULTS = {"task": "kill-task", "executor": "kill-executor", "worker": "kill-worker",
                 "container": "container-kill"}
# --kill N --target worker|container: the lost worker comes back this much later.
RESTORE_AFTER = 3.0
# Delivery needs, from the registry (``ftctl.config.fault_kinds``): faults that need
# process access to the workers (a cluster ftctl started); those the agent inside the
# target's task carries out on a cluster ftctl did not start; those it also ends itself.
CLUSTER_FAULTS = kinds_where(cluster=True)
AGENT_FAULTS = kinds_where(agent=True)
TIMED_BY_AGENT = kinds_where(timed_by_agent=True)
_WORKER_NAME = re.compile(r"^w[0-9]+$")


@dataclasses.dataclass
class Schedule:
    faults: list[PlannedFault]
    name: str
    seed: int
    source: str  # what it came from, for config.json

    def nemesis(self, ctx: Any, on_event: Any) -> Nemesis:
        return Nemesis(self.faults, ctx, on_event, seed=self.seed, name=self.name)


def from_kills(n: int, target: str, instances: Sequence[str], duration: float,
               seed: int) -> Schedule:
    if target not in TARGET_FAULTS:
        raise ConfigError("--target", None,
                          f"expected task, executor, worker or container, got {target!r}")
    kills = [dataclasses.replace(p, type=TARGET_FAULTS[target])
             for p in random_kills(n, instances, duration, seed)]
    faults = list(kills)
    if target in ("worker", "container"):
        # Each lost node comes back, or a two-worker cluster would end with none.
        faults += [PlannedFault(index=n + i, occurrence=0, type="restore-capacity",
                                target="random", at=round((k.at or 0.0) + RESTORE_AFTER, 6),
                                seed=fault_seed(seed, n + i, 0))
                   for i, k in enumerate(kills)]
    return Schedule(faults, f"kill-{n}-{target}", seed, f"--kill {n} --target {target}")


def from_scenario(path: Path, instances: Sequence[str], duration: float,
                  seed: int | None) -> Schedule:
    scenario = load_scenario(path)
    if seed is not None:
        scenario.seed = seed
    try:
        faults = plan(scenario, instances, duration)
    except ScheduleError as exc:
        raise ConfigError(str(path), "faults", str(exc)) from None
    return Schedule(faults, scenario.name, scenario.seed, str(path))


def check_cluster(schedule: Schedule, master: str | None,
                  worker_labels: Sequence[Mapping[str, str]], backend: str = "local",
                  sim: bool = False) -> None:
    """Refuse, before anything starts, faults the cluster cannot take (``sim``: the
    simulation host's, which takes the store faults too)."""
    for p in schedule.faults:
        check_delivery(schedule.source, p.type, p.target, p.duration, master, backend, sim)
    check_selectors(schedule, worker_labels)


def check_selectors(schedule: Schedule, worker_labels: Sequence[Mapping[str, str]]) -> None:
    """Refuse a selector no worker of the cluster ftctl starts matches, and a random
    ``kill-group`` where no worker is labelled."""
    for p in schedule.faults:
        parsed = parse_target(p.target)
        if parsed.kind == "selector":
            _check_selector(schedule, p.type, dict(parsed.labels), p.target, worker_labels)
        if p.type == "kill-group" and parsed.kind == "random" and not any(worker_labels):
            raise ConfigError(schedule.source, "target",
                              "kill-group random needs labelled workers (--label)")


def check_delivery(source: str, fault: str, target: str, duration: float | None,
                   master: str | None, backend: str = "local", sim: bool = False) -> None:
    """Refuse, in one line, a fault the chosen cluster cannot have delivered: on one
    ftctl did not start (``master``) only what the tasks' agent carries out, and the
    container faults only on the docker backend."""
    if fault not in FAULT_TYPES:
        raise ConfigError(source, "type", f"unknown fault type {fault!r}")
    if FAULT_TYPES[fault].engine:
        raise ConfigError(source, "type", f"{fault} strikes an engine's own driver process: "
                          "-p structured-streaming only")
    if not sim and not FAULT_TYPES[fault].spark:
        raise ConfigError(source, "type", f"{fault} has no Spark realization: simulation "
                          "host only (ftctl sim --scenario)")
    if sim and not FAULT_TYPES[fault].sim:
        raise ConfigError(source, "type", f"{fault} has no meaning on the simulation host")
    # On --master a task's agent kills its own executor or worker: no worker access
    # needed, but a selector (worker labels) does.
    needs_cluster = (fault in CLUSTER_FAULTS and fault not in AGENT_FAULTS) \
        or parse_target(target).kind == "selector"
    if needs_cluster and master is not None:
        raise ConfigError(source, "faults",
                          f"{fault} on {target} needs process access to the workers; "
                          "run without --master so ftctl starts the cluster")
    if master is not None and fault in TIMED_BY_AGENT and duration is None:
        raise ConfigError(source, "duration",
                          f"{fault} on {target} needs a duration with --master: the "
                          "task's agent resumes it, the driver cannot reach it")
    if fault in CONTAINER_FAULTS and backend != "docker":
        raise ConfigError(source, "type",
                          f"{fault} needs the docker backend (--backend docker); on "
                          f"the {backend} backend workers are processes: use kill-worker "
                          "or pause")


def check_triggers(schedule: Schedule, protocols: Sequence[Any]) -> None:
    """Refuse a trigger, a ``during`` or an ``after: {phase: ...}`` on a phase one of
    ``protocols`` never enters: it would never fire (or, asked of the wrong protocol, fire
    at nonsense times). Every protocol enters ``recovering``."""
    for p in schedule.faults:
        for info in protocols:
            known = phases_of(info)
            if p.during is not None and p.during not in known:
                if p.trigger is not None:  # the alias keeps its own field and wording
                    raise ConfigError(schedule.source, "trigger",
                                      f"{p.trigger} needs a protocol that takes snapshots; "
                                      f"{info.name} never enters {p.during!r} (its phases: "
                                      f"{', '.join(known)})")
                raise ConfigError(schedule.source, f"faults[{p.index}].during",
                                  f"{info.name} never enters phase {p.during!r} (its "
                                  f"phases: {', '.join(known)})")
            if p.after_phase is not None and p.after_phase not in known:
                raise ConfigError(schedule.source, f"faults[{p.index}].after.phase",
                                  f"{info.name} never enters phase {p.after_phase!r} (its "
                                  f"phases: {', '.join(known)})")


def phases_of(info: Any) -> tuple[str, ...]:
    """The phases a run under ``info`` can enter: the host's ``recovering`` and what the
    protocol declares."""
    return (RECOVERING, *(ph for ph in info.phases if ph != RECOVERING))


def _check_selector(schedule: Schedule, fault: str, wanted: dict[str, str], target: str,
                    worker_labels: Sequence[Mapping[str, str]]) -> None:
    """Some worker must carry the selector's labels; ``worker=`` names one (``w0``...,
    or a later one a restore-capacity starts)."""
    name = wanted.pop(WORKER_KEY, None)
    if name is not None and not _WORKER_NAME.match(name):
        raise ConfigError(schedule.source, "target",
                          f"{fault}: {target}: workers are named w0, w1, ...")
    named = [i for i in range(len(worker_labels)) if name in (None, f"w{i}")]
    if name is not None and not named:
        return  # a worker started during the run: checked when the fault strikes
    if not any(all(worker_labels[i].get(k) == v for k, v in wanted.items()) for i in named):
        raise ConfigError(schedule.source, "target",
                          f"{fault}: no worker has labels {target} (give them with --label)")
