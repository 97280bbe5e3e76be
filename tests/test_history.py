"""The run history schema (ftctl/kernel/history.py): the writer validates, both versions
read, every kind a host writes is declared and documented."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from ftctl.kernel.history import (
    KINDS,
    V1_RENAMES,
    History,
    HistoryError,
    HistoryEvent,
    read_history,
    upgrade_v1,
)
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import HANG_TIMEOUT, Delay, Drop, NodeLoss, Partition, Pause, Slow, Strike
from tests.test_sim_faults import _run

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "compare-rack-failure"


def _history() -> History:
    clock = iter(float(i) for i in range(100))
    return History("sim", lambda: next(clock))


def test_the_writer_stamps_seq_t_and_host() -> None:
    h = _history()
    a = h.write("node-up", node="w1")
    b = h.write("instance-started", instance="x[0]", incarnation=1, reason="restart")
    assert (a.seq, a.t, a.host, b.seq, b.t) == (1, 0.0, "sim", 2, 1.0)
    assert b.to_json() == {"v": 2, "seq": 2, "t": 1.0, "host": "sim",
                           "kind": "instance-started", "instance": "x[0]", "incarnation": 1,
                           "data": {"reason": "restart"}}
    assert HistoryEvent.from_json(b.to_json()) == b
    assert h.events == [a, b]


@pytest.mark.parametrize(("kind", "fields", "error"), [
    ("restarted", {"instance": "x[0]"}, "undeclared history kind 'restarted'"),
    ("node-up", {}, "node-up: missing field(s) ['node']"),
    ("node-up", {"node": "w1", "rack": "a"}, "node-up: undeclared field(s) ['rack']"),
    ("frame-lost", {"sender": "a[0]"}, "frame-lost: no instance"),
])
def test_the_writer_refuses_what_the_schema_does_not_declare(
        kind: str, fields: dict[str, str], error: str) -> None:
    h = _history()
    with pytest.raises(HistoryError, match=re.escape(error)):
        h.write(kind, **fields)
    assert h.events == []  # nothing half-written


def test_open_kinds_take_their_fault_details() -> None:
    ev = _history().write("fault-injected", fault="3", type="drop", target="a[0]",
                          probability=0.5)
    assert ev.data["probability"] == 0.5 and ev.fault == "3"


def test_a_sim_run_with_every_fault_kind_writes_a_valid_history() -> None:
    cluster = SimCluster.workers(2, 12)
    faults = [
        (0.002, Delay(0, 0.001, 0.002, "lines[0]")),
        (0.0025, Drop(0, 0.5, 0.001, "split[1]")),
        (0.003, Slow(0, 2.0, 0.002, "out[0]")),
        (0.0035, Partition(0, 0.004, "lines[0]", ("split[1]",))),  # frame-lost
        (0.004, NodeLoss(0, 0.002)),
        (0.0045, Pause(0, 2.5 * HANG_TIMEOUT, "count[1]")),  # hung: zombie-fenced
        (0.005, Strike(0, 1, ("lines[0]",))),
        (0.007, Pause(0, 0.001, "nope[9]")),  # skipped
    ]
    _, res = _run("wordcount", "checkpoint", faults, cluster=cluster)
    assert res.complete
    events = res.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(a.t <= b.t for a, b in itertools.pairwise(events))
    assert {e.host for e in events} == {"sim"}
    # What the run stores reads back as the same history.
    stored = [json.loads(json.dumps(e.to_json())) for e in events]
    assert read_history(stored, host="sim") == events
    types = {e.data["type"] for e in events if e.kind == "fault-injected"}
    assert types == {"crash", "pause", "partition", "delay", "drop", "slow", "node"}
    kinds = {e.kind for e in events}
    assert {"failure-detected", "instance-started", "fault-healed", "fault-skipped",
            "zombie-fenced", "frame-lost", "node-down", "node-up", "protocol"} <= kinds
    injected = {e.fault for e in events if e.kind == "fault-injected" and e.fault}
    assert injected and injected == {e.fault for e in events if e.kind == "fault-healed"}
    # A detection links the crash, lost frame or node loss it follows (a hung pause's
    # detection has no record of its own to point at).
    by_seq = {e.seq: e for e in events}
    causes = {(by_seq[e.caused_by].kind, by_seq[e.caused_by].data.get("type"))
              for e in events if e.kind == "failure-detected" and e.caused_by is not None}
    assert causes == {("fault-injected", "crash"), ("frame-lost", None), ("node-down", None)}
    for e in events:
        if e.kind == "failure-detected" and e.caused_by is not None:
            cause = by_seq[e.caused_by]
            assert cause.seq < e.seq
            assert set(e.data["instances"]) <= {
                *cause.data.get("instances", ()), *([cause.instance] if cause.instance else [])}


def test_upgrade_v1_maps_renamed_kinds_and_moves_fields() -> None:
    assert upgrade_v1({"t": 1.5, "event": "restarted", "instance": "a[0]", "restore": 2},
                      7, "sim") == {
        "v": 2, "seq": 7, "t": 1.5, "host": "sim", "kind": "instance-started",
        "instance": "a[0]", "data": {"restore": 2, "reason": "restart"}}
    stored = {"t": 69.7, "wall": "2026-11-23T20:23:50.878+00:00", "kind": "fault-inject",
              "fault": "kill-group", "target": "rack=a", "index": 0, "occurrence": 1,
              "at": 14.9}
    assert upgrade_v1(stored, 3) == {
        "v": 2, "seq": 3, "t": 69.7, "host": "spark", "wall": stored["wall"],
        "kind": "fault-injected", "fault": "0.1",
        "data": {"type": "kill-group", "target": "rack=a", "index": 0, "occurrence": 1,
                 "at": 14.9}}
    assert upgrade_v1({"t": 2.0, "event": "fault", "instances": ["a[0]"], "at_event": 40},
                      1, "sim")["data"] == {"instances": ["a[0]"], "at_event": 40,
                                            "type": "crash"}
    # A kind the schema does not know was a protocol's note.
    assert upgrade_v1({"t": 3.0, "event": "snapshot-complete", "snapshot": 4}, 2)["data"] == {
        "name": "snapshot-complete", "data": {"snapshot": 4}}
    assert set(V1_RENAMES.values()) <= set(KINDS)


@pytest.mark.parametrize("run", sorted(p.parent.name for p in FIXTURES.glob("*/events.jsonl")))
def test_stored_v1_runs_read_as_valid_histories(run: str) -> None:
    lines = (FIXTURES / run / "events.jsonl").read_text().splitlines()
    events = read_history(json.loads(line) for line in lines)
    assert len(events) == len(lines) and {e.host for e in events} == {"spark"}
    kinds = {e.kind for e in events}
    assert {"instance-registered", "instance-running", "failure-detected", "instance-started",
            "fault-injected", "fault-step"} <= kinds
    assert not kinds & set(V1_RENAMES)


# Where hosts and the fault layer name a kind literally: each must be declared.
WRITERS = {
    **{f"ftctl/sim/{name}.py": r'self\._log\(\s*"([a-z-]+)"'
       for name in ("host", "striking", "unit_faults", "link_faults", "node_faults", "ports")},
    "ftctl/kernel/coordinator.py": r'\bLog\(\s*"([a-z-]+)"',
    "ftctl/kernel/lifecycle.py": r'\bLog\(\s*"([a-z-]+)"',
    "ftctl/spark/host.py": r'self\.log\(\s*"([a-z-]+)"',
    "chaos/nemesis.py": r'self\._event\(\s*"([a-z-]+)"',
    "ftctl/run/execute.py": r'run_store\.event\(\s*"([a-z-]+)"',
    "ftctl/run/chaos.py": r'store\.event\(\s*"([a-z-]+)"',
    "ftctl/results.py": r'self\.event\(\s*"([a-z-]+)"',
}


@pytest.mark.parametrize("path", sorted(WRITERS))
def test_every_kind_a_host_writes_is_declared(path: str) -> None:
    found = set(re.findall(WRITERS[path], (ROOT / path).read_text()))
    assert found, f"no history writes found in {path}: the pattern is out of date"
    assert found <= set(KINDS), sorted(found - set(KINDS))


def test_every_kind_is_documented_field_by_field() -> None:
    doc = (ROOT / "docs" / "history.md").read_text()
    for kind, spec in KINDS.items():
        section = re.search(rf"^### `{re.escape(kind)}`\n(.*?)(?=^### |\Z)", doc, re.M | re.S)
        assert section, f"docs/history.md has no section for {kind}"
        for name in (*spec.required, *spec.optional):
            assert f"`{name}`" in section.group(1), f"{kind}: field {name} not documented"


def test_a_sim_run_is_framed_by_run_started_and_run_finished_with_its_commits() -> None:
    """run-started before anything else the kernel does, run-finished last; each commit of
    checkpoint's sinks says how many records it made visible, and together they are the
    run's output."""
    host, res = _run("wordcount", "checkpoint", [(0.005, Strike(0, 1, ("count[0]",)))])
    assert res.complete
    kinds = [e.kind for e in res.events]
    assert kinds[0] == "run-started" and kinds[-1] == "run-finished"
    assert res.events[0].data == {"instances": list(host.graph.order)}
    assert res.events[-1].data == {"complete": True, "seconds": round(res.end_time, 4)}
    commits = [e for e in res.events if e.kind == "output-committed"]
    assert commits and {c.data["sink"] for c in commits} == set(host.graph.sinks)
    for sink in host.graph.sinks:
        uptos = [c.data["upto"] for c in commits if c.data["sink"] == sink]
        assert uptos == sorted(uptos)  # commits move forward
    assert sum(c.data["records"] for c in commits) == sum(len(v) for v in res.outputs.values())


def test_a_run_directory_keeps_phase_records_in_its_file_only(tmp_path: Path) -> None:
    # Written as often as a protocol acts (a causal shard's every local snapshot): kept
    # in memory too, they grew the driver with the input.
    from ftctl.results import RunStore

    store = RunStore.create(tmp_path, topology="t", protocol="none")
    h = store.history
    for key in range(3):
        h.write("phase-entered", instance="shard[0]", phase="snapshotting", key=key)
        h.write("phase-left", instance="shard[0]", phase="snapshotting", key=key)
    h.write("node-up", node="w1")
    assert "phase-entered" not in {e.kind for e in h.events}
    assert h.events[-1].kind == "node-up"
    on_disk = [e.kind for e in store.read_history()]
    assert on_disk.count("phase-entered") == 3 and on_disk.count("phase-left") == 3
    assert [e.seq for e in store.read_history()] == list(range(1, len(on_disk) + 1))
    # Without a file nothing is left out: the simulation host's checks read its phases.
    mem = _history()
    mem.write("phase-entered", instance="shard[0]", phase="snapshotting", key=0)
    assert [e.kind for e in mem.events] == ["phase-entered"]
