"""The nemesis: runs a planned fault schedule against a `FaultContext` in a thread.

Typical use by a host::

    nemesis = Nemesis.from_scenario(scenario, ctx, duration=60.0, on_event=store.event)
    nemesis.start()          # when the topology is running: offsets count from here
    ...                      # the run
    nemesis.stop()           # heals whatever is still active; safe to call twice
    atomic_write_json(store.path / "schedule.json", nemesis.recorded())

Replay: ``Nemesis.from_record(json.load(...), ctx, ...)`` or ``Nemesis.from_events(
store.read_history(), ctx, ...)`` strikes the same targets at the same offsets (triggered
faults at the offset where they fired), with the same per-fault seeds.

Each strike runs in its own thread, so a kill-group spreading kills over its window or a
restore-capacity waiting minutes for arrivals never delays the next fault. Events go to
``on_event(kind, **data)`` (``RunStore.event`` fits), as history records
(docs/history.md): ``fault-injected``, ``fault-healed``, ``fault-step`` (one worker of a
group killed / restored), ``fault-deferred``, ``fault-retargeted`` and ``fault-error``
(the target was not there), each with ``fault`` = ``"index.occurrence"`` and the fault's
``type``. ``at`` in them is the context's run clock.

Triggers and relative faults are the engine's (``chaos.engine``, which the simulation
host uses too); this module is the Spark host's side of its port: it polls the phases the
engine waits for, and a poll that sees a phase open where it was not is an opening
(``snapshotting``: as the ``during-checkpoint`` trigger sees it; ``recovering``: the
coordinator's recovery; any other: ``ctx.phase_active``); ``ctx.phase_holders(P)`` names
the holders a ``target: phase-holder`` draws from; an injection starts what follows it
(a strike that fails starts nothing). A phase-holder occurrence that finds no holder is
a ``fault-error`` and uses no occurrence of its ``count``.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from chaos.context import FaultContext, InjectRecord, Ledger
from chaos.engine import FaultEngine
from chaos.faults import ChaosFault, FaultError, NotRunning
from chaos.registry import FAULTS
from chaos.schedule import PlannedFault, plan, random_kills
from ftctl.config.scenario import FAULT_TYPES, RECOVERING, Scenario
from ftctl.kernel.history import HistoryEvent, read_history

POLL = 0.01  # seconds between looks at the triggers' phases (snapshot/recovery)
JOIN_TIMEOUT = 10.0
# A fault whose target is being restarted waits this long for it to run again: under a
# global rollback every instance restarts, and on a loaded machine that takes seconds.
DEFER_LIMIT = 30.0


class EventCallback(Protocol):
    def __call__(self, kind: str, **data: Any) -> None: ...


def _ignore(kind: str, **data: Any) -> None:
    return None


@dataclass
class _Strike:
    """One fired occurrence: its fault object, thread, and what happened."""

    planned: PlannedFault
    fault: ChaosFault
    fired_at: float  # offset from the nemesis start
    record: InjectRecord | None = None
    error: str | None = None
    healed_at: float | None = None
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def healable(self) -> bool:
        return FAULT_TYPES[self.planned.type].takes_duration

    def to_json(self) -> dict[str, Any]:
        data = self.planned.to_json()
        data.update(
            fired_at=round(self.fired_at, 6),
            inject=self.record.to_json() if self.record is not None else None,
            healed_at=self.healed_at,
            error=self.error,
        )
        return data


class Nemesis:
    def __init__(
        self,
        schedule: Sequence[PlannedFault],
        ctx: FaultContext,
        on_event: EventCallback | None = None,
        *,
        seed: int = 0,
        name: str = "",
        poll: float = POLL,
        defer_limit: float = DEFER_LIMIT,
    ) -> None:
        self.ctx = ctx
        self.defer_limit = defer_limit
        self.on_event: EventCallback = on_event or _ignore
        self.seed = seed
        self.name = name
        self.poll = poll
        self.ledger = Ledger()
        self._schedule = sorted(schedule, key=_plan_order)
        # timed occurrences, the engine's and the followers it planned: busy() until struck
        self._timed: list[PlannedFault] = []
        # triggers and followers (chaos.engine); their planned occurrences wait in _due
        # (under _lock) until the nemesis thread takes them
        self._engine = FaultEngine(schedule, seed, ctx.instances, self)
        self._was_on: dict[str, bool] = {}
        self._due: list[PlannedFault] = []
        self._strikes: list[_Strike] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._started_at: float | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        ctx: FaultContext,
        duration: float,
        on_event: EventCallback | None = None,
    ) -> Nemesis:
        """The scenario planned against ``ctx.instances()`` for a run of ``duration`` s."""
        schedule = plan(scenario, ctx.instances(), duration)
        return cls(schedule, ctx, on_event, seed=scenario.seed, name=scenario.name)

    @classmethod
    def kills(
        cls, n: int, ctx: FaultContext, duration: float, seed: int,
        on_event: EventCallback | None = None,
    ) -> Nemesis:
        """``--kill N``: see ``random_kills``."""
        schedule = random_kills(n, ctx.instances(), duration, seed)
        return cls(schedule, ctx, on_event, seed=seed, name=f"kill-{n}")

    @classmethod
    def from_record(
        cls, record: Mapping[str, Any], ctx: FaultContext, on_event: EventCallback | None = None
    ) -> Nemesis:
        """Replay what ``recorded()`` returned: every occurrence that fired, at the offset
        it fired, with its target and seed. What never fired is not replayed."""
        schedule = [_replayed(f) for f in record.get("faults", []) if f.get("fired_at") is not None]
        name = str(record.get("name", ""))
        return cls(schedule, ctx, on_event, seed=int(record.get("seed", 0)), name=name)

    @classmethod
    def from_events(
        cls, events: Iterable[HistoryEvent | Mapping[str, Any]], ctx: FaultContext,
        on_event: EventCallback | None = None,
    ) -> Nemesis:
        """Replay from a run's history (``fault-injected`` / ``fault-error`` records carry
        their planned fault), for runs whose recorded schedule was not kept."""
        faults = [
            {**ev.data["planned"], "fired_at": ev.data["offset"]}
            for ev in read_history(events)
            if ev.kind in ("fault-injected", "fault-error") and "planned" in ev.data
        ]
        return cls.from_record({"faults": faults}, ctx, on_event)

    # ------------------------------------------------------------------ running

    @property
    def schedule(self) -> list[PlannedFault]:
        """The planned faults (trigger faults as their templates)."""
        return list(self._schedule)

    def start(self) -> None:
        """Start striking; offsets count from now (``ctx.now()``)."""
        if self._thread is not None:
            raise RuntimeError("this nemesis was already started")
        self._t0 = self.ctx.now()
        self._started_at = self._t0
        self._engine.start()  # the timed occurrences, into _due before the thread runs
        self._thread = threading.Thread(target=self._run, name="ftctl-nemesis", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        """Strike no more, cut short group kills and restores under way, heal every active
        fault (continue paused processes, lift channel faults). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            strikes = list(self._strikes)
        for strike in strikes:
            strike.fault.cancelled.set()
        for strike in strikes:
            if strike.thread is not None:
                strike.thread.join(timeout)
        for strike in strikes:
            self._heal(strike)  # a strike thread stuck in the context: heal from here

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every timed fault has struck and finished (trigger faults with no
        count keep the nemesis going until ``stop``). True if it got there."""
        if self._thread is None:
            return False
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        with self._lock:
            threads = [s.thread for s in self._strikes if s.thread is not None]
        for t in threads:
            t.join(timeout)
        return not any(t.is_alive() for t in threads)

    def busy(self) -> bool:
        """Timed faults still to strike, or strikes still at work (a group kill spreading
        over its window, restores waiting for arrivals, faults until their duration ends).
        Faults held until ``stop`` and trigger templates do not count."""
        with self._lock:
            fired = {(s.planned.index, s.planned.occurrence) for s in self._strikes}
            working = [s for s in self._strikes if s.thread is not None and s.thread.is_alive()
                       and not (s.healable and s.planned.duration is None)]
            timed = list(self._timed)
        if self._thread is None or self._stop.is_set():
            return False
        return bool(working) or any((p.index, p.occurrence) not in fired for p in timed)

    def recorded(self) -> dict[str, Any]:
        """The schedule as data: fired occurrences with what they hit, then anything that
        never fired (timed faults past the end, trigger templates)."""
        with self._lock:
            fired = [s.to_json() for s in self._strikes]
        fired_keys = {(f["index"], f["occurrence"]) for f in fired}
        unfired = [
            {**p.to_json(), "fired_at": None}
            for p in self._schedule
            if (p.index, p.occurrence) not in fired_keys or p.at is None
        ]
        return {"name": self.name, "seed": self.seed, "started_at": self._started_at,
                "faults": fired + unfired}

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        pending: list[PlannedFault] = []
        while not self._stop.is_set():
            now = self.ctx.now() - self._t0
            while pending and (pending[0].at or 0.0) <= now:
                self._fire(pending.pop(0), now)
            self._poll_phases(now)
            # Asked before taking the followers planned since (by strikes or triggers): once
            # nothing waits, every occurrence planned is already in _due.
            live_triggers = self._engine.waiting()
            with self._lock:
                pending = sorted([*pending, *self._due], key=_timed_order)
                self._due.clear()
            if not pending and not live_triggers:
                return
            wait = self.poll if live_triggers else float("inf")
            if pending:
                wait = min(wait, max(0.0, (pending[0].at or 0.0) - now))
            self._stop.wait(wait)

    def _poll_phases(self, now: float) -> None:
        """A phase seen open where it was not at the last poll is an opening."""
        for phase in self._engine.phases():
            on = self._phase(phase)
            if on and not self._was_on.get(phase, False):
                self._engine.phase_opened(phase, now)
            self._was_on[phase] = on

    # ------------------------------------------------------------------ the engine's port

    def deliver(self, planned: PlannedFault, now: float) -> None:
        self._fire(planned, now)

    def deliver_after(self, planned: PlannedFault, delay: float) -> None:
        # ``planned.at`` is already the offset ``delay`` from now: the thread's clock
        with self._lock:
            self._due.append(planned)  # its ``at`` is the offset to strike at
            self._timed.append(planned)  # busy() until it has struck

    def phase_holders(self, phase: str) -> list[str]:
        try:
            return sorted(self.ctx.phase_holders(phase))
        except Exception:
            return []  # a context that cannot tell has no holder

    def no_holder(self, planned: PlannedFault, phase: str, now: float) -> None:
        self._event("fault-error", planned, error=f"no instance holds {phase}", at=now,
                    offset=round(now, 6), planned=planned.to_json())

    def _phase(self, phase: str | None) -> bool:
        try:
            if phase == "snapshotting":
                return bool(self.ctx.snapshot_in_progress())
            if phase == RECOVERING:
                return bool(self.ctx.recovery_in_progress())
            return phase is not None and bool(self.ctx.phase_active(phase))
        except Exception:
            return False  # a context that cannot tell is never in the phase

    def _fire(self, planned: PlannedFault, now: float) -> None:
        strike = _Strike(planned, self._make(planned), now)
        strike.thread = threading.Thread(
            target=self._strike, args=(strike,), daemon=True,
            name=f"ftctl-fault-{planned.type}-{planned.index}.{planned.occurrence}",
        )
        with self._lock:
            self._strikes.append(strike)
        strike.thread.start()

    def _make(self, planned: PlannedFault) -> ChaosFault:
        def step(kind: str, data: dict[str, Any]) -> None:
            self._event("fault-step", planned, step=kind, **_no_reserved(data))

        return FAULTS[planned.type](
            planned.target, planned.params, duration=planned.duration, window=planned.window,
            seed=planned.seed, ledger=self.ledger, on_step=step,
        )

    def _strike(self, strike: _Strike) -> None:
        planned = strike.planned
        deferred: float | None = None
        while True:
            try:
                record = strike.fault.inject(self.ctx)
                break
            except NotRunning as exc:
                other = self._retarget(strike) if planned.retarget else None
                if other is not None:
                    self._event("fault-retargeted", planned, reason=str(exc), to=other,
                                at=self.ctx.now())
                    planned = strike.planned = replace(planned, target=other)
                    strike.fault = self._make(planned)
                    continue
                # Its target is being restarted: strike once it runs again, within a limit.
                now = self.ctx.now()
                if deferred is None:
                    deferred = now
                    self._event("fault-deferred", planned, reason=str(exc), at=now,
                                offset=round(strike.fired_at, 6))
                if self._stop.is_set() or now - deferred >= self.defer_limit:
                    self._failed(strike, f"{exc} (waited {now - deferred:.1f} s)")
                    return
                self._stop.wait(self.poll)
            except Exception as exc:  # the run goes on; the log says what went wrong
                known = isinstance(exc, FaultError)
                self._failed(strike, str(exc) if known else f"{type(exc).__name__}: {exc}")
                return
        with strike.lock:
            strike.record = record
        self._engine.injected(planned, record.t - self._t0)
        self._event("fault-injected", planned, at=record.t, offset=round(strike.fired_at, 6),
                    pids=record.pids, resolved=record.target, details=record.details,
                    planned=planned.to_json())
        if not strike.healable:
            return
        if planned.duration is not None:
            self._stop.wait(max(0.0, planned.duration - (self.ctx.now() - record.t)))
        else:
            self._stop.wait()  # no duration: active until the nemesis stops
        self._heal(strike)

    def _retarget(self, strike: _Strike) -> str | None:
        """Another instance that runs now, drawn with the fault's own seed (None: none)."""
        running = sorted(i for i in self.ctx.instances()
                         if i != strike.planned.target and self.ctx.task_pid(i) is not None)
        if not running:
            return None
        return random.Random(f"retarget/{strike.planned.seed}").choice(running)

    def _failed(self, strike: _Strike, error: str) -> None:
        strike.error = error
        self._event("fault-error", strike.planned, error=error, at=self.ctx.now(),
                    offset=round(strike.fired_at, 6), planned=strike.planned.to_json())

    def _heal(self, strike: _Strike) -> None:
        with strike.lock:
            if strike.record is None or strike.healed_at is not None or not strike.healable:
                return
            try:
                strike.fault.heal(self.ctx)
            finally:
                strike.healed_at = self.ctx.now()
        self._event("fault-healed", strike.planned, at=strike.healed_at,
                    resolved=strike.record.target, pids=strike.record.pids)

    def _event(self, kind: str, pf: PlannedFault, /, **data: Any) -> None:
        with contextlib.suppress(Exception):  # a failing log must not leave a fault active
            self.on_event(kind, fault=f"{pf.index}.{pf.occurrence}", type=pf.type,
                          target=pf.target, index=pf.index, occurrence=pf.occurrence, **data)


def _replayed(data: Mapping[str, Any]) -> PlannedFault:
    planned = PlannedFault.from_json(data)
    return PlannedFault(
        index=planned.index, occurrence=planned.occurrence, type=planned.type,
        target=planned.target, at=float(data["fired_at"]), duration=planned.duration,
        window=planned.window, params=dict(planned.params), seed=planned.seed,
    )


def _plan_order(p: PlannedFault) -> tuple[float, int, int]:
    return (p.at if p.at is not None else float("inf"), p.index, p.occurrence)


def _timed_order(p: PlannedFault) -> tuple[float, int, int]:
    return (p.at or 0.0, p.index, p.occurrence)


def _no_reserved(data: Mapping[str, Any]) -> dict[str, Any]:
    # History.write takes `kind` itself; a step's own time goes in as `at`, as before.
    renamed = {"t": "at", "kind": "what", "wall": "wall_"}
    return {renamed.get(k, k): v for k, v in data.items()}
