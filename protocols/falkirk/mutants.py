"""Planted bugs in falkirk's rules, each one rule of the spec broken (spec §7).

The first ten break the pure layer (solver, GC, selective restore) and are caught by the
worked examples (tests/test_falkirk_mutants.py); they mirror the spec's reference script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocols.falkirk import gc, selective
from protocols.falkirk.fixedpoint import FixedPoint
from protocols.falkirk.frontier import TOP, Domain, EpochDomain, Frontier, LoopDomain, VectorDomain
from protocols.falkirk.model import Dataflow, Entry


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
