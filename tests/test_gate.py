"""ftctl gate: guarantees, regressions against a baseline, JUnit output."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.gate.baseline import regressions
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim
runner = CliRunner()


def _suite(tmp: Path, *cases: str) -> Path:
    body = "name: t\ntolerance: 0.2\ncases:\n" + "".join(f"  - {c}\n" for c in cases)
    path = tmp / "suite.yaml"
    path.write_text(body)
    return path


GOOD = f"{{name: wc, topology: {TOPOLOGIES}/wordcount.yaml, protocol: checkpoint, schedules: 15}}"
# none promises nothing on a stateful topology; judged as at-most-once it breaks.
BROKEN = (f"{{name: wc-none, topology: {TOPOLOGIES}/wordcount.yaml, protocol: none, "
          f"expect: at-most-once, schedules: 15}}")


def _gate(suite: Path, baseline: Path, *extra: str) -> tuple[int, dict[str, object]]:
    res = runner.invoke(app, ["gate", "--suite", str(suite), "--baseline", str(baseline),
                              "--json", *extra])
    return res.exit_code, json.loads(res.output)


def test_passes_then_catches_a_planted_regression(tmp_path: Path) -> None:
    suite, baseline = _suite(tmp_path, GOOD), tmp_path / "base.json"
    code, _ = _gate(suite, baseline, "--update-baseline")
    assert code == 0
    accepted = json.loads(baseline.read_text())["cases"]["wc"]
    assert accepted["resent_records"] > 0
    code, out = _gate(suite, baseline)
    assert code == 0, out
    # A baseline claiming far cheaper recovery: this run is now a regression.
    tighter = {k: v / 10 for k, v in accepted.items()}
    baseline.write_text(json.dumps({"suite": "t", "cases": {"wc": tighter}}))
    junit = tmp_path / "gate.xml"
    code, out = _gate(suite, baseline, "--junit", str(junit))
    assert code == 1
    reasons = out["cases"][0]["reasons"]  # type: ignore[index]
    assert any("resent_records" in r for r in reasons)
    failing = [tc.get("name") for tc in ET.parse(junit).iter("testcase")
               if tc.find("failure") is not None]
    assert failing == ["wc"]


def test_broken_guarantee_fails_and_is_named_in_junit(tmp_path: Path) -> None:
    suite, junit = _suite(tmp_path, GOOD, BROKEN), tmp_path / "gate.xml"
    code, out = _gate(suite, tmp_path / "none.json", "--junit", str(junit))
    assert code == 1
    by_name = {c["name"]: c for c in out["cases"]}  # type: ignore[union-attr]
    assert by_name["wc"]["passed"] and not by_name["wc-none"]["passed"]
    assert "guarantee broken" in by_name["wc-none"]["reasons"][0]
    root = ET.parse(junit).getroot()
    suite_el = root.find("testsuite")
    assert suite_el is not None and suite_el.get("failures") == "1"
    failing = [tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert failing == ["wc-none"]


def test_regression_rule() -> None:
    slack = {"m": 1.0}
    assert regressions({"m": 12.0}, {"m": 10.0}, 0.2, slack) == []  # 12 <= 10*1.2+1
    assert regressions({"m": 13.5}, {"m": 10.0}, 0.2, slack)
    assert regressions({"other": 99.0}, {"m": 10.0}, 0.2, slack) == []


def test_bad_suite_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = _suite(tmp_path, f"{{name: x, topology: {TOPOLOGIES}/wordcount.yaml, protocol: nope}}")
    res = runner.invoke(app, ["gate", "--suite", str(bad)])
    assert res.exit_code == 2
    assert "unknown protocol 'nope'" in res.output
    assert "Traceback" not in res.output


def test_simulation_cases_side_by_side_judge_as_one_by_one(tmp_path: Path) -> None:
    # Two processes or one: the same cases in the same order, with the same metrics and
    # violations (a schedule is a pure function of its seed).
    suite = _suite(tmp_path, BROKEN, GOOD)
    runs = [_gate(suite, tmp_path / "none.json", "--jobs", j) for j in ("2", "1")]
    (code2, two), (code1, one) = runs
    assert code2 == code1 == 1
    strip = [{k: v for k, v in c.items() if k != "seconds"}
             for c in two["cases"]]  # type: ignore[union-attr]
    assert strip == [{k: v for k, v in c.items() if k != "seconds"}
                     for c in one["cases"]]  # type: ignore[union-attr]
    assert [c["name"] for c in strip] == ["wc-none", "wc"]
    assert strip[0]["violations"] and not strip[1]["violations"]
