"""analyze and report on stored runs, built here from simulation output."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.results import RunStore
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.sim.runner import sim_params
from ftctl.verify.checker import verify
from ftctl.verify.golden import golden_for
from protocols.contract.view import GraphView
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim
runner = CliRunner()


def _stored_run(root: Path, protocol: str) -> RunStore:
    topo = load("wordcount")
    graph = ExecutionGraph(topo)
    info = PROTOCOLS[protocol]
    sched = FailureSchedule([Strike(90, 1, ("count[0]",))])
    params = sim_params(graph, info, {})
    result = SimHost(graph, info, params, 4, sched).run()
    run = RunStore.create(root, topology=topo.name, protocol=protocol)
    run.write_config({"topology": topo.model_dump(by_alias=True), "protocol": protocol,
                      "params": {}, "host": "sim"})
    run.write_outputs(result.outputs)
    golden = golden_for(topo, golden_output, root / ".golden")
    verdict = verify(topo.sink_modes(), golden, result.outputs,
                     info.guarantee_of(params, GraphView(graph)),
                     complete=result.complete)
    run.write_verdict(verdict.to_json())
    run.mark("complete")
    return run


def test_analyze_reproduces_the_stored_verdict(tmp_path: Path) -> None:
    # none loses what the killed count held: it promises nothing where a count keeps state
    # (the run only has to finish), and that is not exactly-once.
    for protocol, extra, code in (("checkpoint", [], 0), ("none", [], 0),
                                  ("none", ["--expect", "exactly-once"], 1)):
        run = _stored_run(tmp_path, protocol)
        res = runner.invoke(app, ["analyze", str(run.path), "--json", *extra])
        assert res.exit_code == code, res.output
        out = json.loads(res.output)
        assert out["matches_stored"] is True
        assert out["passed"] is (code == 0)
        assert (out["verdict"]["sinks"][0]["lost"] > 0) is (protocol == "none")


def test_analyze_sees_tampered_output_and_unfinished_runs(tmp_path: Path) -> None:
    run = _stored_run(tmp_path, "checkpoint")
    outputs = run.read_outputs()
    outputs["out"] = outputs["out"][:-5]
    run.write_outputs(outputs)
    res = runner.invoke(app, ["analyze", str(run.path), "--json"])
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert out["matches_stored"] is False
    assert out["verdict"]["sinks"][0]["lost"] == 5
    fresh = _stored_run(tmp_path, "checkpoint")
    fresh.mark("incomplete", "interrupted")
    assert runner.invoke(app, ["analyze", str(fresh.path)]).exit_code == 1


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.ids.append(dict(attrs).get("id") or "")
        self._in_td = tag == "td"

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self.cells.append(data)


def test_report_writes_self_contained_html(tmp_path: Path) -> None:
    run = _stored_run(tmp_path, "none")
    res = runner.invoke(app, ["report", str(run.path), "--json"])
    assert res.exit_code == 0, res.output
    html = Path(json.loads(res.output)["html"]).read_text()
    parser = _Tables()
    parser.feed(html)
    assert {"sinks", "events"} <= set(parser.ids)
    stored = run.read_verdict()
    assert stored is not None
    assert f"{stored['sinks'][0]['lost']:,}" in parser.cells  # as people read it: 3,366
    # Nothing fetched when viewed: no element loads from the network (plotly is inlined;
    # tests/test_report_browser.py watches the requests of a real browser).
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*(src|href)=[\"']?(https?:)?//", html)


def test_unknown_run_is_one_line_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["analyze", "no-such-run", "--results", str(tmp_path)])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
