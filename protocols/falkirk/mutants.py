"""Planted bugs in falkirk's rules, each one rule of the spec broken (spec §7).

``PLANTED`` break the pure layer (solver, GC, selective restore) and are caught by the
worked examples (tests/test_falkirk_mutants.py); they mirror the spec's reference script.
``MUTANTS`` break the running protocol and are caught by seeded crash schedules
(tests/test_falkirk_runs.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from protocols.contract.actions import CoordinatorAction, DiscardStaged
from protocols.contract.events import StoreFault
from protocols.contract.spec import Mutant
from protocols.falkirk import gc, selective
from protocols.falkirk.coordinator import FalkirkCoordinator
from protocols.falkirk.fixedpoint import FixedPoint
from protocols.falkirk.frontier import TOP, Domain, EpochDomain, Frontier, LoopDomain, VectorDomain
from protocols.falkirk.instance import FalkirkInstance
from protocols.falkirk.model import Dataflow, Entry
from protocols.falkirk.policy import Policy
from protocols.falkirk.recovery import RollbackPlan


def widen(dom: Domain, f: Frontier) -> Frontier:
    """One more time than ``f`` (per component for vectors)."""
    if f is TOP:
        return f
    if isinstance(dom, EpochDomain):
        return f + 1
    if isinstance(dom, VectorDomain):
        return dom.of({c: n + 1 for c, n in f.items})
    if isinstance(dom, LoopDomain):
        return (0, 0) if f is None else dom.feedback(f)
    raise TypeError(dom)


def narrow(dom: Domain, f: Frontier) -> Frontier:
    """``f`` without its largest time (per component for vectors)."""
    if f is TOP:
        return f
    if isinstance(dom, EpochDomain):
        return max(f - 1, -1)
    if isinstance(dom, VectorDomain):
        return dom.of({c: n - 1 for c, n in f.items})
    if isinstance(dom, LoopDomain):
        if f is None:
            return None
        t, c = f
        return (t, c - 1) if c > 0 else ((t - 1, dom.last) if t > 0 else None)
    raise TypeError(dom)


class PhiOffByOne(FixedPoint):
    """φ claims one more time fixed than the sender's frontier fixes."""

    def project(self, e: str, entry: Entry) -> Frontier:
        return widen(self.flow.domain(self.flow.edges[e].dst), super().project(e, entry))


class IgnoreDiscards(FixedPoint):
    """D̄ ignored: a non-logging instance is treated as a firewall."""

    def discards_ok(self, p: str, g: Entry, f: Mapping[str, Entry]) -> bool:
        return True


class IgnoreNotifications(FixedPoint):
    """No notification frontiers (the Fig. 5 inconsistency)."""

    def notified_ok(self, p: str, g: Entry, fn: Mapping[str, Frontier]) -> bool:
        return True

    def new_fn(self, p: str, g: Entry, fn: Mapping[str, Frontier]) -> Frontier:
        return fn[p]


class FailedKeepTop(FixedPoint):
    """A failed instance keeps TOP, as if it had lost nothing."""

    def survives(self, p: str, entry: Entry) -> bool:
        return True


class OneSweep(FixedPoint):
    """One sweep over the instances instead of iterating to the fixed point."""

    def finished(self, changed: bool, sweeps: int) -> bool:
        return True


class ReplayInclusive(FixedPoint):
    """The replay also resends the receiver's last kept time."""

    def replay_keep(self, e: str, g: Entry, f: Mapping[str, Entry]) -> Frontier:
        return narrow(self.flow.domain(self.flow.edges[e].dst), super().replay_keep(e, g, f))


class NoInflightRule(FixedPoint):
    """A receiver keeps what was in flight from a stopped sender (spec R5 off)."""

    def kept(self, e: str, g: Entry, f: Mapping[str, Entry]) -> Frontier:
        return f[self.flow.edges[e].dst].front


class WatermarkWithTop(gc.Watermark):
    """The low-watermark computed with the live instances' TOP."""

    def __init__(self, flow: Dataflow):
        FixedPoint.__init__(self, flow, failed=())


def prune_at_watermark(flow: Dataflow, lw: Mapping[str, Frontier]) -> dict[str, tuple[Entry, ...]]:
    """GC that also deletes the entry at the watermark (spec D9 violated)."""
    return {p: tuple(e for e in n.entries if gc.keep_entry(flow, p, e, lw) and e.front != lw[p])
            for p, n in flow.nodes.items()}


