"""The real commands' tables, printed at 60 to 160 columns in a pipe, keep every
figure, name and header whole on one line (a header may wrap at its spaces or be shown
by its short form, which the legend under the table then explains).

Each command runs for real (on the simulation host, or from the stored comparison in
tests/fixtures/compare-rack-failure) with ``print_table`` recorded; each recorded table is
then printed again at every width to a console that is not a terminal, as in a CI log.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

import ftctl.console
import ftctl.tables
from ftctl.cli import app
from ftctl.commands import (
    compare_cmd,
    config_cmds,
    conformance_cmd,
    figure_cmd,
    gate_cmd,
    sim_cmd,
)
from ftctl.compare.report import load_comparison
from ftctl.console import make_console
from ftctl.gate.baseline import regressions
from ftctl.gate.runner import CaseResult
from ftctl.run import chaos, execute
from ftctl.verify.checker import SinkVerdict, Verdict
from protocols.contract.spec import Guarantee

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "compare-rack-failure"
WIDTHS = (60, 80, 100, 120, 160)
_RULE = re.compile(r"^[─━┃│┏┓┗┛┡┩└┘┌┐╇╈┳┻╋┼┬┴├┤━]+$")

Recorded = list[tuple[Table, dict[str, Any]]]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    """Every table the commands hand to ``print_table``, with its legend and options; the
    commands print to a wide throw-away console meanwhile."""
    tables: Recorded = []
    real = ftctl.tables.print_table
    sink = make_console(file=io.StringIO(), width=200)

    def record(table: Table, legend: Any = None, console: Any = None, **kw: Any) -> None:
        tables.append((table, {"legend": legend, **kw}))
        real(table, legend, sink, **kw)

    modules: list[ModuleType] = [sim_cmd, conformance_cmd, compare_cmd, figure_cmd,
                                 config_cmds, gate_cmd, chaos, execute]
    for module in modules:
        monkeypatch.setattr(module, "print_table", record)
        monkeypatch.setattr(module, "console", sink)
    yield tables


def _plain(x: object) -> str:
    return x.plain if isinstance(x, Text) else Text.from_markup(str(x)).plain


def render(table: Table, options: dict[str, Any], width: int) -> str:
    buf = io.StringIO()
    ftctl.tables.print_table(table, options.get("legend"), make_console(file=buf, width=width),
                             short=options.get("short"), key=options.get("key", 1))
    return buf.getvalue()


def assert_whole(table: Table, options: dict[str, Any], width: int) -> None:
    out = render(table, options, width)
    lines = out.splitlines()
    short = {**ftctl.tables.SHORT, **(options.get("short") or {})}
    legend = options.get("legend") or {}
    headers = [_plain(c.header) for c in table.columns]
    cells = [_plain(c) for col in table.columns for c in col.cells]
    # Every word the output may hold: the table's own, its short headers and its legend.
    known = {w for text in (_plain(table.title or ""), *headers, *cells, *short.values(),
                            *short.keys(), *legend.keys(), *legend.values())
             for w in text.split()}
    raw = {t for line in lines for t in line.split()}
    # ":" and ";" after a word are the legend's and the ``header: value`` blocks'
    tokens = raw | {t.rstrip(":;") for t in raw}
    for t in raw:
        # a piece of a split word or number ("0.06" of "0.0669", "guar" of "guarantee")
        # is not a word of the table
        assert _RULE.match(t) or t.rstrip(":;") in known or t in known, \
            f"{t!r} at {width} columns is not a whole word of the table:\n{out}"
    for cell in cells:
        for word in cell.split():
            assert word in tokens, f"cell word {word!r} not whole at {width}:\n{out}"
    for head in headers:
        shown = all(w in tokens for w in head.split())
        abbreviated = head in short and f"{short[head]}: {head}" in out
        assert shown or abbreviated, f"header {head!r} lost at {width}:\n{out}"
    for line in lines:
        if cell_len(line) > width:  # only a title or a legend line may be longer: no table row
            assert "  " not in line.strip(), f"table row wider than {width}: {line!r}"


def _assert_all_widths(tables: Recorded, count: int) -> None:
    assert len(tables) >= count
    for table, options in tables:
        for width in WIDTHS:
            assert_whole(table, options, width)


def test_sim_summary(recorded: Recorded) -> None:
    res = CliRunner().invoke(app, ["sim", str(ROOT / "topologies" / "wordcount.yaml"),
                                   "-p", "causal", "-n", "3"])
    assert res.exit_code == 0, res.output
    _assert_all_widths(recorded, 1)
    table, options = recorded[0]
    assert "duplicated" in [_plain(c.header) for c in table.columns]
    out = render(table, options, 80)
    assert "dup: duplicated" in out  # 80 columns: short headers, explained
    assert not any(len(line.strip()) == 1 for line in out.splitlines())  # no letter per line


def test_conformance_cases_and_mutants(recorded: Recorded, tmp_path: Path) -> None:
    for name in ("diamond", "wordcount"):
        shutil.copy(ROOT / "topologies" / f"{name}.yaml", tmp_path)
    res = CliRunner().invoke(app, ["conformance", "-p", "checkpoint", "-n", "1",
                                   "--topologies", str(tmp_path)])
    assert res.exit_code in (0, 1), res.output
    _assert_all_widths(recorded, 2)
    names = [_plain(c) for c in recorded[0][0].columns[0].cells]
    assert "diamond-checkpoint-aligned+all-faults" in names
    for width in WIDTHS:
        out = render(*recorded[0], width)
        for name in names:  # a case name whole, first on its line (after a box's bar)
            assert re.search(rf"(?m)^(│ |case: )?{re.escape(name)}(\s|$)", out), (name, out)


def test_compare_tables_from_a_stored_comparison(recorded: Recorded) -> None:
    comp = load_comparison(FIXTURE / "20261123-201535-wordcount-compare-7a71")

    class Store:
        path = FIXTURE

    compare_cmd._show(comp, Store())  # type: ignore[arg-type]
    _assert_all_widths(recorded, 2)
    out = render(*recorded[0], 80)
    for figure in ("126,094", "59,086", "0.138", "7.26", "at-most-once", "checkpoint"):
        assert re.search(rf"(?<!\S){re.escape(figure)}(?!\S)", out), figure


def test_figure_table_and_figure_list(recorded: Recorded, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["figure", "002-table1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["figure", "list"])
    assert res.exit_code == 0, res.output
    _assert_all_widths(recorded, 2)
    # the figures are right-aligned: a column of numbers reads like one
    assert recorded[0][0].columns[1].justify == "right"


@pytest.mark.parametrize("what", ["protocols", "mutants", "operators", "faults"])
def test_list_tables(recorded: Recorded, what: str) -> None:
    res = CliRunner().invoke(app, ["list", what])
    assert res.exit_code == 0, res.output
    _assert_all_widths(recorded, 1)


def test_chaos_recovery_and_run_summary_tables(recorded: Recorded) -> None:
    run = FIXTURE / "20261123-201535-wordcount-none-32b8"
    faults = json.loads((FIXTURE / "20261123-201922-wordcount-checkpoint-c50d"
                         / "recovery.json").read_text())["faults"]
    chaos.print_recovery({"schedule": {"name": "rack-failure"}, "recovery": faults})
    doc = json.loads((run / "verdict.json").read_text())
    verdict = Verdict(Guarantee(doc["guarantee"]), [
        SinkVerdict(**{k: v for k, v in s.items() if k != "divergences"})
        for s in doc["sinks"]])
    summary = {"topology": "wordcount", "protocol": "none", "guarantee": "at-most-once",
               "records": 400_000, "processing_s": 53.8, "records_per_s": 7434.9,
               "detections": 1, "restarts": 2, "passed": False, "complete": True,
               "timings": {"total_s": 53.8, "cluster_s": 9.7, "session_s": 18.9},
               "path": str(run)}
    execute._print_summary(summary, verdict, None)
    _assert_all_widths(recorded, 2)


def test_gate_table(recorded: Recorded, tmp_path: Path) -> None:
    metrics = {"detection_s": 0.0669, "recovery_s": 7.26, "throughput_rps": 15904.572565,
               "messages_per_record": 0.006}
    slow = {**metrics, "recovery_s": 9.81}
    results = [
        CaseResult("wordcount-checkpoint-kill-1", True, metrics),
        CaseResult("wordcount-causal-kill-1", True, slow,
                   reasons=regressions(slow, metrics, 0.2, {})),
        CaseResult("diamond-lineage-partition", False, metrics, {"lost": 3},
                   reasons=["guarantee broken: lost=3"])]
    assert results[1].reasons  # a regression, with its long reason
    gate_cmd._show("smoke", results, tmp_path / "baseline.json", False)
    _assert_all_widths(recorded, 1)
