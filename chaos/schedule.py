"""Turning a scenario into a concrete, replayable list of planned faults.

A planned fault has an offset (seconds after the scheduler starts), a trigger, or an
anchor (``after_fault``: the index of the fault it follows, or ``after_phase``) and a
``delay``; a resolved target and its own seed. Everything random is drawn from RNGs keyed by
(scenario seed, fault index, occurrence), never from a shared stream, so the target of
the 3rd repetition of fault 2 does not change when fault 1 gains a repetition, and a
trigger occurrence resolved at fire time gets the same target in every run.

Resolution: for fault types that act on one instance (everything but kill-group,
restore-capacity and the container faults), ``random`` and operator targets become an
instance here; instances and label selectors stay as written (which worker carries a label
is only known when the fault strikes). kill-group and restore-capacity keep their selector
(``random`` = a random failure domain / every lost worker); container faults resolve an
operator to an instance (the worker running it is struck) and keep ``random`` (a live
worker drawn when they strike).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ftctl.config.scenario import FAULT_TYPES, PHASE_HOLDER, Scenario, parse_target, relation_error

# Where `--kill N` puts its kills: the middle 60% of the run, away from start-up and the
# drain at the end, where a kill says little about steady-state recovery.
KILL_WINDOW = (0.2, 0.8)


# The most occurrences a scenario may plan: `every: 0.0001` over a 25 s run is a typo
# that would otherwise plan (and strike) hundreds of thousands of faults.
MAX_OCCURRENCES = 10_000


class ScheduleError(ValueError):
    """A scenario that cannot be planned against this topology (unknown instance ...)."""


@dataclass(frozen=True)
class PlannedFault:
    """One occurrence of a fault (or, with a trigger, the template of its occurrences)."""

    index: int  # the fault's position in the scenario
    occurrence: int  # 0, 1, ... for `every` and triggers
    type: str
    target: str  # resolved, see the module doc
    at: float | None  # seconds after the scheduler starts; None while waiting for a trigger
    trigger: str | None = None
    # The phase a trigger template strikes in (``during: P``, or its ``trigger``'s);
    # a ``phase-holder`` target is resolved when it strikes.
    during: str | None = None
    count: int | None = None  # trigger templates: how many occurrences (None: no limit)
    # Relative templates (``after``): strike ``delay`` s after each injection of fault
    # ``after_fault`` (its index) or each entry into ``after_phase``, ``count`` times.
    after_fault: int | None = None
    after_phase: str | None = None
    delay: float = 0.0
    duration: float | None = None
    window: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    optional: bool = False  # undelivered, it does not fail the run
    # A random pick (``--kill N``, ``target: random``): when the instance drawn is being
    # restarted, the fault takes another running instance instead of waiting for it.
    retarget: bool = False

    @property
    def relative(self) -> bool:
        """A template waiting for another fault's injection or a phase."""
        return self.after_fault is not None or self.after_phase is not None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlannedFault:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def fault_seed(seed: int, index: int, occurrence: int) -> int:
    """The seed of one occurrence's own draws (group offsets, arrivals, drops)."""
    return random.Random(f"{seed}/{index}/{occurrence}").getrandbits(32)


def resolve_target(
    fault_type: str, target: str, instances: Sequence[str], seed: int, index: int, occurrence: int
) -> str:
    """The target a planned occurrence names (see the module doc)."""
    if target == PHASE_HOLDER:
        return target  # whoever holds the phase when it strikes
    parsed = parse_target(target)
    if FAULT_TYPES[fault_type].scope == "group":
        if parsed.kind in ("instance", "operator"):
            raise ScheduleError(
                f"fault {index} ({fault_type}): target {target!r} must be a label "
                "selector like rack=a, or random"
            )
        return target
    if parsed.kind == "instance":
        if target not in instances:
            raise ScheduleError(f"fault {index} ({fault_type}): no instance {target!r}")
        return target
    scope = FAULT_TYPES[fault_type].scope
    if parsed.kind == "selector" or scope == "capacity":
        return target
    if scope == "worker" and parsed.kind == "random":
        return target  # which workers are live is known only when the fault strikes
    pool = [i for i in instances if parsed.kind == "random" or _operator(i) == parsed.operator]
    if not pool:
        raise ScheduleError(f"fault {index} ({fault_type}): no operator {target!r}")
    return random.Random(f"{seed}/{index}/{occurrence}/target").choice(pool)


