"""Where a replacement resumes each child: at 1 + the child's level-1 entry (spec R1, R5).

The plan's resume point per channel is 1 + the child's level-1 entry t_j, a sender time
(payload logs are addressed by it, spec D5), for sources too, whose hash or round-robin
output skips channels; ``causal-replay`` records both next to each other. A resume point
one batch early or late breaks the equality."""

from __future__ import annotations

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.runner import Simulator
from protocols.causal.instance import RESUME, CausalInstance
from protocols.causal.messages import CausalInit, ResendTo
from protocols.causal.params import CausalParams
from protocols.causal.recovery import CausalIncomplete
from protocols.contract.actions import Send
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, Started
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.registry import PROTOCOLS
from tests.conftest import load
from tests.test_causal_sim import _run

pytestmark = pytest.mark.sim

# sharder[0] killed at event 680 (seed 4): what each shard had seen of it, by its clock.
SEEN = [13, 12, 13, 13, 12, 12, 13, 13, 13, 13, 13, 13, 13, 11, 12, 12, 13, 13, 13, 13]


def test_the_stateless_sharder_restarts_at_t_star_and_resumes_each_shard_one_past_what_it_saw(
) -> None:
    result, ok = _run("causal", FailureSchedule([Strike(680, 1, ("sharder[0]",))]))
    assert ok and result.complete
    [plan] = [e for e in result.events if e.note == "causal-replay"]
    assert plan.payload["t"] == {f"shard[{i}]": t for i, t in enumerate(SEEN)}
    assert plan.payload["stateless"]
    # Each shard's newest local snapshot holds sharder B-time 10 or 11: a shard may
    # restore it and ask for everything after it again, so B' starts at the lowest (spec
    # T2/T3's g), below the level-1 entries (11 to 13: the sharder is quiet, rule N6, so
    # a shard's view of it lags where its events sent that shard nothing).
    assert plan.payload["floor"] == {f"shard[{i}]": 11 if i in (9, 13, 14, 15, 18) else 10
                                     for i in range(20)}
    assert plan.payload["t_min"] == 10 and plan.payload["s"] == 10
    assert plan.payload["tstar"] == ("sharder[0]", 10, (("votes[0]", 10, ()),))
    # R = T*: the source resends from 1 + T*[votes[0]].
    assert plan.payload["parents"] == {"0": 11}
    assert plan.payload["children"] == {f"shard[{i}]": t + 1 for i, t in enumerate(SEEN)}
    assert sorted(plan.payload["resume"].values()) == sorted(t + 1 for t in SEEN)
    # The sharder's g (10) has not yet moved the FOLD_EVERY snapshot intervals after
    # which its children fold their diff logs (spec T3): observed are B-times 1-13.
    assert plan.payload["replay"] == 13


@pytest.mark.parametrize("topology", ["diamond", "wordcount", "windowed"])
def test_every_plan_resumes_at_one_past_the_level_one_entry(topology: str) -> None:
    sim = Simulator(load(topology), PROTOCOLS["causal"], {})
    chans, plans = sim.graph.channels, 0
    for seed in range(1, 31):
        out = sim.run_one(seed)
        assert out.verdict.passed
        for e in out.result.events:
            if e.note != "causal-replay":
                continue
            plans += 1
            got = {chans[int(ch)].dst: r for ch, r in e.payload["resume"].items()}
            assert got == e.payload["children"] == {c: t + 1 for c, t in e.payload["t"].items()}, e
    assert plans >= 20


def test_round_robin_output_follows_the_instance_time_not_a_counter() -> None:
    # Spec change 2: diamond's ones[0] sends round-robin to evens[0..1] and all[0..1].
    # The event at time t sends its records to channel t mod 2 of each group (the other
    # gets nothing: ones[0] is quiet, rule N6, and that channel's next batch carries the
    # event's diff), so a replacement that restarts at time t routes as the original did
    # whatever its batch counter says.
    graph = ExecutionGraph(load("diamond"))
    me = InstanceId("ones[0]")
    groups = [g.channels for g in graph.instances[me].outputs]
    for counter in (0, 2):
        core = InstanceCore(graph, me)
        inst = CausalInstance(InstanceView.of(graph, me), {me: core}, CausalParams())
        inst.handle(Started(me, 0, "initial",
                            init=CausalInit(parents={"tags[0]": core.inputs[0]})), 0.0)
        core.rr = [counter] * len(core.rr)
        inst.time = 6
        inst._run(core.inputs[0], Batch([("#a", 1, 0)], 1, meta=("tags[0]", 1, ())))
        sent = {a.channel: a.msg.records for a in inst.flush()
                if type(a) is Send and type(a.msg) is Batch}
        assert inst.time == 7
        assert {ch for ch, recs in sent.items() if recs} == {chans[7 % 2] for chans in groups}
        assert set(sent) == {chans[7 % 2] for chans in groups}
        assert all(inst.carry[chans[1 - 7 % 2]] == [inst.last_diff] for chans in groups)


