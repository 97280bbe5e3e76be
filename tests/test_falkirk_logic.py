"""FalkirkInstance and FalkirkCoordinator driven by hand: literal events, exact actions.

The graph is wordcount: lines[0] -0,1-> split[0..1] -2,3,4,5-> count[0..1] -6,7-> out[0]
(channel ids as numbered by the execution graph).
"""

from __future__ import annotations

from typing import Any, cast

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from protocols.contract.actions import (
    CommitOutput,
    Control,
    DeclarePhase,
    DiscardSnapshots,
    Note,
    Persist,
    Report,
    Restart,
    RollBack,
    Send,
    StageOutput,
    Stop,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    FailureDetected,
    MarkerIn,
    ReportIn,
    SourceReady,
    Started,
)
from protocols.contract.names import InstanceId
from protocols.contract.view import ClusterView, GraphView
from protocols.falkirk.coordinator import FalkirkCoordinator
from protocols.falkirk.frontier import TOP
from protocols.falkirk.instance import FalkirkInstance
from protocols.falkirk.messages import (
    Available,
    Committed,
    Pause,
    Paused,
    Ready,
    Replay,
    Resume,
    Rewind,
    Setup,
    TrimLog,
)
from protocols.falkirk.params import FalkirkParams
from tests.conftest import load

I = InstanceId  # noqa: E741
PARAMS = FalkirkParams(policy="split=log,count=lazy:2")
VIEW = cast(ClusterView, None)  # the coordinator never reads the view


def graph() -> ExecutionGraph:
    return ExecutionGraph(load("wordcount"))


def instance(iid: str, setup: Setup, params: FalkirkParams = PARAMS) -> FalkirkInstance:
    eg = graph()
    cores = {I(iid): InstanceCore(eg, iid)}
    inst = FalkirkInstance(GraphView(eg).instance(iid), cores, params)
    inst.handle(Started(I(iid), 1, "initial", init=setup), 0.0)
    return inst


def batch(t: int, j: int, *words: str) -> Batch:
    return Batch([(w, 1, 0) for w in words], meta=(t, j))


def sends(acts: list[Any]) -> list[tuple[int, Any]]:
    """Sends as (channel, (epoch, j) or ("close", t))."""
    return [(a.channel, a.msg.meta if isinstance(a.msg, Batch) else (a.msg.kind, a.msg.id))
            for a in acts if isinstance(a, Send)]


# ---------------------------------------------------------------- instance


def test_source_cuts_epochs_round_robins_by_batch_index_and_closes() -> None:
    src = instance("lines[0]", Setup(0, -1, last_epoch=9, epoch_every=2, hold=False))
    first = src.handle(SourceReady(I("lines[0]"), 0.0), 0.0)
    second = src.handle(SourceReady(I("lines[0]"), 0.0), 0.0)
    third = src.handle(SourceReady(I("lines[0]"), 0.0), 0.0)
    assert sends(first) == [(0, (0, 0))]
    assert sends(second) == [(1, (0, 0)), (0, ("close", 0)), (1, ("close", 0))]
    assert sends(third) == [(0, (1, 0))]
    core = src.core
    assert first[0].msg.records == core.gen(0, 100) if core.gen else False
    # a regeneration of epoch 0 for channel 1 yields the same batch at the same place
    again = src.handle(ControlIn(Replay(0, channel=1, after=-1, epochs=(0,))), 0.0)
    assert sends(again) == [(1, (0, 0)), (1, ("close", 0))]
    assert again[0].msg.records == second[0].msg.records


