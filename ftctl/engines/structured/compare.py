"""``ftctl compare protocols --protocols ...,structured-streaming``: the engine's runs on the
schedule the protocols faced, as the same figures (``ftctl.compare.figures``).

The faults strike at the same offsets into the input as in the protocols' runs, carried
out as the engine carries them out (``cli.from_planned``: a rack's worker kills are one
driver kill). Its input is at most ``ENGINE_RECORDS`` records, paced to last as long as
theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ftctl.compare.figures import RunFigures, steady_figures
from ftctl.config.topology import Topology
from ftctl.engines import STRUCTURED
from ftctl.engines.structured import cli
from ftctl.engines.structured.recovery import series_of
from ftctl.engines.structured.runner import EngineRequest, execute

ENGINE_RECORDS = 2_000


def engine_runs(topology: Topology, planned: Sequence[Any], source: str, repeat: int,
                results: Path, timeout: float, duration: float, params: dict[str, Any],
                say: Callable[[str], None]) -> tuple[list[RunFigures], list[str]]:
    """``repeat`` runs; the figures of those that finished and the names of those that
    did not."""
    faults = cli.from_planned(planned, source)
    # At most ENGINE_RECORDS (every record passes through Python in the driver's tasks),
    # paced over the protocols' duration, so the faults fall at the same points of the run.
    sized = topology.with_input(records=min(topology.input.records, ENGINE_RECORDS))
    records = max(s.hi - s.lo for s in cli.compile_plan(sized).source_instances())
    paced = sized.with_input(rate=round(records / max(duration, 1.0), 3))
    runs: list[RunFigures] = []
    failed: list[str] = []
    for k in range(repeat):
        say(f"run {k + 1}/{repeat}: {STRUCTURED}")
        req = EngineRequest(paced, master=cli.DEFAULT_MASTER, results=results, timeout=timeout,
                            trigger_ms=params["trigger_ms"], kill_point=params["kill_point"],
                            checkpoint_file=params["checkpoint_file"], faults=faults,
                            kind="compare", quiet=True,
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
