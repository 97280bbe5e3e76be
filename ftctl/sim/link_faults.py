"""Channel faults (``SimHost.inject``: partition, delay, drop), as on Spark.

- partition / drop: messages between the two units (both ways, channels and peer messages)
  are lost. Channels are reliable while both ends live, so a receiver that lost one is
  fenced as failed at once (Spark: "frame(s) lost to a channel fault") and detected after
  the crash detection delay; ``fault-skipped`` if the protocol's fault model spares it.
- delay: what the unit sends takes ``extra`` longer; each channel stays FIFO.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal, cast

from ftctl.sim.faults import Delay, Drop, Partition
from ftctl.sim.striking import Striking


@dataclass(eq=False)
class Link:
    """A channel fault: messages between ``a`` and ``peers`` are lost or delayed."""

    kind: Literal["partition", "delay", "drop"]
    a: str
    peers: frozenset[str] | None  # None: every peer of ``a``
    both_ways: bool
    rng: random.Random
    extra: float = 0.0
    jitter: float = 0.0
    probability: float = 1.0

    def hits(self, src: str, dst: str) -> bool:
        if src == self.a and (self.peers is None or dst in self.peers):
            return True
        return self.both_ways and dst == self.a and (self.peers is None or src in self.peers)


class LinkFaults(Striking):
    """The channel faults under way, by fault id, and what they do to each message."""

    links: dict[int, Link]

    def _link_fault(self, f: Partition | Delay | Drop) -> None:
        kind = cast(Literal["partition", "delay", "drop"], type(f).__name__.lower())
        unit = self._target(kind, f.target)
        if unit is None:
            return
        peers: frozenset[str] | None = frozenset(f.peers) if f.peers else None
        if isinstance(f, Partition) and peers is None and f.draw_peer:
            near = sorted(set(self.graph.upstream(unit.id)) | set(self.graph.downstream(unit.id)))
            if near:
                peers = frozenset({self.rng.choice(near)})
        link = Link(kind, unit.id, peers, not isinstance(f, Delay) or f.both_ways,
                     random.Random(self.rng.getrandbits(32)))
        data: dict[str, Any] = {"peers": sorted(peers) if peers else "all"}
        if isinstance(f, Delay):
            link.extra, link.jitter = f.extra, f.jitter
            data["extra"] = round(f.extra, 6)
        elif isinstance(f, Drop):
            link.probability = data["probability"] = f.probability
        fid = self.fault_injected(kind, unit.id, f.duration, **data)
        self.links[fid] = link

        def heal() -> None:
            del self.links[fid]
            self.fault_healed(fid, kind, unit.id)

        self.at(self.now + f.duration, heal)

    def _through_links(self, src: str, dst: str, unit: str | None = None) -> float | None:
        """The extra delay channel faults put on a message from ``src`` to slot ``dst``
        (hosted by ``unit``); None: it is lost, and its receiver fenced."""
        extra = 0.0
        for link in self.links.values():
            if not link.hits(src, dst):
                continue
            if link.kind == "delay":
                extra += link.extra + link.jitter * link.rng.random()
            elif link.kind == "partition" or link.rng.random() < link.probability:
                to = unit or (self.routing.unit_of(dst) if self.routing.moved else dst)
                if self._frame_lost(src, to):
                    return None
        return extra

    def _frame_lost(self, src: str, to: str) -> bool:
        """A message from ``src`` to the live unit ``to`` is lost: channels are reliable
        while both ends live, so ``to`` is fenced as failed (Spark: "frame(s) lost to a
        channel fault"). False when the protocol's fault model spares it: then the
        message goes through."""
        if to not in self.live:
            return True  # lost with its receiver anyway
        if self.spared and not self._spare([to], "frame-lost"):
            return False
        self._apply(self.kernel.lost(to))
        self._kill(to, crashed=False)
        self.stats.failures += 1
        self.stats.failed_instances.append(to)
        lost = self._log("frame-lost", instance=to, sender=src)
        detect = self.now + 0.002 + 0.004 * self.rng.random()
        self._push(detect, "fence_detect", (frozenset({to}), "heartbeat",
                                            {to: f"frame(s) from {src} lost to a channel "
                                                 "fault"}, lost.seq))
        return True
