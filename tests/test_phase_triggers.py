"""``during: PHASE`` faults: they strike while the phase is open, on the simulation host
(asserted from the run's history) and through the nemesis (a fake context); ``target:
phase-holder`` strikes an instance holding it; ``trigger: during-checkpoint`` is
``during: snapshotting``; a phase the protocol never enters is refused in one line."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chaos.nemesis import Nemesis
from chaos.schedule import plan
from ftctl.cli import app
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_scenario
from ftctl.config.scenario import Scenario
from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.runner import Simulator, nominal_duration
from ftctl.sim.scenario import load_sim_scenario
from protocols.registry import PROTOCOLS
from tests.conftest import load
from tests.fakectx import FakeContext

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _write(tmp_path: Path, fault: str, name: str = "phase") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: phase\nfaults:\n  - {fault}\n")
    return path


def _sim_events(path: Path, protocol: str, topology: str = "wordcount",
                seed: int = 1, params: dict[str, object] | None = None) -> list[HistoryEvent]:
    topo = load(topology)
    spec = PROTOCOLS[protocol]
    sc = load_sim_scenario(path, topo, nominal_duration(ExecutionGraph(topo)), [{}, {}],
                           protocol=spec)
    return Simulator(topo, spec, params or {}, scenario=sc).run_one(seed).result.events


def open_at_strikes(events: Sequence[HistoryEvent], phase: str) -> list[set[str | None]]:
    """For each fault injected: the holders of ``phase``'s occurrences open at that
    moment, replayed from the phase-entered/phase-left records (None: the coordinator's)."""
    held: set[tuple[str | None, object, object]] = set()
    out: list[set[str | None]] = []
    for e in events:
        if e.kind in ("phase-entered", "phase-left") and e.data["phase"] == phase:
            occ = (e.instance, e.data["key"], e.data.get("by"))
            (held.add if e.kind == "phase-entered" else held.discard)(occ)
        elif e.kind == "fault-injected":
            out.append({h for h, _, _ in held})
    return out


def struck(e: HistoryEvent) -> str:
    return str(e.data.get("target") or e.data["instances"][0])


SNAPSHOTTING = [("checkpoint", "wordcount"), ("causal", "wordcount"), ("falkirk", "wordcount"),
                ("progressive", "wordcount")]


@pytest.mark.sim
@pytest.mark.parametrize(("protocol", "topology"), SNAPSHOTTING)
def test_during_snapshotting_strikes_the_holder_of_an_open_snapshot(
        protocol: str, topology: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "{type: kill-task, during: snapshotting, count: 2, "
                            "target: phase-holder}")
    events = _sim_events(path, protocol, topology)
    kills = [e for e in events if e.kind == "fault-injected"]
    opened = open_at_strikes(events, "snapshotting")
    assert len(kills) == 2 and len(opened) == 2
    for kill, holders in zip(kills, opened, strict=True):
        assert struck(kill) in holders  # struck inside a snapshot its target had open


@pytest.mark.sim
def test_trigger_during_checkpoint_is_during_snapshotting(tmp_path: Path) -> None:
    alias = _write(tmp_path, "{type: kill-task, trigger: during-checkpoint, count: 1, "
                             "target: 'count[0]'}", "alias")
    events = _sim_events(alias, "checkpoint")
    (kill,) = [e for e in events if e.kind == "fault-injected"]
    assert open_at_strikes(events, "snapshotting")[0]  # a snapshot was open
    spelled = _write(tmp_path, "{type: kill-task, during: snapshotting, count: 1, "
                               "target: 'count[0]'}")
    (same,) = [e for e in _sim_events(spelled, "checkpoint") if e.kind == "fault-injected"]
    assert (same.t, same.data["instances"]) == (kill.t, kill.data["instances"])
    assert [p.during for p in plan(load_scenario(alias), ["count[0]"], 10.0)] == ["snapshotting"]


@pytest.mark.parametrize(("fault", "message"), [
    ("{type: kill-task, during: takeover, target: random}",
     "faults[0].during: checkpoint never enters phase 'takeover' (its phases: recovering, "
     "snapshotting)"),
    ("{type: kill-task, at: 1, target: phase-holder}",
     "target phase-holder goes with 'during' or 'trigger'"),
])
def test_a_phase_the_protocol_never_enters_is_one_line_and_exit_2(
        fault: str, message: str, tmp_path: Path) -> None:
    path = _write(tmp_path, fault)
    res = runner.invoke(app, ["sim", str(ROOT / "topologies/wordcount.yaml"), "-p",
                              "checkpoint", "--scenario", str(path)])
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and str(path) in res.output
    assert message in res.output, res.output


def test_the_sim_refuses_what_chaos_refuses(tmp_path: Path) -> None:
    path = _write(tmp_path, "{type: kill-task, during: purging, target: random}")
    topo = load("wordcount")
    with pytest.raises(ConfigError, match="never enters phase 'purging'"):
        load_sim_scenario(path, topo, 1.0, [{}], protocol=PROTOCOLS["checkpoint"])


# ---------------------------------------------------------------- the nemesis (Spark's path)


@pytest.fixture
def ctx() -> Iterator[FakeContext]:
    c = FakeContext()
    yield c
    c.close()


def _holder_nemesis(ctx: FakeContext, phase: str,
                    events: list[tuple[str, dict[str, object]]]) -> Nemesis:
    sc = Scenario.model_validate({"name": "p", "faults": [
        {"type": "kill-task", "during": phase, "target": "phase-holder", "count": 1}]})
    nemesis = Nemesis(plan(sc, ctx.instances(), 5.0), ctx,
                      lambda kind, **data: events.append((kind, data)), poll=0.005)
    nemesis.start()
    return nemesis


def test_the_nemesis_strikes_the_phase_holder_its_context_names(ctx: FakeContext) -> None:
    ctx.add_task("count[0]")
    holder_pid = ctx.add_task("count[1]")
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = _holder_nemesis(ctx, "takeover", events)
    try:
        time.sleep(0.05)
        assert events == []  # the phase is not open
        ctx.holders["takeover"] = ["count[1]"]
        ctx.phases.add("takeover")
        assert nemesis.wait(timeout=5.0)
    finally:
        nemesis.stop()
    (injected,) = [d for k, d in events if k == "fault-injected"]
    assert injected["target"] == "count[1]"
    deadline = time.monotonic() + 5.0  # SIGKILL lands asynchronously
    while ctx.alive(holder_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ctx.alive(holder_pid)


def test_the_nemesis_reports_a_phase_no_instance_holds(ctx: FakeContext) -> None:
    """An opening held by the kernel alone strikes nothing and uses no occurrence: the
    next opening with a holder is struck (as on the simulation host, one engine)."""
    ctx.add_task("count[0]")
    holder_pid = ctx.add_task("count[1]")
    events: list[tuple[str, dict[str, object]]] = []
    nemesis = _holder_nemesis(ctx, "recovering", events)
    try:
        ctx.recovering = True  # held by the kernel alone: nobody to strike
        assert not nemesis.wait(timeout=0.1)  # its one occurrence is still to come
        assert [k for k, _ in events] == ["fault-error"]
        assert events[0][1]["error"] == "no instance holds recovering"
        ctx.recovering = False
        time.sleep(0.05)
        ctx.holders["recovering"] = ["count[1]"]
        ctx.recovering = True
        assert nemesis.wait(timeout=5.0)
    finally:
        nemesis.stop()
    (injected,) = [d for k, d in events if k == "fault-injected"]
    assert injected["target"] == "count[1]" and injected["occurrence"] == 0
    deadline = time.monotonic() + 5.0  # SIGKILL lands asynchronously
    while ctx.alive(holder_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ctx.alive(holder_pid)


@pytest.mark.sim
def test_during_takeover_strikes_the_unit_serving_a_failed_replicas_slot(
        tmp_path: Path) -> None:
    """A replica killed at 20%: its ring successor takes the slot over; the second fault
    strikes that taker while it serves the slot."""
    path = tmp_path / "takeover.yaml"
    path.write_text("name: takeover\nfaults:\n"
                    "  - {type: kill-task, at: 5, target: 'split[0]'}\n"
                    "  - {type: kill-task, during: takeover, target: phase-holder, count: 1}\n")
    events = _sim_events(path, "replica-ring", "replica-chain")
    first, second = [e for e in events if e.kind == "fault-injected"]
    taken = [e for e in events if e.kind == "phase-entered" and e.data["phase"] == "takeover"]
    assert taken and taken[0].t >= first.t and taken[0].data["key"] == 0  # split[0]'s slot
    (holders,) = open_at_strikes(events, "takeover")[1:]
    assert struck(second) in holders and struck(second) != "split[0]"


# ---------------------------------------------------------------- the conformance kit


def test_the_kit_has_a_phase_triggered_case_for_every_phase_a_protocol_enters() -> None:
    from chaos.plan import phases_of
    from ftctl.conformance.cases import phase_cases

    for protocol in ("lineage", "replica-ring"):  # each case list loads every topology
        cases = phase_cases(protocol)
        assert [c.during for c in cases] == list(phases_of(PROTOCOLS[protocol])), protocol
        assert all(c.name.endswith(f"~during-{c.during}") for c in cases)
    assert {c.topology.stem for c in phase_cases("replica-ring")} == {"replica-chain"}


def _ev(seq: int, kind: str, phase: str, key: int, instance: str | None = None,
        **data: object) -> HistoryEvent:
    return HistoryEvent(seq, 0.0, "sim", kind, {"phase": phase, "key": key, **data}, instance)


def test_the_phase_contract_wants_declared_phases_left_by_the_end_of_a_run() -> None:
    from ftctl.sim.phase_faults import phase_problems

    events = [_ev(1, "phase-entered", "snapshotting", 1, "a"),
              _ev(2, "phase-entered", "snapshotting", 2, "a"),
              _ev(3, "phase-left", "snapshotting", 1, "a"),
              _ev(4, "phase-entered", "recovering", 1, by="kernel"),  # the kernel's own
              _ev(5, "phase-entered", "draining", 7)]
    assert phase_problems(events, ("snapshotting",), complete=True) == {
        "undeclared-phase": 1, "phase-left-open": 2}
    assert phase_problems(events[:3], ("snapshotting",), complete=False) == {}  # stalled


def test_sim_during_refuses_a_phase_the_protocol_never_enters() -> None:
    res = runner.invoke(app, ["sim", str(ROOT / "topologies/wordcount.yaml"), "-p", "none",
                              "--during", "snapshotting"])
    assert res.exit_code == 2
    assert res.output == ("error: --during: none never enters phase 'snapshotting' (its "
                          "phases: recovering)\n")


def test_the_spark_hosts_fault_context_answers_from_the_kernels_phase_set() -> None:
    """``ftctl chaos`` builds its context over the host's ``phases`` (the kernel's set):
    what the nemesis's ``during`` and ``phase-holder`` ask is what the kernel holds."""
    from functools import partial
    from types import SimpleNamespace

    from chaos.hostctx import HostFaultContext
    from ftctl.kernel.phases import Phases
    from ftctl.run.chaos import _phase_holders, _phase_open

    host = SimpleNamespace(phases=Phases())
    ctx = HostFaultContext(clock=lambda: 0.0, instance_ids=["split[0]"], task_pids=dict().get,
                           phase=partial(_phase_open, host), holders=partial(_phase_holders, host))
    assert not ctx.phase_active("takeover") and ctx.phase_holders("takeover") == []
    host.phases.declare("takeover", True, 0, "split[1]")
    assert ctx.phase_active("takeover") and ctx.phase_holders("takeover") == ["split[1]"]
    host.phases.drop_holder("split[1]", "stopped")
    assert not ctx.phase_active("takeover")
