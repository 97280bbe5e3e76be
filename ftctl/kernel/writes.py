"""Fewer store writes for the actions of several events carried out at once.

A host that drains many events before it flushes (the Spark task: every action of a
flush reaches the coordinator in one frame, after every write of it) may write less than
one object per ``Persist`` without changing what any output depends on. Each store
object costs a file creation and a rename; on a journaled disk that is 0.2-1 ms, and a
sink that persists with every output spent its time there instead of on its input.
"""

from __future__ import annotations

from typing import Any

from ftctl.runtime.actions import Emit, Send
from protocols.contract.actions import Persist, Report

# What may lie between two deltas folded into one write: neither reaches the coordinator
# as anything that could end the unit's incarnation half-way through its frame.
_HARMLESS = (Emit, Send)


def fewer_writes(acts: list[Any]) -> list[Any]:
    """``acts`` with overwritten Persists dropped and chained deltas folded."""
    if sum(1 for a in acts if type(a) is Persist) < 2:
        return acts
    return folded_chains(latest_persists(acts))


def latest_persists(acts: list[Any]) -> list[Any]:
    """``acts`` without the Persists a later Persist of the same snapshot part overwrites.

    A log-based sink persists its de-duplication state with every batch it outputs; one
    file write per batch capped the sharder topology at a few thousand records/s. All of
    a flush reaches the coordinator in one frame, so only the newest blob of a part is
    needed, unless a Report lies between: the coordinator may act on it (read the store,
    stop this instance) before the rest of the frame, so a Persist before one is kept.
    """
    later: set[tuple[int, str]] = set()
    keep: list[Any] = []
    for a in reversed(acts):
        t = type(a)
        if t is Report:
            later.clear()
        elif t is Persist:
            key = (a.ref, a.slot)
            if key in later:
                continue
            later.add(key)
        keep.append(a)
    keep.reverse()
    return keep


def folded_chains(acts: list[Any]) -> list[Any]:
    """``acts`` with each run of deltas of one slot's chain written as one (``Chain``).

    The folded delta takes the first delta's place: every output of the run comes after
    it, so none is shown before what counts it is written. It is stored under the last
    delta's ref. Only ``Emit`` and ``Send`` may lie between the deltas of a run: were the
    coordinator to end the incarnation between two outputs (on a Report, a phase, a
    failed write), the folded delta would count outputs it never showed.
    """
    out: list[Any] = []
    run: dict[str, int] = {}  # slot -> index in ``out`` of its open delta
    for a in acts:
        t = type(a)
        if t is Persist:
            at = run.get(a.slot)
            chain = a.chain
            if at is not None and chain is not None:
                first = out[at]
                if first.chain.key == chain.key:
                    out[at] = Persist(a.slot, a.ref, chain.fold(first.blob, a.blob), chain)
                    continue
            if chain is None:
                run.pop(a.slot, None)
            else:
                run[a.slot] = len(out)
        elif t not in _HARMLESS:
            run.clear()
        out.append(a)
    return out
