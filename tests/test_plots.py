"""Plot smoke test: the PNGs are written and are real, non-empty images."""

from __future__ import annotations

from pathlib import Path

from ftctl.metrics.plots import AVAILABILITY_PNG, LATENCY_PNG, THROUGHPUT_PNG, write_plots
from ftctl.metrics.recovery import FaultWindow, available_queries, recovery_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def series(value: float, dip: float) -> list[tuple[float, float]]:
    return [(k / 10, dip if 50 <= k < 60 else value) for k in range(150)]


def test_plots_are_written(tmp_path: Path) -> None:
    faults = [FaultWindow(5.0, None, "kill-task", "count[1]"),
              FaultWindow(9.0, 10.0, "pause", "split[0]")]
    p50, p99, thr = series(0.05, 0.5), series(0.08, 0.9), series(1000.0, 50.0)
    by_sink = {"a": p50, "b": series(0.05, 0.05)}
    report = recovery_report(faults, [], p50, thr, latency_by_sink=by_sink)
    files = write_plots(tmp_path, throughput=thr, latency_p50=p50, latency_p99=p99,
                        faults=faults, recoveries=report.faults,
                        availability=report.availability, title="wordcount checkpoint")
    assert {f.name for f in files} == {THROUGHPUT_PNG, LATENCY_PNG, AVAILABILITY_PNG}
    for f in files:
        data = f.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG_MAGIC)


def test_one_sink_has_no_availability_plot(tmp_path: Path) -> None:
    avail = available_queries({"a": series(0.05, 0.05)}, 5.0)
    files = write_plots(tmp_path, throughput=[], latency_p50=[], availability=avail)
    assert [f.name for f in files] == [THROUGHPUT_PNG, LATENCY_PNG]
    assert all(f.stat().st_size > 0 for f in files)
