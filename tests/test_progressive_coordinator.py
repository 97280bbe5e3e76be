"""ProgressiveCoordinator driven by hand: literal event sequences in, exact actions out
(progressive spec U2-U5: burst modes, the first plan of Fig. 1, a further failure during
recovery, the return to normal operation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ftctl.config.checks import check_topology
from ftctl.config.topology import Topology
from ftctl.runtime.graph import ExecutionGraph
from protocols.contract import (
    Capacity,
    CapacityChanged,
    Control,
    DeclarePhase,
    DiscardSnapshots,
    FailureDetected,
    GraphView,
    InstanceId,
    NodeView,
    Note,
    Persisted,
    ReportIn,
    Restart,
    Stop,
)
from protocols.progressive.burst import Mode
from protocols.progressive.coordinator import ProgressiveCoordinator
from protocols.progressive.messages import (
    SINK_COUNTS,
    SINK_DELTAS,
    Checkpointed,
    Finished,
    Init,
    Normal,
    Ready,
    Recover,
    Resend,
    Trim,
)
from protocols.progressive.params import ProgressiveParams

# Paper Fig. 1: Q1 = out2 over {src, o1, o2}, Q2 = out3 over {src, o1, o3}; o1 shared.
FIG1 = {
    "name": "fig1",
    "operators": [
        {"name": "src", "type": "source.text"},
        {"name": "o1", "type": "map", "function": "identity", "parallelism": 2},
        {"name": "o2", "type": "sink"},
        {"name": "o3", "type": "sink", "parallelism": 2},
    ],
    "edges": [{"from": "src", "to": "o1", "partition": "round-robin"},
              {"from": "o1", "to": "o2", "partition": "hash"},
              {"from": "o1", "to": "o3", "partition": "hash"}],
}
Iid = InstanceId

# What a restarted sink reads: the base of its visible counts and every delta after it.
SINK_REFS = (SINK_COUNTS, *SINK_DELTAS)


def graph() -> GraphView:
    return GraphView(ExecutionGraph(check_topology(Topology.model_validate(FIG1))))


@dataclass
class View:
    graph: GraphView
    now: float = 0.0
    capacity: Capacity = field(default_factory=Capacity)
    phases: frozenset[str] = frozenset()

    def status(self, i: str) -> str:
        return "running"

    def incarnation(self, i: str) -> int:
        return 1

    def unit_of(self, slot: str) -> str:
        return slot

    def stored(self, i: str) -> tuple[int, ...]:
        return ()

    def committed(self, sink: str) -> int:
        return 0


def cap(*free: int, placed: Mapping[InstanceId, str] | None = None) -> Capacity:
    return Capacity(tuple(NodeView(f"n{j}", slots=f, used=0) for j, f in enumerate(free)),
                    dict(placed or {}))


def persist_all(c: ProgressiveCoordinator, v: View, k: int,
                who: list[str] | None = None) -> list[Any]:
    acts: list[Any] = []
    for i in who or list(c.graph.order):
        acts += c.handle(ReportIn(Iid(i), 1, Persisted(k), v.now), v)
    return no_phases(acts)


def no_phases(acts: list[Any]) -> list[Any]:
    """The actions but the phase declarations (tests/test_phase_triggers.py has those)."""
    return [a for a in acts if not isinstance(a, DeclarePhase)]


def coordinator(cls: type[ProgressiveCoordinator] = ProgressiveCoordinator,
                **params: Any) -> tuple[ProgressiveCoordinator, View]:
    g = graph()
    return cls(g, ProgressiveParams(**params)), View(g)


def notes(acts: list[Any], kind: str) -> list[Mapping[str, Any]]:
    return [a.data for a in acts if isinstance(a, Note) and a.kind == kind]


def test_normal_checkpoints_trim_the_sources() -> None:
    c, v = coordinator()
    assert [q.name for q in c.queries] == ["o2", "o3"]
    acts = persist_all(c, v, 1, ["src[0]", "o1[0]", "o1[1]", "o2[0]", "o3[0]"])
    assert acts == []
    acts = persist_all(c, v, 1, ["o3[1]"])
    assert acts == [Note("snapshot-complete", {"snapshot": 1}), Control(Iid("src[0]"), Trim(1))]


def test_u3_first_plan_of_fig1_with_three_free_slots() -> None:
    check_u3()


def check_u3(cls: type[ProgressiveCoordinator] = ProgressiveCoordinator) -> None:
    c, v = coordinator(cls, burst_unit="instances")
    persist_all(c, v, 1)
    failed = frozenset(Iid(i) for i in ("o1[0]", "o1[1]", "o2[0]", "o3[0]", "o3[1]"))
    v.capacity = cap(0)
    acts = no_phases(c.handle(FailureDetected(failed, 5.0), v))
    assert c.mode is Mode.PROGRESSIVE and c.gen == 1 and c.k == 1
    order = ["src[0]", "o1[0]", "o1[1]", "o2[0]", "o3[0]", "o3[1]"]
    assert acts[0] == Stop(("o1[0]", "o1[1]", "o2[0]", "o3[0]", "o3[1]"))
    assert acts[1:7] == [DiscardSnapshots(Iid(i), after=1) for i in order]
    assert notes(acts, "rollback") == [{"failed": order[1:], "snapshot": 1, "gen": 1,
                                        "mode": "progressive", "burst": True}]
    # Only the survivor rolls back, by control; nothing fits yet, so nothing starts.
    assert [a for a in acts if isinstance(a, Control)] == \
        [Control(Iid("src[0]"), Recover(1, 1, "progressive"))]
    assert not [a for a in acts if isinstance(a, Restart)]
    assert notes(acts, "query-failed") == [{"query": "o2", "t": 0.0}, {"query": "o3", "t": 0.0}]
    v.capacity = cap(3)
    acts = c.handle(CapacityChanged(v.capacity, 6.0), v)
    init = Init(1, "progressive", 1)
    assert [a for a in acts if isinstance(a, Restart)] == [
        Restart(Iid(i), restore=1, extra=extra, init=init, priority=0.5, release=None)
        for i, extra in (("o1[0]", ()), ("o1[1]", ()), ("o2[0]", SINK_REFS))]
    assert notes(acts, "plan") == [{"mode": "progressive", "why": "capacity", "free": 3,
                                    "picks": [{"query": "o2", "pd": 0.5, "cost": 3}],
                                    "started": ["o1[0]", "o1[1]", "o2[0]"]}]
    # The three are not placed yet: the same capacity event again starts nothing more.
    assert c.handle(CapacityChanged(v.capacity, 6.5), v) == []
    # Placed, and a node with 2 slots comes: o3 (now PD 1/2, cost 2) goes.
    placed = {Iid("o1[0]"): "n0", Iid("o1[1]"): "n0", Iid("o2[0]"): "n0"}
    v.capacity = Capacity((NodeView("n0", 3, 3), NodeView("n1", 2, 0)), placed)
    acts = c.handle(CapacityChanged(v.capacity, 9.0), v)
    assert [a.instance for a in acts if isinstance(a, Restart)] == ["o3[0]", "o3[1]"]
    assert notes(acts, "plan")[0]["picks"] == [{"query": "o3", "pd": 0.5, "cost": 2}]


def ready(c: ProgressiveCoordinator, v: View, i: str, resume: tuple[tuple[int, int], ...] = ()
          ) -> list[Any]:
    return c.handle(ReportIn(Iid(i), 2, Ready(resume), v.now), v)


def test_ready_asks_running_upstreams_to_resend_and_recovers_queries() -> None:
    check_ready()


def check_ready(cls: type[ProgressiveCoordinator] = ProgressiveCoordinator) -> None:
    c, v = coordinator(cls, burst_unit="instances")
    persist_all(c, v, 1)
    c.handle(FailureDetected(frozenset({Iid("o1[0]"), Iid("o2[0]")}), 5.0), v)
    assert c.starting == {"o1[0]", "o2[0]"}  # no capacity view: room for all
    ch_src_o1 = c.graph.inputs("o1[0]")[0]
    ch_o1_o2 = c.graph.inputs("o2[0]")
    v.now = 7.0
    acts = ready(c, v, "o2[0]", tuple((ch, 4) for ch in ch_o1_o2))
    # o1[0] is starting (it may run already, its Ready on the way); o1[1] is a survivor.
    assert [a for a in acts if isinstance(a, Control)] == \
        [Control(Iid("o1[0]"), Resend(ch_o1_o2[0], 4)),
         Control(Iid("o1[1]"), Resend(ch_o1_o2[1], 4))]
    assert notes(acts, "query-recovered") == []
    acts = ready(c, v, "o1[0]", ((ch_src_o1, 9),))
    assert acts[0] == Control(Iid("src[0]"), Resend(ch_src_o1, 9))
    assert notes(acts, "query-recovered") == [{"query": "o2", "t": 7.0},
                                              {"query": "o3", "t": 7.0}]


def test_u4_failure_during_progressive_recovery_restores_only_the_new_one() -> None:
    c, v = coordinator(burst_unit="instances")
    persist_all(c, v, 2)
    c.handle(FailureDetected(frozenset({Iid("o1[0]"), Iid("o3[0]")}), 5.0), v)
    assert c.mode is Mode.PROGRESSIVE and c.gen == 1
    persist_all(c, v, 3, ["src[0]", "o1[1]"])  # survivors go on with P3
    acts = c.handle(FailureDetected(frozenset({Iid("o3[1]")}), 30.0), v)
    assert acts[0] == Stop((Iid("o3[1]"),))
    assert not [a for a in acts if isinstance(a, Control | DiscardSnapshots)]
    assert notes(acts, "failed-during-recovery") == [{"failed": ["o3[1]"], "snapshot": 2}]
    assert [a for a in acts if isinstance(a, Restart)] == [
        Restart(Iid("o3[1]"), restore=2, extra=SINK_REFS, init=Init(1, "progressive", 2),
                priority=1.0, release=None)]
    assert c.gen == 1 and c.k == 2


def test_u2_blocking_then_a_second_node_makes_it_progressive() -> None:
    c, v = coordinator(burst_window=10.0, burst_threshold=1)
    persist_all(c, v, 1)
    acts = c.handle(FailureDetected(frozenset({Iid("o3[0]")}), 1.0, nodes=frozenset({"n1"})), v)
    assert c.mode is Mode.BLOCKING and notes(acts, "rollback")[0]["gen"] == 1
    acts = c.handle(FailureDetected(frozenset({Iid("o2[0]")}), 4.0, nodes=frozenset({"n2"})), v)
    assert c.mode is Mode.PROGRESSIVE
    assert notes(acts, "rollback") == [{"failed": ["o2[0]"], "snapshot": 1, "gen": 2,
                                        "mode": "progressive", "burst": True}]
    # Everyone not failed rolls back again, the first replacement included.
    assert [a.instance for a in acts if isinstance(a, Control)] == \
        ["src[0]", "o1[0]", "o1[1]", "o3[0]", "o3[1]"]
    # Far apart: blocking twice.
    c, v = coordinator(burst_window=10.0, burst_threshold=1)
    c.handle(FailureDetected(frozenset({Iid("o3[0]")}), 0.0, nodes=frozenset({"n1"})), v)
    c.handle(FailureDetected(frozenset({Iid("o2[0]")}), 12.0, nodes=frozenset({"n2"})), v)
    assert c.mode is Mode.BLOCKING and c.gen == 2


def test_blocking_mode_waits_for_room_for_everything() -> None:
    c, v = coordinator()
    v.capacity = cap(1)
    acts = c.handle(FailureDetected(frozenset({Iid("o3[0]"), Iid("o3[1]")}), 1.0,
                                    nodes=frozenset({"n9"})), v)
    assert c.mode is Mode.BLOCKING and not [a for a in acts if isinstance(a, Restart)]
    v.capacity = cap(1, 1)
    acts = c.handle(CapacityChanged(v.capacity, 2.0), v)
    assert [a.instance for a in acts if isinstance(a, Restart)] == ["o3[0]", "o3[1]"]


def test_u5_normal_only_after_a_checkpoint_with_nothing_pending() -> None:
    c, v = coordinator(burst_unit="instances")
    persist_all(c, v, 1)
    v.capacity = cap(0)
    c.handle(FailureDetected(frozenset({Iid("o2[0]"), Iid("o3[0]")}), 5.0), v)
    survivors = ["src[0]", "o1[0]", "o1[1]", "o3[1]"]
    # P2 persisted by the survivors cannot complete: the failed are pending.
    assert persist_all(c, v, 2, survivors) == []
    v.capacity = cap(2)
    c.handle(CapacityChanged(v.capacity, 6.0), v)
    ready(c, v, "o2[0]")
    assert not notes(persist_all(c, v, 2, ["o2[0]"]), "recovery-complete")
    v.now = 9.0
    ready(c, v, "o3[0]")
    acts = persist_all(c, v, 2, ["o3[0]"])
    assert acts[0] == Note("snapshot-complete", {"snapshot": 2})
    assert [a for a in acts if isinstance(a, Control)] == \
        [Control(Iid(i), Normal(2)) for i in c.graph.order]
    assert notes(acts, "recovery-complete") == [{"k": 1, "m": 2, "mode": "progressive",
                                                 "seconds": 4.0}]
    assert c.mode is Mode.NORMAL
    # Back to normal: the next checkpoint trims the sources again.
    assert persist_all(c, v, 3)[1] == Control(Iid("src[0]"), Trim(3))


def test_r20_episode_ends_only_past_what_a_partition_failed_during_recovery_sent() -> None:
    """o1[0] fails (burst: progressive from P1); the survivor src[0] goes on, sends and
    persists P2 and P3, then fails too. o1 accepted src's output up to P4, so cp(P2) and
    cp(P3), completed by the replacement's replay in mini-batch order, must not end the
    episode: Normal there renumbers src's stream and o1 drops the rest as duplicates
    (conformance, replica-chain +all-faults, seed 6: 79 records lost). cp(P4) ends it."""
    c, v = coordinator(burst_unit="instances", burst_threshold=0)
    persist_all(c, v, 1)
    c.handle(FailureDetected(frozenset({Iid("o1[0]")}), 5.0), v)
    ready(c, v, "o1[0]")
    assert c.mode is Mode.PROGRESSIVE and c.k == 1
    persist_all(c, v, 2, ["src[0]"])
    persist_all(c, v, 3, ["src[0]"])
    v.stored = lambda i: (0, 1, 2, 3) if i == "src[0]" else (1,)  # type: ignore[method-assign]
    acts = c.handle(FailureDetected(frozenset({Iid("src[0]")}), 8.0), v)
    assert notes(acts, "failed-during-recovery") == [{"failed": ["src[0]"], "snapshot": 1}]
    v.stored = lambda i: (1,)  # type: ignore[method-assign]
    ready(c, v, "src[0]")
    assert c.recovered()
    for k in (2, 3):
        acts = persist_all(c, v, k)
        assert acts == [Note("snapshot-complete", {"snapshot": k})]
    assert c.mode is Mode.PROGRESSIVE
    v.now = 12.0
    acts = persist_all(c, v, 4)
    assert [a for a in acts if isinstance(a, Control)] == \
        [Control(Iid(i), Normal(4)) for i in c.graph.order]
    assert notes(acts, "recovery-complete") == [{"k": 1, "m": 4, "mode": "progressive",
                                                 "seconds": 7.0}]
    assert c.mode is Mode.NORMAL


def test_r20_a_rollback_forgets_what_the_failed_had_sent() -> None:
    """Sent before a global rollback is of an older generation: the horizon is the new k."""
    c, v = coordinator(burst_unit="instances", burst_threshold=5)
    persist_all(c, v, 1)
    v.stored = lambda i: (0, 1, 2, 3)  # type: ignore[method-assign]
    c.handle(FailureDetected(frozenset({Iid("o3[0]")}), 5.0), v)
    assert c.mode is Mode.BLOCKING and c.horizon == 1
    v.now = 5.0
    ready(c, v, "o3[0]")
    acts = persist_all(c, v, 2)
    assert notes(acts, "recovery-complete") == [{"k": 1, "m": 2, "mode": "blocking",
                                                 "seconds": 0.0}]


def test_a_report_from_before_the_rollback_completes_no_checkpoint() -> None:
    """o2[0] persists P2 in generation 0 and reports it; o3[0] fails and everyone rolls
    back to P1 (generation 1, its P2 discarded) before that report arrives. Counted, it
    completed cp(P2) without o2[0]'s part, and o2[0] failing next was restarted from a
    snapshot 2 it did not have (conformance, progressive-small, every-failure-progressive,
    seed 71: KeyError in the store)."""
    c, v = coordinator(burst_unit="instances", burst_threshold=0)
    persist_all(c, v, 1)
    c.handle(FailureDetected(frozenset({Iid("o3[0]")}), 5.0), v)
    assert c.gen == 1 and c.k == 1
    ready(c, v, "o3[0]")
    assert no_phases(c.handle(ReportIn(Iid("o2[0]"), 1, Checkpointed(2, 0), v.now), v)) == []
    others = [i for i in c.graph.order if i != "o2[0]"]
    for i in others:
        acts = c.handle(ReportIn(Iid(i), 1, Checkpointed(2, 1), v.now), v)
        assert not notes(acts, "snapshot-complete"), i
    assert c.cps.complete == 1
    acts = c.handle(ReportIn(Iid("o2[0]"), 1, Checkpointed(2, 1), v.now), v)
    assert notes(acts, "snapshot-complete") == [{"snapshot": 2}]
    assert c.cps.complete == 2


def test_priorities_param_overrides_and_is_checked() -> None:
    c, _ = coordinator(priorities={"o3": 4.0})
    assert [(q.name, q.priority) for q in c.queries] == [("o2", 1.0), ("o3", 4.0)]
    assert ProgressiveParams(priorities={"nope": 1.0}).check(graph()) == \
        ["priorities.nope: no sink operator named 'nope' (sinks: o2, o3)"]


def test_an_end_of_stream_report_from_before_the_rollback_is_ignored() -> None:
    """o2[0] passes end of stream in generation 0 and reports it; o3[0] fails and everyone
    rolls back to P1 (generation 1) before the report arrives. o2[0] will end again from
    P1; counting the old report would take it for ended in this generation."""
    c, v = coordinator(burst_unit="instances", burst_threshold=0)
    persist_all(c, v, 1)
    c.handle(FailureDetected(frozenset({Iid("o3[0]")}), 5.0), v)
    assert c.gen == 1
    assert c.handle(ReportIn(Iid("o2[0]"), 1, Finished(0), v.now), v) == []
    assert "o2[0]" not in c.ended
    c.handle(ReportIn(Iid("o2[0]"), 1, Finished(1), v.now), v)
    assert "o2[0]" in c.ended
