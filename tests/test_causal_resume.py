"""Where a replacement resumes each child: at 1 + the child's level-1 entry (spec R1, R5).

The plan's resume point per channel is 1 + the child's level-1 entry t_j, a sender time
(payload logs are addressed by it, spec D5), for sources too, whose hash or round-robin
output skips channels; ``causal-replay`` records both next to each other. A resume point
one batch early or late breaks the equality."""

from __future__ import annotations

import pytest

from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from ftctl.sim.faults import FailureSchedule, Strike
from ftctl.sim.runner import Simulator
from protocols.causal.instance import CausalInstance
from protocols.causal.messages import CausalInit
from protocols.causal.params import CausalParams
from protocols.contract.actions import Send
from protocols.contract.events import Started
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.registry import PROTOCOLS
from tests.conftest import load
from tests.test_causal_sim import _run

pytestmark = pytest.mark.sim

# sharder[0] killed at event 400 (seed 4): what each shard had seen of it, by its clock.
SEEN = [8, 7, 8, 7, 8, 8, 7, 8, 8, 8, 8, 8, 6, 7, 8, 8, 7, 8, 8, 6]


def test_the_sharder_resumes_each_shard_one_past_what_it_saw() -> None:
    result, ok = _run("causal", FailureSchedule([Strike(400, 1, ("sharder[0]",))]))
    assert ok and result.complete
    [plan] = [e for e in result.events if e.note == "causal-replay"]
    assert plan.payload["t"] == {f"shard[{i}]": t for i, t in enumerate(SEEN)}
    assert plan.payload["t_min"] == 6
    assert plan.payload["tstar"] == ("sharder[0]", 6, (("votes[0]", 6, ()),))
    assert plan.payload["children"] == {f"shard[{i}]": t + 1 for i, t in enumerate(SEEN)}
    assert sorted(plan.payload["resume"].values()) == sorted(t + 1 for t in SEEN)
    # Every observed B-time, 1..8: the replacement replays those above the time of the
    # snapshot it restored.
    assert plan.payload["replay"] == 8


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
    # gets an empty batch, N5), so a replacement that restarts at time t routes as the
    # original did whatever its batch counter says.
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
        assert set(sent) == {ch for chans in groups for ch in chans}
