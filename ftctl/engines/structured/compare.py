"""``ftctl compare protocols --protocols ...,structured-streaming``: the engine's runs on the
schedule the protocols faced, as the same figures (``ftctl.compare.figures``).

The faults strike at the same offsets into the input as in the protocols' runs, carried
out as the engine carries them out (``cli.from_planned``). Its query runs on a standalone
cluster of the protocols' shape (workers, labels, cores, backend), whose workers and
containers the scenario's faults strike as they strike the protocols': one cluster per
run when the schedule kills workers (a run would leave the next fewer), else one for all
its runs; or on the ``--master`` the protocols attach to. Its input is at most
``ENGINE_RECORDS`` records, paced to last as long as theirs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ftctl.compare.figures import RunFigures, steady_figures
from ftctl.config.topology import Topology
from ftctl.engines import STRUCTURED
from ftctl.engines.structured import cli
from ftctl.engines.structured.cluster import has_containers, started, starter
from ftctl.engines.structured.recovery import series_of
from ftctl.engines.structured.runner import EngineRequest, execute

ENGINE_RECORDS = 2_000


@dataclass
class ClusterShape:
    """The cluster the protocols ran on: ``master`` when they attached to one, else the
    shape of the one compare starts (``start`` makes a not-yet-started one)."""

    master: str | None
    start: Callable[[], Any]
    fresh_per_run: bool  # the schedule kills workers
    containers: bool = False  # its workers are containers (the docker backend)


def cluster_shape(req: Any, fresh_per_run: bool) -> ClusterShape:
    """The cluster of a ``CompareRequest``'s protocols, for the engine's runs."""
    from ftctl.run.execute import SLOTS_PER_INSTANCE
    from ftctl.runtime.graph import ExecutionGraph

    cores = SLOTS_PER_INSTANCE * len(ExecutionGraph(req.topology).order)
    return ClusterShape(req.master, starter(req.backend, req.workers, cores, req.labels,
                                            req.results, req.state_dir / STRUCTURED),
                        fresh_per_run, containers=_containers(req.master, req.backend))


def _containers(master: str | None, backend: str) -> bool:
    if master is not None:
        return has_containers(cli.workers_at(master))
    return backend == "docker"


def check_engine_cluster(schedule: Any, master: str | None, backend: str) -> None:
    """Refuse, before any run, what the engine's runs could not carry out: on a
    ``--master`` whose workers ftctl has not, worker faults; container faults anywhere but
    on the docker backend's containers."""
    workers = master is None or cli.workers_at(master) is not None
    cli.from_planned(schedule.faults, schedule.source, cluster=True, workers=workers,
                     containers=_containers(master, backend))


@contextlib.contextmanager
def _cluster(shape: ClusterShape, say: Callable[[str], None]) -> Iterator[tuple[str, Any]]:
    """(master URL, the cluster whose workers faults strike or None), for as long as the
    block runs; a cluster started here is stopped after it."""
    if shape.master is not None:
        yield shape.master, cli.workers_at(shape.master)
        return
    with started(shape.start, say) as pair:
        yield pair


def engine_runs(topology: Topology, planned: Sequence[Any], source: str, repeat: int,
                results: Path, timeout: float, duration: float, params: dict[str, Any],
                say: Callable[[str], None], shape: ClusterShape
                ) -> tuple[list[RunFigures], list[str]]:
    """``repeat`` runs; the figures of those that finished and the names of those that
    did not."""
    with contextlib.ExitStack() as stack:
        shared = None if shape.fresh_per_run else stack.enter_context(_cluster(shape, say))
        done = _runs(topology, planned, source, repeat, results, timeout, duration, params,
                     say, shape, shared)
    return done


def _runs(topology: Topology, planned: Sequence[Any], source: str, repeat: int,
          results: Path, timeout: float, duration: float, params: dict[str, Any],
          say: Callable[[str], None], shape: ClusterShape,
          shared: tuple[str, Any] | None) -> tuple[list[RunFigures], list[str]]:
    workers = shape.master is None or cli.workers_at(shape.master) is not None
    faults = cli.from_planned(planned, source, cluster=True, workers=workers,
                              containers=shape.containers)
    # At most ENGINE_RECORDS (every record passes through Python in the driver's tasks),
    # paced over the protocols' duration, so the faults fall at the same points of the run.
    sized = topology.with_input(records=min(topology.input.records, ENGINE_RECORDS))
    records = max(s.hi - s.lo for s in cli.compile_plan(sized).source_instances())
    paced = sized.with_input(rate=round(records / max(duration, 1.0), 3))
    runs: list[RunFigures] = []
    failed: list[str] = []
    for k in range(repeat):
        say(f"run {k + 1}/{repeat}: {STRUCTURED}")
        with contextlib.ExitStack() as stack:
            master, cluster = shared or stack.enter_context(_cluster(shape, say))
            req = EngineRequest(paced, master=master, results=results, timeout=timeout,
                                trigger_ms=params["trigger_ms"],
                                kill_point=params["kill_point"],
                                checkpoint_file=params["checkpoint_file"], faults=faults,
                                kind="compare", quiet=True, cluster=cluster,
                                config={"chaos": {"schedule": source, "name": source}})
            execute(req)
        s = req.summary
        if not s or not s.get("complete"):
            failed.append(f"{STRUCTURED}#{k + 1}")
            say(f"  {STRUCTURED}: the run did not finish")
            continue
        recs = s.get("faults") or []
        series = series_of(Path(s["path"]) / "engine" / "sinks",
                           list(topology.sink_modes()), _created(Path(s["path"])))
        throughput, latency = steady_figures(series.throughput, series.latency_p50,
                                             [float(f["t_fault"]) for f in recs])
        anomalies = s.get("anomalies") or {}
        first = min(recs, key=lambda r: r["t_fault"]) if recs else {}
        fig = RunFigures(
            run_id=s["run_id"], protocol=STRUCTURED, passed=bool(s["output_passed"]),
            lost=int(anomalies.get("lost", 0)), duplicated=int(anomalies.get("duplicated", 0)),
            detection_s=_median(recs, "detection_s"), restart_s=_median(recs, "restart_s"),
            recovery_s=_median(recs, "recovery_s"),
            first_output_s=_median(recs, "first_output_s"), throughput_rps=throughput,
            latency_p50_s=latency, records_processed=int(s["records"]), snapshot_bytes=0,
            restarts=int(s["restarts"]), seconds=float(s["processing_s"]),
            breakdown=dict(first.get("breakdown") or {}))
        say(f"  {STRUCTURED}: {'passed' if fig.passed else 'failed'} "
            f"({fig.lost:,} lost, {fig.duplicated:,} duplicated), {fig.seconds:.0f} s")
        runs.append(fig)
    return runs, failed


def _created(run_dir: Path) -> float:
    import json

    return float(json.loads((run_dir / "run.json").read_text())["created_epoch"])


def _median(recs: list[dict[str, Any]], key: str) -> float | None:
    from ftctl.compare.figures import median_of

    return median_of([r.get(key) for r in recs])