def prefix_history(history: Iterable[Any], frontier: Frontier, domain: Domain,
                   time_of: Callable[[Any], object]) -> list[Any]:
    """Prefix restore: the longest prefix inside the frontier, not the filtered history."""
    out = []
    for ev in history:
        if not selective.contains(domain, frontier, time_of(ev)):
            break
        out.append(ev)
    return out


@dataclass(frozen=True)
class PlannedBug:
    """The pure parts of falkirk, one of them replaced."""

    name: str
    description: str
    solver: type[FixedPoint] = FixedPoint
    watermark: type[gc.Watermark] = gc.Watermark
    prune: Callable[[Dataflow, Mapping[str, Frontier]], dict[str, tuple[Entry, ...]]] = gc.prune
    history_at: Callable[..., list[Any]] = selective.history_at


CORRECT = PlannedBug("correct", "the protocol as specified")

PLANTED: tuple[PlannedBug, ...] = (
    PlannedBug("phi-off-by-one", "projection claims one more epoch/message fixed",
               solver=PhiOffByOne),
    PlannedBug("ignore-discards", "an ephemeral operator's dependence ignored (treated as a "
               "firewall)", solver=IgnoreDiscards),
    PlannedBug("ignore-notifications", "notification constraint dropped",
               solver=IgnoreNotifications),
    PlannedBug("failed-keep-top", "failed instances keep TOP", solver=FailedKeepTop),
    PlannedBug("one-sweep", "one sweep instead of a fixed point", solver=OneSweep),
    PlannedBug("replay-inclusive", "replay includes the receiver's last kept time",
               solver=ReplayInclusive),
    PlannedBug("no-inflight", "in-flight rule off: a receiver keeps what died with the sender",
               solver=NoInflightRule),
    PlannedBug("gc-with-top", "low-watermark computed with the live instances' TOP",
               watermark=WatermarkWithTop),
    PlannedBug("gc-drop-lw", "GC deletes the checkpoint at the watermark itself",
               prune=prune_at_watermark),
    PlannedBug("prefix-rollback", "prefix instead of selective restore",
               history_at=prefix_history),
)


# ---------------------------------------------------------------- the running protocol
# Each is FalkirkInstance/FalkirkCoordinator with one rule broken, as the conformance kit
# runs them (contract Mutant objects in MUTANTS); every one loses or duplicates output
# under seeded crash schedules (tests/test_falkirk_runs.py records the seeds).


def _coordinator(name: str, solver: type[FixedPoint] | None = None,
                 watermark: type[gc.Watermark] | None = None,
                 **methods: Callable[..., Any]) -> type[FalkirkCoordinator]:
    attrs: dict[str, Any] = dict(methods)
    if solver is not None:
        attrs["solver"] = solver
    if watermark is not None:
        attrs["watermark"] = watermark
    return type(f"FalkirkCoordinator_{name}", (FalkirkCoordinator,), attrs)


def _instance(name: str, **methods: Callable[..., Any]) -> type[FalkirkInstance]:
    return type(f"FalkirkInstance_{name}", (FalkirkInstance,), dict(methods))


class _ClaimsEveryEpoch(Policy):
    """A policy that reports a checkpoint at every epoch but persists only lazily."""

    def restorable(self, t: int, offset: int = 0) -> bool:
        return True


def _lying_init(self: FalkirkInstance, me: Any, cores: Any, params: Any) -> None:
    FalkirkInstance.__init__(self, me, cores, params)
    p = self.policy
    self.policy = _ClaimsEveryEpoch(p.kind, p.every, p.logs)


def _gc_at_lw(self: FalkirkCoordinator, i: str) -> int | None:
    bound = FalkirkCoordinator._gc_bound(self, i)
    return None if bound is None else bound + 2  # deletes the state at lw itself


def _resume_late(self: FalkirkCoordinator, i: str, plan: Any) -> int:
    return FalkirkCoordinator._source_resume(self, i, plan) + 1


def _keep_staged(self: FalkirkCoordinator, plan: Any) -> list[Any]:
    return [a for a in FalkirkCoordinator._recover(self, plan)
            if not isinstance(a, DiscardStaged)]


