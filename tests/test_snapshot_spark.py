"""The Spark side of the 003 snapshot-frequency study (ftctl/figures/snapshot_spark.py),
its runs replaced by a fake runner: which runs it asks for, how it turns them into points,
the table, files and refusals. ``ftctl figure 003-snapshot-frequency --host spark`` runs
them for real (docs/protocols.md quotes a run)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.figures import FigureOptions
from ftctl.figures import snapshot_spark as study
from ftctl.figures.fig_003_snapshot_frequency import WORKLOADS, run
from ftctl.run.execute import RunRequest
from tests.fakecluster import URL, FakeWarmCluster

# Fault-free throughput by interval: the fake cluster loses 20% at 10 ms, 10% at 100 ms.
THROUGHPUT = {"none": 1000.0, "0.01": 800.0, "0.1": 900.0, "1.0": 990.0}


class FakeRunner:
    def __init__(self) -> None:
        self.requests: list[tuple[RunRequest, Any]] = []

    def __call__(self, request: RunRequest, ext: Any) -> int:
        self.requests.append((request, ext))
        interval = str(request.config["interval"])
        paced = ext.chaos is not None
        ext.measured = study.Measured(
            run_id=f"r{len(self.requests)}", passed=True,
            records_per_s=0.0 if paced else THROUGHPUT[interval],
            snapshot_bytes=0 if interval == "none" else int(1e6 / float(interval)),
            latencies=[0.01 * k for k in range(1, 101)] if paced else [],
            recovery_s=1.5 if paced else None, first_output_s=0.4 if paced else None)
        return 0


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    runner = FakeRunner()
    monkeypatch.setattr(study, "execute", runner)
    return runner


def _options(tmp_path: Path, **opts: str) -> FigureOptions:
    return FigureOptions(out=tmp_path, host="spark", quick=True,
                         options={"master": "spark://fake:7077", **opts})


def test_quick_runs_wordcount_unpaced_and_paced_with_one_kill(tmp_path: Path,
                                                              fake: FakeRunner) -> None:
    result = run(_options(tmp_path))
    asked = [(r.info.name, r.config["interval"], r.topology.input.rate, e.chaos is not None)
             for r, e in fake.requests]
    # none fault-free; checkpoint at 100 ms fault-free, then paced at 0.3 x none's throughput
    assert asked == [("none", "none", None, False), ("checkpoint", "0.1", None, False),
                     ("checkpoint", "0.1", 300.0, True)]
    request, ext = fake.requests[2]
    assert request.params.interval == 0.1 and request.master == "spark://fake:7077"
    assert request.topology.input.records == 300 * study.PACED_SECONDS
    (kill,) = ext.chaos.schedule.faults
    assert kill.type == "kill-task" and kill.at == pytest.approx(study.PACED_SECONDS / 2)
    assert [row[:6] for row in result.rows] == [
        ("wordcount", "none", 6, 6, "1,000", "-"), ("wordcount", "0.1", 6, 6, "900", "10.0%")]
    # p50, p99 (ms), recovery, first output (s)
    assert result.rows[1][7:11] == ("510.0", "1000.0", "1.50", "0.40")
    assert [p.name for p in result.files] == [
        "results-spark.json", "results-spark.csv", "snapshot-frequency-spark.png"]
    saved = json.loads((tmp_path / "results-spark.json").read_text())
    assert saved["events"] == study.QUICK_EVENTS and len(saved["points"]) == 2


def test_overhead_per_interval_and_the_same_kill_everywhere(tmp_path: Path,
                                                            fake: FakeRunner) -> None:
    result = run(_options(tmp_path, workloads="q1,wordcount", intervals="0.01,0.1,1.0"))
    assert result.summary["median_overhead"] == {
        "0.01": pytest.approx(0.2), "0.1": pytest.approx(0.1), "1.0": pytest.approx(0.01)}
    assert result.summary["all_exactly_once"]
    kills = {(r.topology.name, e.chaos.schedule.faults[0].target)
             for r, e in fake.requests if e.chaos is not None}
    assert len(kills) == 2  # one instance per workload, whatever the interval
    q1 = next(r.topology for r, _ in fake.requests if r.topology.name == "nexmark-q1")
    assert max(op.parallelism for op in q1.operators) == study.PARALLELISM
    assert sum(1 for _, e in fake.requests if e.chaos is None) == 8  # 2 x (none + 3)


def test_measure_keeps_latency_after_the_warm_up_and_before_a_kill() -> None:
    measure = study._Measure(None)
    ctx = SimpleNamespace(store=SimpleNamespace(run_id="r1"))
    result = SimpleNamespace(latency=[("out[0]", 10.0 + k * 0.1, 0.001 * k) for k in range(40)],
                             snapshot_bytes=123)
    summary: dict[str, Any] = {"passed": True, "records_per_s": 55.5,
                               "recovery": [{"t_fault": 13.0, "recovery_s": 0.7,
                                             "first_output_s": 0.2}]}
    measure.summarize(ctx, result, summary)  # type: ignore[arg-type]
    m = measure.measured
    assert m is not None and (m.run_id, m.records_per_s, m.snapshot_bytes) == ("r1", 55.5, 123)
    # first output at 10 s: 11 s (warm-up) to 13 s (the kill) are samples k = 10..29
    assert m.latencies == pytest.approx([0.001 * k for k in range(10, 30)])
    assert (m.recovery_s, m.first_output_s) == (0.7, 0.2)


@pytest.mark.parametrize(("opt", "field"), [("intervals=off", "intervals"),
                                            ("intervals=0", "intervals"),
                                            ("workloads=q9", "workloads"),
                                            ("events=lots", "events")])
def test_bad_options_are_refused_before_any_cluster(tmp_path: Path, opt: str, field: str,
                                                    fake: FakeRunner) -> None:
    res = CliRunner().invoke(app, ["figure", "003-snapshot-frequency", "--host", "spark",
                                   "--out", str(tmp_path), "--opt", opt])
    assert res.exit_code == 2 and field in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not fake.requests


def test_a_run_that_did_not_finish_leaves_its_point_out(tmp_path: Path,
                                                        fake: FakeRunner) -> None:
    def unfinished(request: RunRequest, ext: Any) -> int:
        code = fake(request, ext)
        if request.config["interval"] == "0.01" and ext.chaos is None:
            ext.measured = None  # execute returned before summarizing
        return code

    topology = study.scaled(load_topology(WORKLOADS["wordcount"]), 8000, "wordcount")
    points = study.measure_workload("wordcount", topology, ("0.01", "0.1"),
                                    "spark://fake:7077", tmp_path, runner=unfinished,
                                    say=lambda _: None)
    assert [p.interval for p in points] == ["none", "0.1"]


def test_without_a_master_one_cluster_is_started_for_the_study(
        tmp_path: Path, fake: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    from ftctl.run.execute import SLOTS_PER_INSTANCE

    cluster = FakeWarmCluster()
    monkeypatch.setattr(study, "warm_cluster", cluster)
    study.run_spark(FigureOptions(out=tmp_path, host="spark", quick=True))
    # wordcount's 6 tasks, their slots split over the workers
    assert cluster.started == [
        (None, -(-SLOTS_PER_INSTANCE * 6 // study.WORKERS), "ftctl-003-")]
    assert [r.master for r, _ in fake.requests] == [URL] * 3
