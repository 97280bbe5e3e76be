"""A run with no delivery promise (``none`` where an operator keeps state) reads as such
in the terminal and the report: counted, not judged; never PASSED, "none held" or ok yes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import ftctl.console as consoles
from ftctl.report.views import verdict_words
from ftctl.run import execute
from ftctl.verify.checker import SinkVerdict, Verdict
from protocols.contract.spec import Guarantee

FIXTURE = Path(__file__).parent / "fixtures" / "compare-rack-failure"


def _printed(monkeypatch: pytest.MonkeyPatch, guarantee: Guarantee) -> str:
    out = io.StringIO()
    monkeypatch.setattr(execute, "console", Console(file=out, width=120, color_system=None))
    monkeypatch.setattr(consoles, "console", Console(file=out, width=120, color_system=None))
    verdict = Verdict(guarantee, [SinkVerdict("out", "ordered-per-key", 100_000, 97_427,
                                              lost=51_827, duplicated=49_254)])
    summary: dict[str, Any] = {
        "topology": "wordcount", "protocol": "none", "guarantee": guarantee.value,
        "records": 50_000, "processing_s": 25.0, "records_per_s": 2000.0, "detections": 2,
        "restarts": 2, "passed": verdict.passed, "complete": True, "timings": {},
        "path": "results/x"}
    execute._print_summary(summary, verdict, None)
    return out.getvalue()


def test_the_terminal_says_there_was_nothing_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _printed(monkeypatch, Guarantee.NONE)
    assert "none: no guarantee to check; 51,827 lost, 49,254 duplicated" in text
    assert "PASSED" not in text and " ok" not in text and "yes" not in text
    # A promise that is checked still reads as a verdict.
    judged = _printed(monkeypatch, Guarantee.AT_MOST_ONCE)
    assert "FAILED" in judged and "no guarantee" not in judged


def test_the_report_says_there_was_nothing_to_check() -> None:
    sinks = [{"lost": 1_234, "duplicated": 56}]
    assert verdict_words({"guarantee": "none", "passed": True, "sinks": sinks},
                         complete=True) == "no guarantee to check; 1,234 lost, 56 duplicated"
    assert verdict_words({"guarantee": "none", "passed": True, "sinks": []},
                         complete=True) == "no guarantee to check; no record lost or duplicated"
    assert verdict_words({"guarantee": "at-most-once", "passed": False, "sinks": sinks},
                         complete=True).startswith("at-most-once broken: 1,234 records lost")


def test_the_compare_table_holds_nothing_for_none(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    from ftctl.commands import compare_cmd
    from ftctl.compare.report import load_comparison
    from ftctl.results import RunStore

    comp = load_comparison(FIXTURE / "20261123-201535-wordcount-compare-7a71")
    comp.protocols[0].guarantee = "none"  # what none declares where an operator keeps state
    out = io.StringIO()
    wide = Console(file=out, width=200, color_system=None)
    monkeypatch.setattr(consoles, "console", wide)
    monkeypatch.setattr(compare_cmd, "console", wide)
    compare_cmd._show(comp, RunStore.create(tmp_path, topology="wordcount", protocol="compare"))
    cells = [line.replace("│", " ").split() for line in out.getvalue().splitlines()]
    rows = {c[0]: c for c in cells if c and c[0] in ("none", "checkpoint") and len(c) > 8}
    assert rows["none"][1:3] == ["none", "-"]  # guarantee none, held: not "yes"
    assert rows["checkpoint"][1:3] == ["exactly-once", "yes"]