def _note_chain(self: FalkirkCoordinator, ev: StoreFault, view: Any) -> list[CoordinatorAction]:
    self.__dict__["before"] = (ev.instance, list(self.chains.get(ev.instance, [])))
    return FalkirkCoordinator.on_store_fault(self, ev, view)


def _fall_back_alone(self: FalkirkCoordinator) -> RollbackPlan | None:
    """The plan as if the bad entry were good, but its instance restarts at its newest
    older entry (or its initial state): what depends on the bad entry keeps its frontier."""
    before = self.__dict__.get("before")
    if self.bad is None or before is None:
        return FalkirkCoordinator._plan(self)
    i, chain = before
    left, self.chains[i] = self.chains[i], chain
    try:
        plan = FalkirkCoordinator._plan(self)
    finally:
        self.chains[i] = left
    if plan is None:
        return None
    f = plan.frontiers[i]
    older = [e.front for e in left if e.front is not TOP and (f is TOP or e.front <= f)]
    back = max(older, default=-1)
    self.lw[i] = min(self.lw[i], back)
    return replace(plan, frontiers={**plan.frontiers, i: back})


def _segment_before_last_send(self: FalkirkInstance, t: int) -> list[list[Any]]:
    return FalkirkInstance._segment(self, t)[:-1]  # the last batch was sent, not logged


MUTANTS: tuple[Mutant, ...] = (
    Mutant("phi-off-by-one", "projection claims one more epoch fixed",
           coordinator=_coordinator("phi", PhiOffByOne)),
    Mutant("firewall-ignored", "an ephemeral operator's dependence ignored (D̄ dropped)",
           coordinator=_coordinator("fw", IgnoreDiscards)),
    Mutant("no-rewind", "downstream output not discarded: a live receiver keeps what a "
           "rolled-back sender had sent beyond its frontier",
           coordinator=_coordinator("rewind", _rewinds=lambda self, plan, r, m: {})),
    Mutant("skip-fixpoint-iteration", "one sweep instead of the fixed point",
           coordinator=_coordinator("sweep", OneSweep)),
    Mutant("no-inflight", "a receiver keeps what died in flight with its sender",
           coordinator=_coordinator("inflight", NoInflightRule)),
    Mutant("gc-too-eager", "GC deletes the checkpoint at the low-watermark",
           coordinator=_coordinator("gc", _gc_bound=_gc_at_lw)),
    Mutant("source-resumes-late", "a restarted source skips the first epoch a receiver lacks",
           coordinator=_coordinator("late", _source_resume=_resume_late)),
    Mutant("report-without-persist", "a checkpoint is reported for an epoch never persisted",
           instance=_instance("lie", __init__=_lying_init)),
    Mutant("logging-after-sending", "the last batch of an epoch is sent but not logged",
           instance=_instance("log", _segment=_segment_before_last_send),
           params={"default_stateless": "log"}),
    Mutant("sink-keeps-rewound-output", "downstream output not discarded: a sink keeps "
           "what a rolled-back sender had produced",
           instance=_instance("sink", _drop_chunks=lambda self, ch, k: None)),
    Mutant("sink-keeps-staged", "a failed sink's staged, uncommitted output is kept and its "
           "replacement stages the same epochs again",
           coordinator=_coordinator("staged", _recover=_keep_staged)),
    Mutant("no-positional-skip", "a receiver processes batches it already has (R10 off)",
           instance=_instance("skip", _duplicate=lambda self, ch, t, j: False)),
    Mutant("stateful-not-aligned", "a stateful instance processes later epochs early",
           instance=_instance("align", _waits=lambda self, t: False)),
    Mutant("stale-checkpoints-kept", "after a rollback to f, entries of F* above f (and a "
           "rewound sink channel's commits) stay restorable",
           coordinator=_coordinator("stale", _forget_above=lambda self, plan, r, w: None),
           params={"default_stateless": "log"}),
    Mutant("fallback-alone", "a bad checkpoint is excluded for its own instance only: it "
           "falls back to an older entry (or its initial state) while what depends on it "
           "keeps the frontiers solved with the bad one",
           coordinator=_coordinator("alone", on_store_fault=_note_chain,
                                    _plan=_fall_back_alone),
           kinds=("crash", "corrupt"), budget=30),
)
