"""The kernel's phase set: which protocol phases are open, and who holds each occurrence.

A phase occurrence is opened and closed by ``DeclarePhase`` (an instance's, held by the
unit that declared it, or the coordinator's, held by the instance it names or by nobody)
and is told apart from overlapping ones by its holder and ``key``. The kernel's own
``recovering`` (``Lifecycle``: from a detection until every restart runs) is an
occurrence held by nobody, keyed by the recovery's number, of origin ``kernel``. Both
hosts write the ``phase-entered`` / ``phase-left`` records this returns; fault triggers
(``during: P``) ask ``active`` and ``holders``, the nemesis from another thread, hence
the lock.
"""

from __future__ import annotations

import threading

from ftctl.kernel.commands import Log

RECOVERING = "recovering"  # the phase every run has (ftctl.config.scenario.RECOVERING)
KERNEL = "kernel"  # the origin of the kernel's own occurrences (its ``recovering``)


class Phases:
    """Open occurrences per phase: ``phase -> {(origin, holder, key)}``; the origin keeps
    the kernel's own apart from a protocol's of the same holder and key."""

    def __init__(self) -> None:
        self._open: dict[str, set[tuple[str | None, str | None, int | None]]] = {}
        # How often each phase went from closed to open: a trigger strikes once per opening.
        self.openings: dict[str, int] = {}
        self._lock = threading.Lock()

    def declare(self, phase: str, on: bool, key: int | None, holder: str | None,
                reason: str | None = None, origin: str | None = None) -> list[Log]:
        """Open or close one occurrence; the history record, or nothing when it changes
        nothing (a second open of an open occurrence, a close of a closed one)."""
        occ = (origin, holder, key)
        with self._lock:
            held = self._open.setdefault(phase, set())
            if (occ in held) == on:
                return []
            if on:
                if not held:
                    self.openings[phase] = self.openings.get(phase, 0) + 1
                held.add(occ)
            else:
                held.discard(occ)
        data: dict[str, object] = {"phase": phase, "key": key}
        if holder is not None:
            data["instance"] = holder
        if reason is not None:
            data["reason"] = reason
        if origin is not None:
            data["by"] = origin
        return [Log("phase-entered" if on else "phase-left", data)]

    def drop_holder(self, holder: str, reason: str) -> list[Log]:
        """``holder``'s unit is gone (crashed, fenced): its occurrences end with it, or a
        dead unit would keep a phase open for the rest of the run."""
        with self._lock:
            gone = [(phase, key, origin) for phase, held in self._open.items()
                    for origin, who, key in held if who == holder]
        return [log for phase, key, origin in sorted(gone, key=repr)
                for log in self.declare(phase, False, key, holder, reason, origin)]

    def active(self, phase: str) -> bool:
        with self._lock:
            return bool(self._open.get(phase))

    def names(self) -> frozenset[str]:
        with self._lock:
            return frozenset(p for p, held in self._open.items() if held)

    def holders(self, phase: str) -> list[str]:
        """The instances holding an occurrence of ``phase`` (sorted; none for an
        occurrence the coordinator holds alone)."""
        with self._lock:
            return sorted({h for _o, h, _key in self._open.get(phase, ()) if h is not None})
