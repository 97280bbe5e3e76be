"""A report's numbers agree with its own plots, on the axis of its own events.

The compare fixture is a real Spark comparison (tests/fixtures/compare-rack-failure, see
test_report_browser.py); run-without-series is a real Spark run of wordcount under
checkpoint reduced to what a plain ``ftctl run`` left before series.json: its metrics
on the host's clock, its events on the run's.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from ftctl.compare.report import write_report
from ftctl.metrics.runreport import RunSeries, write_series
from ftctl.report.figures import timeline_figure
from ftctl.report.run_report import write_run_report
from ftctl.report.views import load_run
from ftctl.results import RunStore

FIXTURES = Path(__file__).parent / "fixtures"
COMPARE = "20261123-201535-wordcount-compare-7a71"
PLAIN = "20261128-041828-wordcount-checkpoint-b2c0"


def _table(page: str, table_id: str) -> list[list[str]]:
    body = page[page.index(f'<table id="{table_id}">'):]
    body = body[:body.index("</table>")]
    return [[html.unescape(re.sub("<[^>]+>", "", c)).strip()
             for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "compare-rack-failure", tmp_path, dirs_exist_ok=True)
    shutil.copytree(FIXTURES / "run-without-series", tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_overhead_table_gives_what_the_plots_show_before_the_first_fault(
        results: Path) -> None:
    page = write_report(results / COMPARE).read_text()
    rows = _table(page, "overhead")
    head = rows[0]
    col_rps, col_ms = head.index("sink records/s"), head.index("median latency (ms)")
    runs = {r["protocol"]: r["run_id"] for r in
            json.loads((results / COMPARE / "comparison.json").read_text())["runs"]}
    views = {p: load_run(RunStore.open(run_id, results)) for p, run_id in runs.items()}
    fig = timeline_figure(list(views.values()))
    plotted = {tr.name: [(x, y) for x, y in zip(tr.x, tr.y, strict=True) if x is not None]
               for tr in fig.data if tr.name}
    for row in rows[1:]:
        protocol = row[0]
        first_fault = min(f.start for f in views[protocol].faults)
        thr = plotted[f"{protocol} sink throughput"]
        start = next(t for t, v in thr if v > 0)
        window = [v for t, v in thr if start + 1 <= t < first_fault]
        lat = [v for t, v in plotted[f"{protocol} latency p50"] if start + 1 <= t < first_fault]
        # What a reader sees left of the first red band, within the table's rounding.
        assert _number(row[col_rps]) == pytest.approx(statistics.fmean(window), rel=0.01)
        assert min(window) <= _number(row[col_rps]) <= max(window)
        assert _number(row[col_ms]) == pytest.approx(1000 * statistics.median(lat), rel=0.02)
    # The overheads are computed from those figures, not from the stored ones.
    none_rps = _number(rows[1][col_rps])
    for row in rows[2:]:
        ovh = float(row[head.index("throughput overhead")].rstrip("%")) / 100
        assert ovh == pytest.approx(1 - _number(row[col_rps]) / none_rps, abs=0.006)
    # A figure of a different quantity says so.
    assert "a different quantity, over the whole run" in page


def test_a_plain_run_plots_its_output_when_its_events_say_it_came(results: Path) -> None:
    run = RunStore.open(PLAIN, results)
    view = load_run(run)
    committed = next(e.t for e in run.read_history() if e.kind == "output-committed")
    first = next(t for t, v in view.throughput if v > 0)
    # Records reach the sink before the snapshot that commits them (about 1 s here); on
    # the host's clock the plot started 12 s late.
    assert 0 <= committed - view.t0 - first < 1.0
    assert min(t for t, _ in view.throughput) >= 0
    page = write_run_report(run).read_text()
    # No fault strip, no latency panel without latency, and the page says why.
    assert "faults of each run" not in page and "output latency (s)" not in page
    assert "No fault was injected in this run" in page
    assert "No output latency was recorded" in page
    assert "sink throughput (records" in page


def test_series_json_puts_a_plain_run_on_its_events_clock(results: Path) -> None:
    run = RunStore.open(PLAIN, results)
    t_run = next(e.t for e in run.read_history() if e.kind == "instance-running")
    shift = t_run - 8.0  # event clock minus host clock, as ``execute`` measures it
    host = [(9.0, 0.0), (9.5, 16000.0), (10.0, 15800.0)]
    latency = [(9.6, 0.004), (9.7, 0.005)]
    write_series(run.path, RunSeries([(t + shift, v) for t, v in latency], [],
                                     [(t + shift, v) for t, v in host], {}), shift)
    view = load_run(run)
    assert [v for _, v in view.throughput] == [0.0, 16000.0, 15800.0]
    assert view.throughput[1][0] == pytest.approx(1.5, abs=1e-3)
    assert [v for _, v in view.latency] == [0.004, 0.005]
    assert "output latency (s)" in write_run_report(run).read_text()


def test_a_throughput_that_never_fell_reads_no_dip_in_the_report_and_terminal() -> None:
    from ftctl.report.render import _env
    from ftctl.run.chaos import dip_words

    macros = _env().get_template("macros.html.j2").module
    # A catch-up burst above the rate before: not "121% of before" / "-21%".
    assert str(macros.dip(-0.21)) == "no dip (121%)" and dip_words(-0.21) == "none"
    assert str(macros.dip(0.9)) == "10% of before" and dip_words(0.9) == "90%"
    assert str(macros.dip(None)) == "-" and dip_words(None) == "-"
