"""The compare report of a real Spark run, opened in headless Chromium: plots render, the
faults are marked in every protocol's panels, and nothing is fetched from the network.

The fixture is the stored result of a real run (``ftctl compare protocols
topologies/wordcount.yaml --scenario chaos/rack-failure.yaml --workers 4 --label rack=a
--label rack=a --label rack=b --label rack=b``), trimmed to the files a report reads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftctl.compare.report import write_report
from ftctl.report.run_report import write_run_report
from ftctl.results import RunStore

pytestmark = pytest.mark.browser

FIXTURE = Path(__file__).parent / "fixtures" / "compare-rack-failure"
COMPARE = "20261123-201535-wordcount-compare-7a71"
PROTOCOLS = ("none", "checkpoint", "lineage", "causal")
CHROMIUM = Path("/usr/bin/chromium")
DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"  # the README's pictures
BAND = ".shapelayer path[style*='fill: rgb(214, 39, 40)']"  # a fault's shaded band
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    if not CHROMIUM.exists():
        pytest.skip("no Chromium at /usr/bin/chromium (Debian package 'chromium')")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install playwright)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    return root


def _open(browser, path: Path, width: int = 1400):  # type: ignore[no-untyped-def]
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(60_000)
    errors: list[str] = []
    remote: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
            else remote.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    return page, errors, remote


def _fits(page, width: int) -> None:  # type: ignore[no-untyped-def]
    """At this width nothing scrolls sideways and every panel is titled and has time
    labels of its own; the screenshot is kept in docs/img (the README shows it)."""
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_timeout(600)  # plotly's responsive relayout after the resize
    scroll, inner = page.evaluate(
        "[document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner, f"sideways scroll at {width} px: {scroll} > {inner}"
    right = page.evaluate(
        "document.getElementById('ftctl-timeline').getBoundingClientRect().right")
    assert right <= inner
    # Each of the 1 + 2 x 4 panels: its x axis labelled in seconds.
    labelled = page.evaluate(
        "Array.from(document.querySelectorAll('.xaxislayer-above'))"
        ".filter(g => Array.from(g.querySelectorAll('text'))"
        ".some(t => t.textContent.endsWith(' s'))).length")
    assert labelled == 1 + 2 * len(PROTOCOLS)
    page.screenshot(path=str(DOCS_IMG / f"report-{width}.png"), full_page=True)


def test_compare_report_renders_every_protocol_with_faults_marked(
        browser, results: Path) -> None:  # type: ignore[no-untyped-def]
    html = write_report(results / COMPARE)
    assert "plotly.js v" in html.read_text()  # the library is inlined, not linked
    page, errors, remote = _open(browser, html)
    assert errors == []
    assert remote == []  # no request left the machine
    titles = page.evaluate("Array.from(document.querySelectorAll('.annotation-text'))"
                           ".map(e => e.textContent)")
    for proto in PROTOCOLS:
        assert f"{proto}: sink throughput (records/s, all sinks)" in titles
        assert f"{proto}: output latency (s)" in titles
    # Faults: a shaded band per fault in each protocol's two panels (2 faults x 4 x 2),
    # a bar and a cross per fault in the timeline.
    bands = page.locator(BAND).count()
    assert bands >= 2 * len(PROTOCOLS) * 2
    bars = page.locator(".barlayer .point").count()
    assert bars == 2 * len(PROTOCOLS)
    # Detection and restart of the rack kill, for every protocol, and words, not values.
    legend = page.locator(".plot-legend").inner_text()
    assert "detected" in legend and "restarted" in legend
    verdict = page.locator("#verdict").inner_text()
    assert "none: at-most-once broken: 126,094 records lost, 59,086 duplicated" in verdict
    assert "checkpoint: exactly-once held" in verdict
    assert "first divergence in sink out" in verdict
    body = page.locator("body").inner_text()
    assert "True" not in body and "None" not in body
    data = json.loads(page.locator("#ftctl-data").inner_text())
    assert [p["protocol"] for p in data["protocols"]] == list(PROTOCOLS)
    # Unticking the shared axes gives each panel its own full range back.
    top = "document.getElementById('ftctl-timeline').layout.yaxis2.range[1]"
    shared = page.evaluate(top)
    page.locator(".plot-toggles input").first.uncheck()
    page.wait_for_timeout(300)
    assert page.evaluate(top) != shared
    page.locator(".plot-toggles input").first.check()
    page.wait_for_timeout(300)
    assert page.evaluate(top) == shared
    for width in (1400, 800):
        _fits(page, width)


def test_the_same_fault_sits_at_the_same_time_for_every_protocol(results: Path) -> None:
    from ftctl.report.views import load_run

    doc = json.loads((results / COMPARE / "comparison.json").read_text())
    starts = [load_run(RunStore.open(r["run_id"], results)).faults[0].start
              for r in doc["runs"]]
    # On the event clock they were seconds apart (cluster and session start differ);
    # counted from when the topology ran, the rack kill is at 5 s (+ its own 0.4 s) in all.
    assert max(starts) - min(starts) < 0.1
    assert all(5.0 <= s < 5.6 for s in starts)


def test_run_report_of_a_chaos_run_has_the_same_parts(results: Path) -> None:
    # Same templates and figure code as the compare report above (one browser load is
    # enough for the suite's time budget): here the page's parts, read from its HTML.
    doc = json.loads((results / COMPARE / "comparison.json").read_text())
    run = RunStore.open(doc["runs"][1]["run_id"], results)  # checkpoint
    text = write_run_report(run).read_text()
    assert "exactly-once held" in text and "Spark SQL oracle (word-count): all 1,000 keys" in text
    assert text.count("rgba(214, 39, 40, 0.15)") >= 4  # the 2 faults in both panels
    assert 'id="recovery"' in text and "kill-group" in text
    assert "plotly.js v" in text  # the library is inlined, not linked


def test_a_missing_record_reads_nothing_and_the_verdict_is_words(tmp_path: Path) -> None:
    from ftctl.report.views import load_run, verdict_words

    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    none_run = results / "20261123-201535-wordcount-none-32b8"
    verdict = json.loads((none_run / "verdict.json").read_text())
    verdict["sinks"][0]["divergences"][0]["actual"] = "None"  # as the checker writes it
    (none_run / "verdict.json").write_text(json.dumps(verdict))
    view = load_run(RunStore.open(none_run.name, results))
    assert view.divergences[0]["actual"] == "nothing"
    assert view.verdict_words == "at-most-once broken: 126,094 records lost, 59,086 duplicated"
    assert verdict_words({"guarantee": "exactly-once", "passed": True, "sinks": []},
                         complete=True) == "exactly-once held"
    assert verdict_words({"guarantee": "exactly-once"}, complete=False).startswith(
        "the run did not finish")
