"""What a bad stored object takes out of F* (a ``StoreFault``: corrupt or missing).

In the paper an instance's frontier is chosen among its *available* checkpoints (§3.4,
§3.6); one that cannot be read is simply not available. So a bad object removes the
entries of F*(p) that would need it, and the fixed point (Figure 6) is solved again over
what is left: the instance falls back to an older entry, and its dependants roll back as
far as consistency needs. Where no entry is left that fits (everything older is below the
low-watermark, discarded), no consistent choice exists and the run stops, naming the object.

Stored refs (spec X3): odd refs are states (``checkpoint_ref``), even refs output log
segments (``segment_ref``). A bad state at epoch k takes out the entry at k. A bad segment
of epoch t takes out every entry at or above t: restoring any of them would replay epoch t
from the log, while one below t re-executes t (and writes its segment again).
"""

from __future__ import annotations

from collections.abc import Iterable

from protocols.falkirk.frontier import TOP
from protocols.falkirk.model import Entry


def ref_epoch(ref: int) -> tuple[str, int]:
    """``("state" | "segment", epoch)`` of a stored ref (the inverse of spec X3)."""
    if ref % 2:
        return "state", (ref - 3) // 2
    return "segment", (ref - 4) // 2


def unusable(entry: Entry, ref: int) -> bool:
    """Whether restoring ``entry`` would read ``ref``. TOP (a live instance, or a source's
    replayable input) reads nothing from the store."""
    if entry.front is TOP:
        return False
    kind, k = ref_epoch(ref)
    return entry.front == k if kind == "state" else entry.front >= k


def without(chain: Iterable[Entry], ref: int) -> list[Entry]:
    """F*(p) once ``ref`` of p is known bad: the entries that do not need it."""
    return [e for e in chain if not unusable(e, ref)]
