"""``ftctl sim``'s own schedules go through the trigger engine (``ftctl/sim/nemesis.py``): a
random schedule's faults are progress occurrences the engine strikes once the host has
processed their events, and the kit's phase strike is a ``during`` template on a holder."""

from __future__ import annotations

import random
from typing import Any

import pytest

from chaos.engine import OPENING, PROGRESS
from chaos.schedule import PlannedFault
from ftctl.config.scenario import PHASE_HOLDER
from ftctl.sim.faults import FAULT_KINDS, FailureSchedule, SimFault
from ftctl.sim.host import SimHost
from ftctl.sim.nemesis import SimNemesis
from ftctl.sim.runner import Simulator
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[PlannedFault, int, Any]]:
    """Every occurrence the engine hands the port: with the events processed then and
    what the phase set looked like."""
    seen: list[tuple[PlannedFault, int, Any]] = []
    real = SimNemesis.deliver

    def deliver(self: SimNemesis, planned: PlannedFault, now: float) -> None:
        phases = self.host.kernel.open_phases
        seen.append((planned, self.host.stats.events,
                     (dict(phases.openings), phases.names(),
                      {p: phases.holders(p) for p in phases.names()}, sorted(self.host.live))))
        real(self, planned, now)

    monkeypatch.setattr(SimNemesis, "deliver", deliver)
    return seen


@pytest.mark.parametrize("seed", [5, 11])
def test_a_random_schedules_faults_strike_through_the_engine_at_their_event(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    sim = Simulator(load("diamond"), PROTOCOLS["checkpoint"], {}, max_failures=4,
                    kinds=FAULT_KINDS)
    drawn = FailureSchedule.random(random.Random(seed), sim.horizon, 4, 3, FAULT_KINDS).strikes
    struck: list[SimFault] = []
    inject = SimHost.inject

    def record(host: SimHost, fault: SimFault) -> None:
        struck.append(fault)
        inject(host, fault)

    monkeypatch.setattr(SimHost, "inject", record)
    seen = _spy(monkeypatch)
    sim.run_one(seed)
    assert len(drawn) >= 2
    assert [p.trigger for p, _, _ in seen] == [PROGRESS] * len(drawn)
    # each struck as drawn, once the host had processed exactly its events
    assert [events for _, events, _ in seen] == [f.at_event for f in drawn]
    assert struck == drawn


def test_the_kits_phase_strike_is_a_during_template_on_a_holder_at_its_opening(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sim = Simulator(load("wordcount"), PROTOCOLS["checkpoint"], {}, during="snapshotting")
    seen = _spy(monkeypatch)
    openings = []
    for seed in range(1, 7):
        seen.clear()
        sim.run_one(seed)
        (phase_strike,) = [(p, ph) for p, _, ph in seen if p.trigger != PROGRESS]
        p, (opened, open_now, holders, live) = phase_strike
        assert (p.type, p.during) == ("kill-task", "snapshotting")
        assert p.target != PHASE_HOLDER and "snapshotting" in open_now
        # a running holder; none (the coordinator holds it alone): a running instance
        assert p.target in ([h for h in holders["snapshotting"] if h in live] or live)
        # at its k-th opening or later (a later one when the k-th closed before its turn)
        assert opened["snapshotting"] >= p.params[OPENING]
        openings.append(p.params[OPENING])
    assert len(set(openings)) > 1  # k is drawn per schedule
