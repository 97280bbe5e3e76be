"""The gate's simulation cases come from the protocol registry."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ftctl.conformance.cases import topologies
from ftctl.gate.suite import load_suite
from protocols import registry

ROOT = Path(__file__).resolve().parents[2]


def test_ci_suite_reproduces_the_baselined_case_names() -> None:
    suite = load_suite(ROOT / "gate" / "ci.yaml")
    baseline = json.loads((ROOT / "results" / "baselines" / "ci.json").read_text())["cases"]
    assert sorted(c.name for c in suite.cases) == sorted(baseline)
    by_name = {c.name: c for c in suite.cases}
    aligned = by_name["wordcount-checkpoint-aligned"]
    assert (aligned.protocol, aligned.params, aligned.schedules) == (
        "checkpoint", {"alignment": "aligned"}, 150)
    assert by_name["sharder-causal"].schedules == 40
    assert by_name["wordcount-checkpoint-spark"].host == "spark"


def test_a_newly_registered_protocol_is_gated_without_editing_the_suite(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A copy of lineage that declares no gate entries of its own: every topology is gated.
    new = dataclasses.replace(registry.PROTOCOLS["lineage"], name="lineage-copy", gate={})
    monkeypatch.setitem(registry.PROTOCOLS, "lineage-copy", new)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ninclude: registry\n")
    names = {c.name for c in load_suite(suite).cases}
    stems = [p.stem for p in topologies()]
    assert {f"{s}-lineage-copy" for s in stems} <= names
    assert "diamond-lineage" in names