def _merge0(recover: bool) -> tuple[CausalInstance, int]:
    """diamond's merge[0], its channel from evens[0] (E1's child C1 of B = evens[0])."""
    graph = ExecutionGraph(load("diamond"))
    me = InstanceId("merge[0]")
    core = InstanceCore(graph, me)
    inst = CausalInstance(InstanceView.of(graph, me), {me: core}, CausalParams())
    parents = {graph.channels[ch].src: ch for ch in core.inputs}
    inst.handle(Started(me, 0, "initial", init=CausalInit(0, recover, parents)), 0.0)
    return inst, parents["evens[0]"]


def _from_b(inst: CausalInstance, ch: int, t: int) -> None:
    inst.handle(BatchIn(inst.me.id, ch, Batch([], t, meta=("evens[0]", t, ()))), 0.0)


@pytest.mark.parametrize(("start", "verdict"), [(7, None), (6, "duplicates"), (8, "a gap")])
def test_a_child_refuses_a_resume_one_early_or_late(start: int, verdict: str | None) -> None:
    # E1: C1 has B-times up to 6, so B' resumes it at 7 (spec R5). One early would send
    # C1 B(A1#4) again, one late would never send it B:7: the RESUME marker that starts
    # every resend names the first sender time and the child checks it (spec section 5,
    # rows 4 and 5: no duplicate leaves a replacement or a resending parent).
    inst, ch = _merge0(recover=False)
    for t in range(1, 7):
        _from_b(inst, ch, t)
    resume = MarkerIn(inst.me.id, ch, Marker(RESUME, meta=(start, None)))
    if verdict is None:
        inst.handle(resume, 0.0)
        _from_b(inst, ch, 7)
        assert inst.got[ch] == 7
    else:
        with pytest.raises(CausalIncomplete, match=f"evens\\[0\\] resumes at sender time "
                                                   f"{start}, .* up to 6 \\({verdict}\\)"):
            inst.handle(resume, 0.0)


def test_a_replacement_takes_a_parents_batches_only_after_its_resume() -> None:
    # Live batches that reach a replacement before its parent's resend are sent again
    # after the RESUME marker; taken early, the resend would repeat them.
    inst, ch = _merge0(recover=True)
    _from_b(inst, ch, 1)
    assert inst.got[ch] == 0 and inst.pos[ch] == 0
    inst.handle(MarkerIn(inst.me.id, ch, Marker(RESUME, meta=(1, None))), 0.0)
    _from_b(inst, ch, 1)
    assert inst.got[ch] == 1


def test_a_resend_starts_with_its_resume_marker() -> None:
    # merge[0] ran five events (one batch each to out[0], N5); resending from sender
    # time 3 sends the marker, then the batches of times 3, 4 and 5.
    inst, ch = _merge0(recover=False)
    for t in range(1, 6):
        _from_b(inst, ch, t)
    [och] = inst.core.out_channels
    inst.resend(och, 3)
    acts = inst.flush()
    assert acts[0] == Send(och, Marker(RESUME))
    assert isinstance(acts[0], Send) and acts[0].msg.meta == (3, None)  # not compared by ==
    assert [inst.key(a.msg) for a in acts[1:] if type(a.msg) is Batch] == [3, 4, 5]


def test_a_resume_for_an_earlier_incarnation_is_not_this_ones() -> None:
    # A resend asked for an earlier incarnation of merge[0] (a control delayed on the
    # way, or a replacement that only caught up after merge[0] restarted again) reaches
    # incarnation 7. Its RESUME names incarnation 6: ignored, with the batches after it;
    # the resend asked for incarnation 7 syncs the channel. Taken, the stale one would
    # start the channel at the wrong sender time (join-then-window seed 1714 with every
    # fault kind: a gap; progressive-small seed 413: the next resend brought duplicates).
    graph = ExecutionGraph(load("diamond"))
    me = InstanceId("merge[0]")
    core = InstanceCore(graph, me)
    inst = CausalInstance(InstanceView.of(graph, me), {me: core}, CausalParams())
    parents = {graph.channels[ch].src: ch for ch in core.inputs}
    inst.handle(Started(me, 0, "restart", init=CausalInit(0, True, parents, 7)), 0.0)
    ch = parents["evens[0]"]
    inst.handle(MarkerIn(me, ch, Marker(RESUME, 6, (6, None))), 0.0)
    _from_b(inst, ch, 6)
    assert ch in inst.unsynced and inst.got[ch] == 0
    inst.handle(MarkerIn(me, ch, Marker(RESUME, 7, (1, None))), 0.0)
    _from_b(inst, ch, 1)
    assert ch not in inst.unsynced and inst.got[ch] == 1


def test_a_resend_names_the_incarnation_it_is_for() -> None:
    inst, ch = _merge0(recover=False)
    for t in range(1, 4):
        _from_b(inst, ch, t)
    [och] = inst.core.out_channels
    acts = inst.handle(ControlIn(ResendTo(och, 2, 5)), 0.0)
    assert isinstance(acts[0], Send) and acts[0].msg == Marker(RESUME, 5)
