"""The nemesis's engine (``chaos.engine``) over a recording port: what both hosts get for
triggers, phase holders and followers, and the simulation host's progress trigger."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from chaos.engine import OPENING, PROGRESS, FaultEngine
from chaos.schedule import PlannedFault, plan
from ftctl.config.scenario import PHASE_HOLDER, Scenario

INSTANCES = ["count[0]", "count[1]", "lines[0]"]


class Port:
    def __init__(self) -> None:
        self.now: list[PlannedFault] = []
        self.later: list[tuple[PlannedFault, float]] = []
        self.holders: dict[str, list[str]] = {}
        self.missing: list[str] = []

    def deliver(self, planned: PlannedFault, now: float) -> None:
        self.now.append(planned)

    def deliver_after(self, planned: PlannedFault, delay: float) -> None:
        self.later.append((planned, delay))

    def phase_holders(self, phase: str) -> Sequence[str]:
        return self.holders.get(phase, [])

    def no_holder(self, planned: PlannedFault, phase: str, now: float) -> bool | None:
        self.missing.append(phase)
        return None


def engine(*faults: dict[str, object]) -> tuple[FaultEngine, Port]:
    sc = Scenario.model_validate({"name": "e", "seed": 7, "faults": list(faults)})
    port = Port()
    return FaultEngine(plan(sc, INSTANCES, 10.0), sc.seed, lambda: INSTANCES, port), port


def test_during_strikes_once_per_opening_up_to_count_in_the_open_phase_only() -> None:
    eng, port = engine({"type": "kill-task", "during": "snapshotting", "target": "random",
                        "count": 2})
    assert eng.phases() == ["snapshotting"]
    eng.phase_opened("takeover", 1.0)
    eng.phase_opened("snapshotting", 1.0, still_open=lambda: False)  # closed already
    assert port.now == []
    for t in (2.0, 3.0, 4.0):
        eng.phase_opened("snapshotting", t)
    assert [(p.occurrence, p.at) for p in port.now] == [(0, 2.0), (1, 3.0)]
    assert not eng.waiting() and eng.phases() == []


def test_a_phase_holder_is_drawn_among_the_holders_and_none_uses_no_occurrence() -> None:
    eng, port = engine({"type": "kill-task", "during": "takeover", "target": "phase-holder",
                        "count": 1})
    eng.phase_opened("takeover", 1.0)
    assert port.now == [] and port.missing == ["takeover"] and eng.waiting()
    port.holders["takeover"] = ["count[1]"]
    eng.phase_opened("takeover", 2.0)
    (struck,) = port.now
    assert struck.target == "count[1]" and struck.occurrence == 0


def test_followers_start_once_per_injected_occurrence_after_their_delay() -> None:
    eng, port = engine(
        {"id": "k", "type": "kill-task", "at": 1.0, "target": "count[0]"},
        {"type": "pause", "after": {"fault": "k", "delay": 0.5}, "target": "random",
         "duration": 1.0, "count": 2},
        {"type": "slow", "after": {"phase": "recovering", "delay": 0.25}, "target": "random",
         "duration": 1.0})
    (kill,) = [p for p in plan(Scenario.model_validate({"name": "e", "seed": 7, "faults": [
        {"id": "k", "type": "kill-task", "at": 1.0, "target": "count[0]"}]}), INSTANCES, 10.0)]
    eng.injected(kill, 1.0)
    eng.injected(kill, 1.2)  # a group's second node: the same occurrence
    eng.phase_opened("recovering", 1.5)
    eng.phase_opened("recovering", 2.5)  # its one occurrence is planned
    assert [(p.type, p.at, d) for p, d in port.later] == [("pause", 1.5, 0.5),
                                                         ("slow", 1.75, 0.25)]
    assert eng.waiting()  # the pause follows one more occurrence of k


def test_start_hands_every_timed_occurrence_to_the_port_in_time_order() -> None:
    eng, port = engine(
        {"type": "pause", "every": 4.0, "target": "count[1]", "duration": 1.0},
        {"type": "kill-task", "at": 3.0, "target": "count[0]"},
        {"type": "kill-task", "during": "snapshotting", "target": "random"})
    eng.start(1.0)
    assert [(p.type, p.at, d) for p, d in port.later] == [
        ("kill-task", 3.0, 2.0), ("pause", 4.0, 3.0), ("pause", 8.0, 7.0)]
    assert port.now == [] and eng.waiting()  # the trigger waits for an opening


def progress(index: int, events: int) -> PlannedFault:
    return PlannedFault(index=index, occurrence=0, type="Strike", target="random", at=None,
                        trigger=PROGRESS, params={"events": events})


def test_progress_occurrences_strike_once_due_in_event_then_index_order() -> None:
    port = Port()
    eng = FaultEngine([progress(0, 40), progress(1, 10), progress(2, 40), progress(3, 90)],
                      0, lambda: INSTANCES, port)
    eng.start()
    assert port.later == [] and eng.phases() == []  # neither timed nor on a phase
    assert eng.next_progress() == 10 and eng.waiting()
    assert eng.progressed(9, 0.1) == 10 and port.now == []
    assert eng.progressed(55, 0.2) == 90  # a host past two counts strikes all due
    assert [(p.index, p.at) for p in port.now] == [(1, None), (0, None), (2, None)]
    assert eng.progressed(90, 0.3) is None and not eng.waiting()
    assert [p.index for p in port.now] == [1, 0, 2, 3]


def test_an_opening_param_lets_the_first_openings_pass_then_waits_for_an_open_one() -> None:
    base = plan(Scenario.model_validate({"name": "e", "seed": 7, "faults": [
        {"type": "kill-task", "during": "takeover", "target": "random", "count": 1}]}),
        INSTANCES, 10.0)[0]
    port = Port()
    eng = FaultEngine([replace(base, params={**base.params, OPENING: 3})], 7,
                      lambda: INSTANCES, port)
    eng.phase_opened("takeover", 1.0)
    eng.phase_opened("takeover", 2.0, still_open=lambda: False)  # passes, open or not
    eng.phase_opened("takeover", 3.0, still_open=lambda: False)  # its turn: closed already
    assert port.now == [] and eng.waiting()
    eng.phase_opened("takeover", 4.0)
    assert [p.at for p in port.now] == [4.0] and not eng.waiting()


def test_a_template_with_a_seed_of_its_own_draws_its_holder_from_it() -> None:
    holders = ["lines[0]", "count[1]", "count[0]"]
    picks = set()
    for seed in (11, 12, 13, 14, 15, 16):
        port = Port()
        port.holders["snapshotting"] = holders
        template = PlannedFault(index=0, occurrence=0, type="kill-task",
                                target=PHASE_HOLDER, at=None, during="snapshotting",
                                count=1, seed=seed)
        FaultEngine([template], 7, lambda: INSTANCES, port).phase_opened("snapshotting", 1.0)
        (p,) = port.now
        assert p.seed == seed and p.target == random.Random(seed).choice(sorted(holders))
        picks.add(p.target)
    assert len(picks) > 1  # the seed decides, not the engine's


def test_a_port_may_spend_an_occurrence_on_an_opening_with_no_holder() -> None:
    class Spending(Port):
        def no_holder(self, planned: PlannedFault, phase: str, now: float) -> bool:
            super().no_holder(planned, phase, now)
            return True

    sc = Scenario.model_validate({"name": "e", "seed": 7, "faults": [
        {"type": "kill-task", "during": "takeover", "target": "phase-holder", "count": 1}]})
    port = Spending()
    eng = FaultEngine(plan(sc, INSTANCES, 10.0), sc.seed, lambda: INSTANCES, port)
    eng.phase_opened("takeover", 1.0)
    port.holders["takeover"] = ["count[1]"]
    eng.phase_opened("takeover", 2.0)
    assert port.missing == ["takeover"] and port.now == [] and not eng.waiting()
