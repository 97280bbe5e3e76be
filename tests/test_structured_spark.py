"""Structured Streaming runs for real (Spark local mode in the driver ftctl starts): a
driver killed between a micro-batch's sink write and its commit recovers exactly once
from its checkpoint location, and a sink that ignores the batch id is caught duplicating.

The kill waits for a batch whose output is written and not committed (``kill_point=
commit``), so the replay this tests happens in every run, not by chance.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from ftctl.config.load import load_topology
from ftctl.engines.structured.runner import EngineRequest, Fault, execute

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant: str | None) -> EngineRequest:
    monkeypatch.chdir(tmp_path)  # the golden cache and the watchdog's state dir go here
    topology = load_topology(ROOT / "topologies/wordcount.yaml").with_input(
        records=300, rate=50.0, batch=50)
    req = EngineRequest(topology, mutant=mutant, master="local[1]", results=tmp_path / "r",
                        timeout=240, trigger_ms=200, kill_point="commit",
                        faults=[Fault(1.0, "kill-driver")], kind="chaos", quiet=True)
    req.config["code"] = execute(req)
    return req


def _driver_events(req: EngineRequest) -> list[dict[str, object]]:
    path = Path(req.summary["path"]) / "engine" / "driver-events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _no_driver_left(req: EngineRequest) -> bool:
    run_id = req.summary["run_id"]
    return not any(run_id in " ".join(p.info["cmdline"] or ())
                   for p in psutil.process_iter(["cmdline"]))


def test_a_driver_killed_mid_commit_recovers_exactly_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    req = _run(tmp_path, monkeypatch, None)
    s = req.summary
    assert req.config["code"] == 0 and s["passed"] and s["complete"], s
    assert s["restarts"] == 1 and s["anomalies"] == {}
    events = _driver_events(req)
    held = [e for e in events if e["kind"] == "held"]
    assert held, "the kill did not strike between a batch's write and its commit"
    # the restarted driver ran the held batch again; the sink kept its first write
    again = [e for e in events if e["kind"] == "batch" and e["attempt"] == 1
             and e["batch"] == held[0]["batch"]]
    assert again and again[0]["written"] is False
    assert s["faults"] and s["faults"][0]["restart_s"] is not None
    assert _no_driver_left(req)


def test_a_sink_ignoring_the_batch_id_is_caught(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    req = _run(tmp_path, monkeypatch, "ignore-batch-id")
    s = req.summary
    assert req.config["code"] == 1 and not s["passed"]
    assert s["anomalies"].get("duplicated", 0) > 0 and not s["anomalies"].get("lost")
    assert _no_driver_left(req)
