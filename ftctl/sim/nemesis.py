"""The simulation host's nemesis: every fault of a run, whatever planned it, is an occurrence
the trigger engine (``chaos.engine``) times and this port carries out.

Three sources plan them: a scenario file (``ftctl/sim/scenario.py``: occurrences of the
registry's kinds, realized by ``ftctl/sim/actuator.py``); a random schedule
(``ftctl/sim/faults.py``: each drawn fault an occurrence on the host's progress, due once
the host has processed its ``at_event`` events, and struck as drawn, ``SimHost.inject``);
and the conformance kit's phase strike (``phase_strike``: a ``during`` template on a phase
holder at the k-th opening). The host reports its progress, phase openings (after the
actions that opened them) and failure detections (``recovering``); the engine decides.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from chaos.engine import OPENING, PROGRESS, FaultEngine
from chaos.schedule import PlannedFault
from ftctl.config.scenario import PHASE_HOLDER, RECOVERING
from ftctl.sim.actuator import SimActuator
from ftctl.sim.faults import SimFault

if TYPE_CHECKING:
    from ftctl.sim.host import SimHost

MAX_OPENING = 3  # the kit's phase strike comes at one of the phase's first openings
RANDOM = "random"  # a drawn fault's target: drawn by the host when it strikes, if not given


def drawn_faults(strikes: Sequence[SimFault], first: int = 0) -> dict[int, SimFault]:
    """A random schedule's faults by the index their occurrences get (from ``first``)."""
    return {first + i: fault for i, fault in enumerate(strikes)}


def on_progress(drawn: Mapping[int, SimFault]) -> list[PlannedFault]:
    """One occurrence per drawn fault, due when the host has processed its ``at_event``
    events; ties strike in the schedule's order."""
    return [PlannedFault(index=i, occurrence=0, type=type(fault).__name__, target=RANDOM,
                         at=None, trigger=PROGRESS, params={"events": fault.at_event})
            for i, fault in drawn.items()]


def phase_strike(phase: str, rng: random.Random, index: int) -> PlannedFault:
    """The conformance kit's phase-triggered crash: at the k-th opening of ``phase`` (k
    drawn from ``rng``, 1-3) that is still open when its turn comes, on an instance
    holding it, drawn with a seed from ``rng`` (none holds it: a running instance,
    ``SimNemesis(any_holder=True)``)."""
    k = rng.randint(1, MAX_OPENING)
    return PlannedFault(index=index, occurrence=0, type="kill-task", target=PHASE_HOLDER,
                        at=None, during=phase, count=1, params={OPENING: k},
                        seed=rng.getrandbits(64))


class SimNemesis:
    """One run's engine over ``host`` and the port it strikes through. ``scale``: simulated
    seconds per scenario second; ``drawn``: the random schedule's faults by occurrence index;
    ``any_holder``: a phase no running instance holds is struck on any running one, and
    with none running the occurrence is spent (the kit's rule; a scenario's
    ``phase-holder`` is skipped instead, and waits for the next opening)."""

    def __init__(self, host: SimHost, faults: Sequence[PlannedFault], seed: int = 0,
                 scale: float = 1.0, instances: Sequence[str] | None = None,
                 drawn: Mapping[int, SimFault] | None = None, any_holder: bool = False) -> None:
        self.host = host
        self.scale = scale
        self.instances = list(host.graph.order if instances is None else instances)
        self.drawn = dict(drawn or {})
        self.any_holder = any_holder
        self.actuator = SimActuator(host, scale, self.instances, self._injected)
        self.engine = FaultEngine(faults, seed, lambda: self.instances, self)

    def install(self) -> None:
        """Hand the timed occurrences to the host's clock and hook what the engine waits
        for (only that: each opening reported costs the host an event)."""
        self.engine.start(self._now())
        waited = self.engine.phases()
        if RECOVERING in waited:
            self.host.on_detected.append(
                lambda: self.engine.phase_opened(RECOVERING, self._now()))
        if any(phase != RECOVERING for phase in waited):
            self.host.on_phase.append(self._opened)
        due = self.engine.next_progress()
        if due is not None:
            self.host.watch_progress(due, self._progressed)

    def _opened(self, phase: str) -> None:
        """A declared phase opened (``recovering`` is the detections'): its ``during``
        occurrences strike only if it is still open when their turn comes."""
        if phase != RECOVERING:
            phases = self.host.kernel.open_phases
            self.engine.phase_opened(phase, self._now(), lambda: phases.active(phase))

    def _progressed(self, events: int) -> int | None:
        return self.engine.progressed(events, self._now())

    def _now(self) -> float:
        return self.host.now / self.scale

    def _injected(self, p: PlannedFault) -> None:
        self.engine.injected(p, self._now())

    # ------------------------------------------------------------ the engine's port

    def deliver(self, planned: PlannedFault, now: float) -> None:
        if planned.trigger == PROGRESS:
            self.host.inject(self.drawn[planned.index])
            self.host._settle_capacity()  # nodes it took down: the coordinator hears once
        else:
            self.strike(planned)

    def deliver_after(self, planned: PlannedFault, delay: float) -> None:
        self.host.at(self.host.now + delay * self.scale, partial(self.strike, planned))

    def phase_holders(self, phase: str) -> list[str]:
        """The running instances holding ``phase`` (with ``any_holder``, none: every
        running instance)."""
        held = [i for i in self.host.kernel.open_phases.holders(phase) if i in self.host.live]
        return held or (sorted(self.host.live) if self.any_holder else [])

    def no_holder(self, planned: PlannedFault, phase: str, now: float) -> bool | None:
        if self.any_holder:
            return True  # nothing runs at all: the kit's strike is spent, unlogged
        self.host.skip_fault(planned.type, PHASE_HOLDER, f"no running instance holds {phase}")
        return None

    # ------------------------------------------------------------ one occurrence

    def strike(self, p: PlannedFault) -> None:
        before = self.host.stats.injected
        self.actuator.strike(p)
        if self.host.stats.injected > before:
            self._injected(p)
