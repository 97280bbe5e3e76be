"""What ``run``, ``chaos``, ``compare`` and ``validate`` do with ``-p structured-streaming``.

Its parameters (``--param``): ``trigger_ms`` (the micro-batch trigger interval, default
500), ``kill_point`` (``any``: a driver kill strikes when it is due; ``commit``: it
waits for a micro-batch whose output is written and not yet committed, and strikes there)
and ``checkpoint_file`` (``offsets``, ``commits`` or ``state``: the files of the checkpoint
location a store fault strikes, default ``offsets``).
Its mutant: ``structured-streaming/ignore-batch-id``, a sink that does not key its writes
by batch id.

Faults: ``kill-task`` kills a Python worker running one of the driver's tasks;
``kill-driver`` (``--target driver``) kills the whole driver process group. Executor,
worker and container faults need a standalone cluster: a schedule with ``kill-executor``,
``kill-worker``, ``kill-group``, ``restore-capacity`` or a container fault, run without
``--master``, gets one of its own (``cluster``: ``--workers``, ``--label``, ``--cores``,
``--backend``), as ``compare`` does. On a cluster whose workers ftctl has (that one, or
the ``--master`` of ``ftctl cluster up``'s) the worker faults strike its workers as they do
for the protocols (``workers``), container faults its containers (docker backend), and the
driver lives; with any ``--master spark://...`` a ``kill-executor`` kills an executor of
the query's application. With ``--master local[N]`` the executors live inside the driver,
so those faults are carried out as ``kill-driver`` and the run says so in one line;
``restore-capacity`` has nothing to restore there (a restarted driver brings its cores).
On a cluster whose workers ftctl has not, worker faults are refused in one line, and
container faults wherever the workers are processes.
``corrupt``, ``truncate`` and ``delete`` damage a file of the checkpoint location of each
sink downstream of their target (``checkpoint_faults``). Other faults, ``store-unavailable``
among them, are refused in one line."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftctl.config.errors import ConfigError
from ftctl.config.scenario import CONTAINER_FAULTS
from ftctl.config.topology import Topology
from ftctl.engines import STRUCTURED
from ftctl.engines.structured.checkpoint_faults import DAMAGE, LOGS
from ftctl.engines.structured.plan import compile_plan
from ftctl.engines.structured.runner import KILL_POINTS, EngineRequest, Fault, execute
from ftctl.engines.structured.workers import ON_WORKERS, attached

MUTANTS = {"ignore-batch-id": "the sink writes every foreachBatch call anew, ignoring its "
                              "batch id: a batch replayed after a driver crash duplicates"}
DEFAULT_MASTER = "local[2]"
CHAOS_SECONDS = 20.0  # an unpaced topology's chaos run is paced to last about this long
AS_DRIVER_KILL = ("kill-driver", "kill-executor", "kill-worker", "kill-group",
                  "container-kill", "container-stop")
IGNORED = ("restore-capacity",)


def check_mutant(mutant: str | None) -> None:
    if mutant is not None and mutant not in MUTANTS:
        raise ConfigError("--protocol", None, f"unknown mutant {mutant!r} of {STRUCTURED} "
                          f"(known: {', '.join(MUTANTS)})")


def engine_params(given: Sequence[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"trigger_ms": 500, "kill_point": "any",
                              "checkpoint_file": "offsets"}
    choices = {"kill_point": KILL_POINTS, "checkpoint_file": LOGS}
    for item in given or ():
        key, sep, value = item.partition("=")
        if not sep or key not in params:
            raise ConfigError("--param", None, f"{STRUCTURED} takes trigger_ms=MS, "
                              f"kill_point={'|'.join(KILL_POINTS)} and "
                              f"checkpoint_file={'|'.join(LOGS)}, got {item!r}")
        if key == "trigger_ms":
            if not value.isdigit() or not 10 <= int(value) <= 60_000:
                raise ConfigError("--param", None,
                                  f"trigger_ms must be 10..60000 ms, got {value!r}")
            params[key] = int(value)
        elif value not in choices[key]:
            raise ConfigError("--param", None, f"{key} must be one of "
                              f"{', '.join(choices[key])}, got {value!r}")
        else:
            params[key] = value
    return params


def check_master(master: str | None) -> str:
    if master is None:
        return DEFAULT_MASTER
    if master.startswith(("local[", "spark://")) or master == "local":
        return master
    raise ConfigError("--master", None, f"{STRUCTURED} runs on local[N] or spark://host:port, "
                      f"got {master!r}")


def paced(topology: Topology, records: int | None, rate: float | None) -> Topology:
    """A chaos run's input: the topology's own size (a few thousand records: every one
    passes through Python in the driver's tasks), paced to last ~CHAOS_SECONDS."""
    sized = topology.with_input(records=records, rate=rate)
    if sized.input.rate is None:
        plan = compile_plan(sized)
        per_source = max((s.hi - s.lo for s in plan.source_instances()), default=1)
        sized = sized.with_input(rate=round(per_source / CHAOS_SECONDS, 3))
    return sized


def kills(n: int, target: str, duration: float, seed: int, cluster: bool = False,
          instances: Sequence[str] = (), workers: bool = False,
          containers: bool = False) -> list[Fault]:
    """``--kill N``: N kills at random times in the middle 60% of the run. On a cluster
    (``--master spark://``) an executor kill is one, else a driver kill. ``--target
    worker`` and ``container`` are the protocols' schedules (``chaos.plan.from_kills``:
    each lost worker restored 3 s later) carried out as ``from_planned`` carries them out
    (``workers``: a cluster whose workers ftctl has; ``containers``: they are containers)."""
    if target in ("worker", "container"):
        from chaos.plan import from_kills

        planned = from_kills(n, target, list(instances), duration, seed).faults
        return from_planned(planned, "--target", cluster, workers, containers)
    kinds = {"task": "kill-task", "driver": "kill-driver",
             "executor": "kill-executor" if cluster else "kill-driver"}
    if target not in kinds:
        raise ConfigError("--target", None, f"{STRUCTURED} kills a task (a Python worker of "
                          f"the driver), the driver, an executor, a worker or a container, "
                          f"got {target!r}")
    rng = random.Random(seed)
    times = sorted(round(rng.uniform(0.2, 0.8) * duration, 3) for _ in range(n))
    instead = "" if kinds[target] != "kill-driver" or target == "driver" else "kill-executor"
    return [Fault(t, kinds[target], i, instead_of=instead) for i, t in enumerate(times)]


def from_planned(planned: Sequence[Any], file: str, cluster: bool = False,
                 workers: bool = False, containers: bool = False) -> list[Fault]:
    """A scenario's planned faults as this engine carries them out: on a cluster
    (``cluster``) a ``kill-executor`` kills the query's executor, not its driver; on one
    whose workers ftctl has (``workers``) the worker faults strike them, and container
    faults their containers where they are containers (``containers``): the planned fault
    rides along for ``workers.WorkerFaults``. On any other cluster they are refused; in
    local mode they are one driver kill."""
    out = []
    for p in planned:
        if workers and (p.type in ON_WORKERS or
                        (containers and p.type in CONTAINER_FAULTS)):
            out.append(Fault(float(p.at or 0.0), p.type, p.index, planned=p))
            continue
        if cluster and p.type in ON_WORKERS:
            raise ConfigError(file, "faults", f"{p.type} on {p.target} needs the workers of a "
                              "cluster ftctl started (ftctl cluster up, then its --master); "
                              "this --master is not one it recorded")
        if (cluster or workers) and p.type in CONTAINER_FAULTS:
            raise ConfigError(file, "faults", f"{p.type} needs the docker backend's "
                              "containers (--backend docker); this cluster's workers are "
                              "processes (use kill-worker)")
        if p.type in IGNORED:
            continue
        if p.at is None:
            raise ConfigError(file, "faults", f"{STRUCTURED} strikes at times only; "
                              f"{p.type} waits for a trigger or another fault")
        if p.type == "kill-task" or (cluster and p.type == "kill-executor"):
            out.append(Fault(float(p.at), p.type, p.index))
        elif p.type in AS_DRIVER_KILL:
            out.append(Fault(float(p.at), "kill-driver", p.index,
                             instead_of="" if p.type == "kill-driver" else p.type))
        elif p.type in DAMAGE:
            # where in the file: drawn from the fault's own seed, the same in every run
            out.append(Fault(float(p.at), p.type, p.index, target=p.target.split("[")[0],
                             snapshot=p.params.get("snapshot"),
                             where=random.Random(p.seed).random()))
        elif p.type == "store-unavailable":
            raise ConfigError(file, "faults", f"{STRUCTURED} does not carry out "
                              "store-unavailable: its checkpoint location is a local folder "
                              "the driver can always read (corrupt, truncate and delete apply)")
        else:
            raise ConfigError(file, "faults", f"{STRUCTURED} does not carry out {p.type} "
                              f"(it kills tasks and the driver: {', '.join(AS_DRIVER_KILL)}"
                              f", kill-task; it damages the checkpoint location: "
                              f"{', '.join(DAMAGE)})")
    # A kill-group strikes each of its workers; one driver kill takes them all.
    merged: list[Fault] = []
    for f in sorted(out, key=lambda f: f.at):
        if merged and f.type == "kill-driver" == merged[-1].type and \
                f.index == merged[-1].index:
            continue
        merged.append(f)
    return merged


def run(topology: Topology, mutant: str | None, params: dict[str, Any], *,
        master: str | None, results: Path, timeout: float, as_json: bool, kind: str = "run",
        faults: list[Fault] | None = None, config: dict[str, Any] | None = None,
        quiet: bool = False, cluster: Any = None) -> int:
    """``cluster``: the cluster at ``master`` whose workers the worker faults strike."""
    check_mutant(mutant)
    compile_plan(topology)
    return execute(EngineRequest(
        topology, mutant=mutant, master=check_master(master), results=results,
        timeout=timeout, trigger_ms=params["trigger_ms"], kill_point=params["kill_point"],
        checkpoint_file=params["checkpoint_file"], faults=faults or [], kind=kind,
        quiet=quiet, as_json=as_json, config=config or {}, cluster=cluster))


def workers_at(master: str | None) -> Any:
    """The cluster at ``master`` whose workers ftctl has (``ftctl cluster up``'s), else
    None (local mode, or a cluster it did not start)."""
    return attached(master) if master is not None and master.startswith("spark://") else None