def occurrence(template: PlannedFault, k: int, instances: Sequence[str], seed: int,
               at: float | None = None) -> PlannedFault:
    """The k-th occurrence of a fault, its target resolved."""
    return replace(
        template,
        occurrence=k,
        at=at,
        count=None,
        target=resolve_target(template.type, template.target, instances, seed, template.index, k),
        seed=fault_seed(seed, template.index, k),
    )


def plan(scenario: Scenario, instances: Sequence[str], duration: float) -> list[PlannedFault]:
    """The scenario's schedule for a run expected to last ``duration`` seconds.

    ``at`` faults occur once; ``every`` faults at every, 2*every, ... (``count`` of them,
    or as many as fit in ``duration``); trigger and ``after`` faults stay one unresolved
    template each (``at`` None, target as written) that the scheduler expands when the
    trigger fires or what they follow happens (``after``: once unless ``count``).
    """
    problem = relation_error(scenario)
    if problem is not None:
        raise ScheduleError(problem[1])
    ids = {f.id: i for i, f in enumerate(scenario.faults) if f.id is not None}
    planned: list[PlannedFault] = []
    for index, fault in enumerate(scenario.faults):
        after = fault.after
        template = PlannedFault(
            index=index, occurrence=0, type=fault.type, target=fault.target, at=None,
            trigger=fault.trigger, during=fault.phase, count=fault.count,
            duration=fault.duration,
            window=fault.window, params=dict(fault.typed_params().model_dump()),
            optional=fault.optional, retarget=fault.target == "random",
        )
        if after is not None:
            template = replace(
                template, count=fault.count or 1, delay=after.delay,
                after_fault=None if after.fault is None else ids[after.fault],
                after_phase=after.phase)
        if fault.phase is not None or after is not None:
            # Checked now so a bad target fails before the run, not at the first trigger.
            resolve_target(fault.type, fault.target, instances, scenario.seed, index, 0)
            planned.append(template)
        elif fault.every is not None:
            k = 0
            while fault.count is None or k < fault.count:
                at = fault.every * (k + 1)
                if fault.count is None and at > duration:
                    break
                planned.append(occurrence(template, k, instances, scenario.seed, at))
                k += 1
                if len(planned) > MAX_OCCURRENCES:
                    raise ScheduleError(f"fault {index} ({fault.type}): every {fault.every:g} s "
                                        f"plans more than {MAX_OCCURRENCES:,} faults; give a "
                                        "longer period or a count")
        else:
            planned.append(occurrence(template, 0, instances, scenario.seed, fault.at))
    return sorted(planned, key=_order)


def random_kills(
    n: int, instances: Sequence[str], duration: float, seed: int
) -> list[PlannedFault]:
    """``--kill N``: N kill-task faults on random instances at random times in the middle
    60% of the run."""
    if not instances:
        raise ScheduleError("no instances to kill")
    rng = random.Random(f"kill/{seed}")
    lo, hi = KILL_WINDOW
    times = sorted(rng.uniform(lo * duration, hi * duration) for _ in range(n))
    return [
        PlannedFault(
            index=i, occurrence=0, type="kill-task", target=rng.choice(list(instances)),
            at=round(t, 6), seed=fault_seed(seed, i, 0), retarget=True,
        )
        for i, t in enumerate(times)
    ]


def _operator(instance: str) -> str:
    return instance.partition("[")[0]


def _order(p: PlannedFault) -> tuple[float, int, int]:
    return (p.at if p.at is not None else float("inf"), p.index, p.occurrence)