def test_stateful_instance_aligns_on_epochs_and_checkpoints_lazily() -> None:
    cnt = instance("count[0]", Setup(0, -1, last_epoch=9, epoch_every=2, hold=False))
    ev = lambda ch, b: cnt.handle(BatchIn(I("count[0]"), ch, b), 0.0)  # noqa: E731
    close = lambda ch, t: cnt.handle(MarkerIn(I("count[0]"), ch, Marker("close", t)), 0.0)  # noqa: E731
    assert sends(ev(2, batch(0, 0, "a"))) == [(6, (0, 0))]
    assert ev(2, batch(1, 0, "a")) == []  # epoch 1 waits for epoch 0 to close everywhere
    assert ev(2, batch(0, 0, "a")) == []  # a batch already received (R10)
    assert close(2, 0) == []
    done0 = close(4, 0)  # epoch 0 complete: lazy:2 takes no checkpoint at 0
    assert sends(done0) == [(6, ("close", 0)), (6, (1, 0))]  # then epoch 1's batch runs
    assert not [a for a in done0 if isinstance(a, (Persist, Report))]
    assert done0[1].msg.records == [("a", 2, 0)]  # the count went on from epoch 0
    close(2, 1)
    done1 = close(4, 1)
    # snapshotting is open from the checkpoint's Persist until the coordinator has it
    assert done1[0] == DeclarePhase("snapshotting", True, 1)
    done1 = done1[1:]
    assert [type(a).__name__ for a in done1] == ["Persist", "Report", "Send"]
    assert done1[0].ref == 5 and done1[1].msg == Available(1, "checkpointed", False)
    assert ev(4, batch(1, 3, "z")) == []  # epoch 1 is closed on channel 4: dropped


def test_logger_pauses_replays_its_log_and_trims_it() -> None:
    split = instance("split[0]", Setup(0, -1, last_epoch=9, epoch_every=2, hold=False))
    out = split.handle(BatchIn(I("split[0]"), 0, Batch([(0, "u x", 0)], meta=(0, 0))), 0.0)
    assert sends(out) == [(2, (0, 0)), (3, (0, 0))]  # "u" hashes to count[0], "x" to [1]
    done = split.handle(MarkerIn(I("split[0]"), 0, Marker("close", 0)), 0.0)
    assert isinstance(done[0], Persist) and done[0].ref == 4  # the log segment of 0
    assert done[1] == Report(Available(0, "logged", True))
    paused = split.handle(ControlIn(Pause(1)), 0.0)
    assert paused == [Report(Paused(1, completed=0, consumed={0: 0}, closed={0: 0},
                                    sent={2: 0, 3: 0}))]
    assert split.handle(BatchIn(I("split[0]"), 0, Batch([(1, "z", 0)], meta=(1, 0))), 0) == []
    replay = split.handle(ControlIn(Replay(1, channel=3, after=-1, epochs=(0,))), 0.0)
    assert sends(replay) == [(3, (0, 0)), (3, ("close", 0))]
    assert replay[0].msg.records == out[1].msg.records
    resumed = split.handle(ControlIn(Resume(1)), 0.0)  # the buffered batch runs now
    assert sends(resumed) == [(3, (1, 0))]
    split.handle(ControlIn(TrimLog(3, 0)), 0.0)
    again = split.handle(ControlIn(Replay(2, channel=3, after=-1, epochs=(0,))), 0.0)
    assert sends(again) == [(3, ("close", 0))]  # the trimmed epoch is no longer logged


def test_sink_stages_each_epoch_once_every_input_closed_it_and_rewinds_a_channel() -> None:
    sink = instance("out[0]", Setup(0, -1, last_epoch=9, epoch_every=2, hold=False))
    put = lambda ch, b: sink.handle(BatchIn(I("out[0]"), ch, b), 0.0)  # noqa: E731
    close = lambda ch, t: sink.handle(MarkerIn(I("out[0]"), ch, Marker("close", t)), 0.0)  # noqa: E731
    put(6, batch(0, 0, "a"))
    put(7, batch(0, 0, "b"))
    assert close(6, 0) == []
    assert close(7, 0) == [StageOutput(I("out[0]"), 0, [("a", 1), ("b", 1)]),
                           Report(Committed(0))]
    put(6, batch(1, 0, "c"))
    put(7, batch(1, 0, "d"))
    # channel 7's sender rolled back to 0: its epoch-1 part is void, channel 6's stays
    assert sink.handle(ControlIn(Rewind(1, {7: 0})), 0.0) == [Report(Ready(1))]
    # the re-executed sender's epoch 1 arrives while the sink is held: nothing moves
    assert put(7, batch(1, 0, "d2")) == [] and close(7, 1) == [] and close(6, 1) == []
    assert sink.handle(ControlIn(Resume(1)), 0.0) == [
        StageOutput(I("out[0]"), 1, [("c", 1), ("d2", 1)]), Report(Committed(1))]


# ---------------------------------------------------------------- coordinator


