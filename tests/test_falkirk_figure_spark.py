"""``ftctl figure 001-policies --host spark`` without Spark: the runs are replaced by
per-run figures and histories written by hand, and the table and plot must carry their
numbers through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftctl.compare.figures import RunFigures
from ftctl.config.errors import ConfigError
from ftctl.figures import FigureOptions
from ftctl.figures.policies_spark import QUICK, _Capture, read_run, result, run_spark
from ftctl.kernel.history import HistoryEvent
from ftctl.run.execute import RunRequest
from tests.fakecluster import URL, FakeWarmCluster

# Per configuration: (records processed, recovery s, detection s, history kinds).
RESTARTS = [("instance-started", {"reason": "restart"})]
SCRIPT: dict[str, tuple[int, float | None, float | None, list[tuple[str, dict[str, Any]]]]] = {
    "fault-free": (36_000, None, None, []),
    "checkpoint": (51_000, 2.5, 0.2, [("failure-detected", {"instances": ["count[1]"]}),
                                      *RESTARTS * 6]),
    "default": (40_500, 1.25, 0.25, [
        ("failure-detected", {"instances": ["count[1]"]}), *RESTARTS,
        ("instance-rolled-back", {"to": 3}), ("instance-rolled-back", {"to": 3}),
        ("instance-rolled-back", {"to": 3, "skipped": "gone"})]),
    "firewall": (37_200, 0.75, 0.2, [("failure-detected", {"instances": ["count[1]"]}),
                                     *RESTARTS]),
}


def _figures(name: str, passed: bool = True) -> RunFigures:
    processed, recovery, detection, _ = SCRIPT[name]
    return RunFigures(run_id=f"run-{name}", protocol=name, passed=passed, lost=0,
                      duplicated=0, detection_s=detection, restart_s=None,
                      recovery_s=recovery, throughput_rps=None, latency_p50_s=None,
                      records_processed=processed, snapshot_bytes=0, restarts=0,
                      seconds=10.0)


def _events(name: str) -> list[HistoryEvent]:
    return [HistoryEvent(k, 1.0 + k, "spark", kind, data)
            for k, (kind, data) in enumerate(SCRIPT[name][3])]


def fake_runner(seen: list[RunRequest]) -> Any:
    def run(request: RunRequest, ext: Any) -> int:
        assert isinstance(ext, _Capture)
        seen.append(request)
        name = request.config["run"]
        ext.figures, ext.events = _figures(name), _events(name)
        return 0
    return run


def test_the_table_carries_each_runs_numbers(tmp_path: Path) -> None:
    seen: list[RunRequest] = []
    res = run_spark(FigureOptions(tmp_path, host="spark", quick=True),
                    fake_runner(seen), master="spark://fake:7077")
    # fault-free first, then checkpoint and the quick mixes, all on the given cluster
    assert [r.config["run"] for r in seen] == ["fault-free", "checkpoint", "default",
                                               "firewall"]
    assert [r.info.name for r in seen] == ["falkirk", "checkpoint", "falkirk", "falkirk"]
    assert all(r.master == "spark://fake:7077" for r in seen)
    assert seen[3].params.model_dump()["default_stateless"] == "log"
    assert (tmp_path / "policies-spark-scenario.yaml").read_text() == QUICK.scenario()
    rows = {r[0]: r for r in res.rows}
    assert list(rows) == ["checkpoint", "default", "firewall"]  # no row for fault-free
    # config, failures, rolled back, restarted, in place, fraction, replayed, det, rec, EO
    assert rows["checkpoint"] == ("checkpoint", 1, 6, 6, 0, "1.00", 15_000, "0.20", "2.50",
                                  "yes")
    # a skipped rollback in place is not one
    assert rows["default"] == ("default", 1, 3, 1, 2, "0.50", 4_500, "0.25", "1.25", "yes")
    assert rows["firewall"] == ("firewall", 1, 1, 1, 0, "0.17", 1_200, "0.20", "0.75", "yes")
    assert res.summary["fault_free_processed"] == 36_000
    assert res.summary["versus_checkpoint"] == {
        m: {"fewer_rolled_back": True, "recovery_no_slower": True}
        for m in ("default", "firewall")}
    png = tmp_path / "policies-spark.png"
    assert png in res.files and png.stat().st_size > 10_000


def test_a_broken_run_and_a_slower_recovery_show(tmp_path: Path) -> None:
    runs = [read_run(n, _figures(n), _events(n)) for n in ("fault-free", "checkpoint")]
    slow = read_run("default", _figures("default", passed=False), _events("default"))
    slow.recovery_s = 3.0
    res = result([*runs, slow], QUICK, 6, tmp_path)
    assert res.rows[1][-1] == "NO" and res.rows[1][-2] == "3.00"
    assert res.summary["versus_checkpoint"]["default"]["recovery_no_slower"] is False
    assert res.summary["all_exactly_once"] is False


@pytest.mark.parametrize("opt", [{"mixes": "default,nope"}, {"target": "count[9]"},
                                 {"topology": "nope"}, {"rollback": "sideways"},
                                 {"records": "many"}])
def test_bad_options_are_refused_before_anything_runs(tmp_path: Path,
                                                      opt: dict[str, str]) -> None:
    seen: list[RunRequest] = []
    with pytest.raises(ConfigError):
        run_spark(FigureOptions(tmp_path, host="spark", quick=True, options=opt),
                  fake_runner(seen), master="spark://fake:7077")
    assert seen == []


def test_without_a_master_every_run_goes_to_one_cluster_started_for_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ftctl.figures import policies_spark
    from ftctl.run.execute import SLOTS_PER_INSTANCE

    cluster = FakeWarmCluster()
    monkeypatch.setattr(policies_spark, "warm_cluster", cluster)
    seen: list[RunRequest] = []
    run_spark(FigureOptions(tmp_path, host="spark", quick=True), fake_runner(seen))
    # wordcount's 6 instances: every one's slots on each worker, as the runs ask for
    assert cluster.started == [(None, SLOTS_PER_INSTANCE * 6, "ftctl-policies-")]
    assert len(seen) == 4 and all(r.master == URL and r.cores == SLOTS_PER_INSTANCE * 6
                                  for r in seen)
