"""Phase-triggered schedules of the conformance kit: a crash while a phase is open.

A random crash schedule alone seldom lands inside a short phase (a snapshot, a takeover);
the kit adds one crash at the k-th opening of the phase (k seeded, 1-3), after the actions
that opened it and only if it is still open then, on an instance holding it (else a
running instance): a ``during`` template the trigger engine serves
(``ftctl.sim.nemesis.phase_strike``). ``phase_problems`` is the phase contract those runs
are also judged on: a protocol declares only the phases its spec lists, and leaves what
it enters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ftctl.kernel.history import HistoryEvent
from ftctl.kernel.phases import KERNEL, RECOVERING


def phase_problems(events: Iterable[HistoryEvent], declared: Iterable[str],
                   complete: bool) -> dict[str, int]:
    """Breaches of the phase contract in one run's history: an occurrence of a phase the
    protocol does not declare (``undeclared-phase``), and, in a run that completed, one
    the protocol opened and never left (``phase-left-open``: ``during`` triggers see no
    new opening of it, the coordinator's view keeps it)."""
    known = set(declared) | {RECOVERING}
    held: set[tuple[str, str | None, object]] = set()
    out: Counter[str] = Counter()
    for e in events:
        if e.kind not in ("phase-entered", "phase-left") or e.data.get("by") == KERNEL:
            continue
        phase = str(e.data["phase"])
        occ = (phase, e.instance, e.data["key"])
        if e.kind == "phase-entered":
            if phase not in known:
                out["undeclared-phase"] += 1
            held.add(occ)
        else:
            held.discard(occ)
    if complete and held:
        out["phase-left-open"] += len(held)
    return dict(out)