def coordinator() -> FalkirkCoordinator:
    return FalkirkCoordinator(GraphView(graph()), PARAMS)


def report(co: FalkirkCoordinator, iid: str, msg: Any) -> list[Any]:
    return co.handle(ReportIn(I(iid), 1, msg, 0.0), VIEW)


def run_to_epoch_3(co: FalkirkCoordinator) -> list[Any]:
    """Splits logged 0..4, counts checkpointed 1 and 3, the sink committed 0..3."""
    acts: list[Any] = []
    for t in range(5):
        for s in ("split[0]", "split[1]"):
            acts += report(co, s, Available(t, "logged", True))
    for t in (1, 3):
        for c in ("count[0]", "count[1]"):
            acts += report(co, c, Available(t, "checkpointed"))
    for t in range(4):
        acts += report(co, "out[0]", Committed(t))
    return acts


def test_initial_plan_starts_everything_with_the_epoch_shape() -> None:
    co = coordinator()
    assert co.initial(VIEW) == [
        Restart(I(i), init=Setup(0, -1, last_epoch=9, epoch_every=2, hold=False))
        for i in ("lines[0]", "split[0]", "split[1]", "count[0]", "count[1]", "out[0]")]


def test_commits_per_sink_and_collects_below_the_low_watermark() -> None:
    co = coordinator()
    acts = run_to_epoch_3(co)
    assert [a for a in acts if isinstance(a, CommitOutput)] == [
        CommitOutput(I("out[0]"), t) for t in range(4)]
    # count: checkpoint 1 (ref 5) goes once lw reaches 3, the one at 3 (ref 9) stays
    discards = [a for a in acts if isinstance(a, DiscardSnapshots)]
    # the sink's commits of 1 and 3 lift lw: segments 0..1 (refs 4, 6) then 2..3 go,
    # checkpoint 1 (ref 5) goes once lw reaches 3; the state at lw itself (ref 9) stays
    assert discards == [
        *(DiscardSnapshots(I(i), below=7) for i in ("split[0]", "split[1]")),
        *(DiscardSnapshots(I(i), below=5) for i in ("count[0]", "count[1]")),
        *(DiscardSnapshots(I(i), below=11) for i in ("split[0]", "split[1]")),
        *(DiscardSnapshots(I(i), below=9) for i in ("count[0]", "count[1]"))]
    trims = [a for a in acts if isinstance(a, Control) and isinstance(a.msg, TrimLog)]
    assert trims[-4:] == [Control(I("split[0]"), TrimLog(ch, 3)) for ch in (2, 3)] + [
        Control(I("split[1]"), TrimLog(ch, 3)) for ch in (4, 5)]
    assert co.lw == {"lines[0]": TOP, "split[0]": 4, "split[1]": 4, "count[0]": 3,
                     "count[1]": 3, "out[0]@6": 3, "out[0]@7": 3}


def test_a_failed_shard_behind_a_firewall_restarts_alone() -> None:
    co = coordinator()
    run_to_epoch_3(co)
    acts = co.handle(FailureDetected(frozenset({I("count[1]")}), 0.0), VIEW)
    live = ("lines[0]", "split[0]", "split[1]", "count[0]", "out[0]")
    assert acts == [Stop((I("count[1]"),))] + [Control(I(i), Pause(1)) for i in live]
    assert report(co, "lines[0]", Paused(1, 5, {}, {}, {0: 5, 1: 5})) == []
    for s, ins, outs in (("split[0]", 0, (2, 3)), ("split[1]", 1, (4, 5))):
        assert report(co, s, Paused(1, 4, {ins: 5}, {ins: 4}, dict.fromkeys(outs, 5))) == []
    assert report(co, "count[0]", Paused(1, 4, {2: 5, 4: 5}, {2: 4, 4: 4}, {6: 5})) == []
    plan = report(co, "out[0]", Paused(1, 3, {6: 5, 7: 4}, {6: 4, 7: 3}, {}))
    restart, rewind, note = plan
    assert restart == Restart(I("count[1]"), restore=9,
                              init=Setup(1, 3, last_epoch=9, epoch_every=2, hold=True))
    assert rewind == Control(I("out[0]"), Rewind(1, {7: 3}))
    assert isinstance(note, Note) and note.kind == "falkirk-rollback"
    assert note.data["restarted"] == ["count[1]"] and note.data["rolled_back"] == []
    assert report(co, "count[1]", Ready(1)) == []
    resume = report(co, "out[0]", Ready(1))
    assert resume == [
        Control(I("split[0]"), Replay(1, channel=3, after=3, epochs=(4, 5))),
        Control(I("split[1]"), Replay(1, channel=5, after=3, epochs=(4, 5))),
        *(Control(I(i), Resume(1)) for i in ("lines[0]", "split[0]", "split[1]",
                                             "count[0]", "count[1]", "out[0]"))]


def ephemeral_run() -> FalkirkCoordinator:
    """Default policies but count=lazy:2: the splits are ephemeral (no firewall)."""
    co = FalkirkCoordinator(GraphView(graph()), FalkirkParams(policy="count=lazy:2",
                                                              rollback="in-place"))
    for t in range(5):
        for s in ("split[0]", "split[1]"):
            report(co, s, Available(t, "completed"))
    for t in (1, 3):
        for c in ("count[0]", "count[1]"):
            report(co, c, Available(t, "checkpointed"))
    for t in range(4):
        report(co, "out[0]", Committed(t))
    return co


def pause_all(co: FalkirkCoordinator, r: int, skip: tuple[str, ...] = ()) -> list[Any]:
    reps = {"lines[0]": Paused(r, 5, {}, {}, {0: 5, 1: 5}),
            "split[0]": Paused(r, 4, {0: 5}, {0: 4}, {2: 5, 3: 5}),
            "split[1]": Paused(r, 4, {1: 5}, {1: 4}, {4: 5, 5: 5}),
            "count[0]": Paused(r, 4, {2: 5, 4: 5}, {2: 4, 4: 4}, {6: 5}),
            "out[0]": Paused(r, 3, {6: 5, 7: 4}, {6: 4, 7: 3}, {})}
    acts: list[Any] = []
    for i, rep in reps.items():
        if i not in skip:
            acts += report(co, i, rep)
    return acts


def test_without_a_firewall_live_siblings_roll_back_in_place() -> None:
    co = ephemeral_run()
    co.handle(FailureDetected(frozenset({I("count[1]")}), 0.0), VIEW)
    plan = pause_all(co, 1)
    assert plan[:5] == [
        RollBack(I("split[0]"), to=3), RollBack(I("split[1]"), to=3),
        RollBack(I("count[0]"), to=3, restore=9),
        Restart(I("count[1]"), restore=9,
                init=Setup(1, 3, last_epoch=9, epoch_every=2, hold=True)),
        Control(I("out[0]"), Rewind(1, {6: 3, 7: 3}))]
    acts: list[Any] = []
    for i in ("split[0]", "split[1]", "count[0]", "count[1]", "out[0]"):
        acts += report(co, i, Ready(1))
    # the live source regenerates what it had sent beyond 3, then everyone resumes
    assert acts == [Control(I("lines[0]"), Replay(1, channel=ch, after=3, epochs=(4, 5)))
                    for ch in (0, 1)] + [
        Control(I(i), Resume(1)) for i in ("lines[0]", "split[0]", "split[1]", "count[0]",
                                           "count[1]", "out[0]")]


def test_a_failure_during_recovery_starts_a_new_round_over_the_union() -> None:
    co = ephemeral_run()
    co.handle(FailureDetected(frozenset({I("count[1]")}), 0.0), VIEW)
    pause_all(co, 1)
    # count[0] dies while count[1]'s restart is not running yet: that one counts as failed
    acts = co.handle(FailureDetected(frozenset({I("count[0]")}), 0.0), VIEW)
    assert acts == [Stop((I("count[0]"),))] + [
        Control(I(i), Pause(2)) for i in ("lines[0]", "split[0]", "split[1]", "out[0]")]
    assert report(co, "count[1]", Ready(1)) == []  # a stale round's answer
    plan = pause_all(co, 2, skip=("count[0]",))
    restarts = [a for a in plan if isinstance(a, Restart)]
    assert restarts == [Restart(I(c), restore=9, init=Setup(2, 3, last_epoch=9, epoch_every=2,
                                                            hold=True))
                        for c in ("count[0]", "count[1]")]
