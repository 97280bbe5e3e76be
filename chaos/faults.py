"""The fault types: one class each, with `Params`, `inject(ctx)` and `heal(ctx)`.

``Params``, ``description`` and ``scope`` come from the registry
(``ftctl.config.fault_kinds``, whose ``spark`` field names these classes; the scenario
model validates the same params when a file is loaded); this module adds the behaviour.

Targets (see ``parse_target``) resolve at inject time against the context:
an instance (``count[1]``) is that instance; an operator (``count``) or ``random`` is one
instance drawn with the fault's seed (the scheduler normally resolves both before, so the
schedule names the instance); a selector (``rack=a``) is a live worker with those labels
(kill-group: all of them), or for instance faults an instance running on one.

Some injects take time (kill-group spreads its kills over a window, restore-capacity waits
for arrivals, slow keeps a duty-cycle thread): they wait on ``self.cancelled`` so
``heal`` can cut them short.
"""

from __future__ import annotations

import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import psutil
from pydantic import BaseModel

from chaos import procs
from chaos.arrivals import arrival_offsets
from chaos.context import (
    AgentDelivery,
    ChannelFault,
    ChannelKind,
    FaultContext,
    InjectRecord,
    Ledger,
    WorkerRef,
    selects,
)
from ftctl.config.fault_kinds import Scope
from ftctl.config.scenario import (
    FAULT_TYPES,
    PARAMS,
    PeerParams,
    RestoreParams,
    SlowParams,
    Target,
    parse_target,
)

StepCallback = Callable[[str, dict[str, Any]], None]

SLOW_PERIOD = 0.1  # seconds per stop/continue cycle of `slow`; short enough to look smooth


class FaultError(Exception):
    """A fault could not be injected (its target is not running, no worker matches ...)."""


class NotRunning(FaultError):
    """The target instance exists but has no running task now (it is being restarted);
    the nemesis defers the fault until it runs again."""


def _no_step(_kind: str, _data: dict[str, Any]) -> None:
    return None


class ChaosFault(ABC):
    """Base of the fault types. One object per injection (an occurrence of a fault)."""

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    scope: ClassVar[Scope] = "instance"

    def __init__(
        self,
        target: str,
        params: BaseModel | Mapping[str, Any] | None = None,
        *,
        duration: float | None = None,
        window: float | None = None,
        seed: int = 0,
        ledger: Ledger | None = None,
        on_step: StepCallback | None = None,
    ) -> None:
        self.target = target
        self.parsed: Target = parse_target(target)
        data = params.model_dump() if isinstance(params, BaseModel) else dict(params or {})
        self.params = self.Params.model_validate(data)
        self.duration = duration
        self.window = window
        self.seed = seed
        self.rng = random.Random(seed)
        self.ledger = ledger if ledger is not None else Ledger()
        self.on_step = on_step or _no_step
        self.cancelled = threading.Event()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Params, description and scope are the registry's, so they cannot drift apart.
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            kind = FAULT_TYPES[cls.name]
            cls.description = kind.description
            cls.Params = PARAMS[cls.name]
            cls.scope = kind.scope

    @abstractmethod
    def inject(self, ctx: FaultContext) -> InjectRecord:
        """Strike; returns what was hit. Raises FaultError when the target is not there."""

    def heal(self, ctx: FaultContext) -> None:
        """Undo what can be undone (continue, lift a channel fault) and stop pending work.

        Idempotent. Kills cannot be undone: capacity comes back through restore-capacity.
        """
        self.cancelled.set()

    # ------------------------------------------------------------------ target helpers

    def _record(
        self, ctx: FaultContext, target: str, pids: list[int], **details: Any
    ) -> InjectRecord:
        return InjectRecord(self.name, target, ctx.now(), pids, dict(details))

    def _instance(self, ctx: FaultContext) -> str:
        """The instance this fault hits."""
        t = self.parsed
        if t.kind == "instance":
            return self.target
        if t.kind == "selector":
            hosts = {w.pid for w in _matching(ctx, t)}
            on = [
                i for i in ctx.instances()
                if (pid := ctx.task_pid(i)) is not None and procs.ancestor_in(pid, hosts)
            ]
            if not on:
                raise FaultError(f"no running instance on a worker matching {self.target}")
            return self.rng.choice(on)
        pool = [
            i for i in ctx.instances()
            if t.kind == "random" or i.partition("[")[0] == t.operator
        ]
        if not pool:
            raise FaultError(f"no instance of {self.target}")
        return self.rng.choice(pool)

    def _task_pid(self, ctx: FaultContext, instance: str) -> int:
        pid = ctx.task_pid(instance)
        if pid is None:
            raise NotRunning(f"{instance} is not running")
        return pid

    def _worker(self, ctx: FaultContext) -> WorkerRef:
        """One live worker: a seeded pick among those matching a selector, or the one
        running the target instance."""
        if self.parsed.kind == "selector":
            live = _matching(ctx, self.parsed)
            if not live:
                raise FaultError(f"no live worker matches {self.target}")
            return self.rng.choice(sorted(live, key=lambda w: w.id))
        pid = self._task_pid(ctx, self._instance(ctx))
        workers = ctx.workers()
        host = procs.ancestor_in(pid, [w.pid for w in workers])
        if host is None:
            raise FaultError(f"no live worker runs {self.target}")
        return next(w for w in workers if w.pid == host)

    def _process(self, ctx: FaultContext) -> tuple[str, int]:
        """(what, pid) of the process tree a pause/slow acts on: a worker for a selector,
        otherwise the instance's task."""
        if self.parsed.kind == "selector":
            worker = self._worker(ctx)
            return worker.id, worker.pid
        instance = self._instance(ctx)
        return instance, self._task_pid(ctx, instance)

    def _wait_until(self, ctx: FaultContext, t: float) -> bool:
        """Sleep until run time ``t``; False if cancelled first."""
        remaining = t - ctx.now()
        if remaining > 0:
            return not self.cancelled.wait(remaining)
        return not self.cancelled.is_set()


def _agent(ctx: FaultContext) -> AgentDelivery | None:
    """The context's fault agent when process faults must go through it (``--master``)."""
    return ctx if isinstance(ctx, AgentDelivery) and ctx.through_agent() else None


def _by_agent(fault: ChaosFault, ctx: FaultContext, agent: AgentDelivery, op: str,
              factor: float = 1.0) -> InjectRecord:
    """Strike the target instance through its task's agent: nothing is signalled here."""
    instance = fault._instance(ctx)
    if op in ("pause", "slow") and fault.duration is None:
        raise FaultError(f"{op} of {instance} through the task's agent needs a duration")
    # The pid the task reported, for the record (detections name it), never signalled.
    pid = ctx.task_pid(instance)
    record = fault._record(ctx, instance, [pid] if pid is not None else [], via="agent")
    if not agent.agent_fault(instance, op, fault.duration, factor):
        raise NotRunning(f"{instance} is not running")
    return record


def _matching(ctx: FaultContext, target: Target) -> list[WorkerRef]:
    selector = dict(target.labels)
    return [w for w in ctx.workers() if selects(w, selector)]


# ---------------------------------------------------------------------------- kills


class KillTask(ChaosFault):
    name = "kill-task"

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if (agent := _agent(ctx)) is not None:
            return _by_agent(self, ctx, agent, "kill")
        instance = self._instance(ctx)
        pid = self._task_pid(ctx, instance)
        record = self._record(ctx, instance, [pid])
        if not procs.kill(pid):
            raise FaultError(f"{instance}'s task (pid {pid}) was already gone")
        return record


class KillExecutor(ChaosFault):
    name = "kill-executor"

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if (agent := _agent(ctx)) is not None:
            return _by_agent(self, ctx, agent, "kill-executor")
        executors = ctx.executor_pids()
        if self.parsed.kind == "selector":
            hosts = [w.pid for w in _matching(ctx, self.parsed)]
            pids = [p for p in executors.values() if procs.ancestor_in(p, hosts)]
            what = self.target
        else:
            what = self._instance(ctx)
            found = procs.ancestor_in(self._task_pid(ctx, what), executors.values())
            pids = [found] if found is not None else []
        if not pids:
            raise FaultError(f"no executor found for {self.target}")
        record = self._record(ctx, what, pids)
        for pid in pids:
            procs.kill(pid)
        return record


class KillWorker(ChaosFault):
    name = "kill-worker"

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if (agent := _agent(ctx)) is not None and self.parsed.kind != "selector":
            # --master: the target's task kills the worker it runs under (no restore:
            # starting a worker needs the cluster's hosts).
            return _by_agent(self, ctx, agent, "kill-worker")
        worker = self._worker(ctx)
        record = self._record(ctx, worker.id, [worker.pid], labels=dict(worker.labels))
        ctx.kill_worker(worker.id)
        self.ledger.add(worker)
        return record


class KillGroup(ChaosFault):
    """Correlated failure: the matching workers die at seeded offsets within `window`."""

    name = "kill-group"

    def members(self, ctx: FaultContext) -> list[WorkerRef]:
        live = sorted(ctx.workers(), key=lambda w: w.id)
        if self.parsed.kind == "selector":
            selector = dict(self.parsed.labels)
        elif self.parsed.kind == "random":
            # A random failure domain: one label pair that some live worker carries.
            pairs = sorted({(k, v) for w in live for k, v in w.labels.items()})
            if not pairs:
                raise FaultError("kill-group random: no live worker has labels")
            selector = dict([self.rng.choice(pairs)])
        else:
            raise FaultError(f"kill-group needs a label selector, not {self.target}")
        members = [w for w in live if selects(w, selector)]
        if not members:
            raise FaultError(f"no live worker matches {self.target}")
        return members

    def inject(self, ctx: FaultContext) -> InjectRecord:
        members = self.members(ctx)
        window = self.window or 0.0
        offsets = sorted(self.rng.uniform(0.0, window) for _ in members)
        self.rng.shuffle(members)  # which worker dies first is seeded too
        record = self._record(ctx, self.target, [], kills=[], window=window)
        start = record.t
        lock = threading.Lock()

        def strike(worker: WorkerRef, offset: float) -> None:
            if not self._wait_until(ctx, start + offset):
                record.details["cancelled"] = True
                return
            t = ctx.now()
            try:
                ctx.kill_worker(worker.id)
            except Exception as exc:  # one worker already gone must not spare the rest
                self.on_step("kill-failed", {"worker": worker.id, "error": str(exc)})
                return
            self.ledger.add(worker)
            kill = {"worker": worker.id, "pid": worker.pid, "offset": round(offset, 6), "t": t}
            with lock:
                record.pids.append(worker.pid)
                record.details["kills"].append(kill)
            self.on_step("worker-killed", kill)

        # One thread per member: killing a worker's process tree takes a second or two, which
        # must not push the next kill past its offset (and out of the window).
        threads = [threading.Thread(target=strike, args=(w, o), daemon=True,
                                    name=f"ftctl-kill-{w.id}")
                   for w, o in zip(members, offsets, strict=True)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        record.details["kills"].sort(key=lambda k: k["offset"])
        record.pids = [k["pid"] for k in record.details["kills"]]
        return record


# ---------------------------------------------------------------------------- stop/continue


class Pause(ChaosFault):
    name = "pause"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopped: list[psutil.Process] = []
        self._lock = threading.Lock()

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if (agent := _agent(ctx)) is not None:  # the task continues itself after duration
            return _by_agent(self, ctx, agent, "pause")
        what, pid = self._process(ctx)
        record = self._record(ctx, what, [])
        with self._lock:
            self._stopped = procs.stop_tree(pid)
        if not self._stopped:
            raise FaultError(f"{what} (pid {pid}) is not running")
        record.pids = [p.pid for p in self._stopped]
        return record

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        with self._lock:
            stopped, self._stopped = self._stopped, []
        procs.cont_tree(stopped)


class Slow(ChaosFault):
    """Slow node: a duty cycle of SIGSTOP/SIGCONT lets the tree run 1/factor of the time."""

    name = "slow"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._thread: threading.Thread | None = None
        self._seen: dict[int, psutil.Process] = {}

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if (agent := _agent(ctx)) is not None:
            return _by_agent(self, ctx, agent, "slow", cast(SlowParams, self.params).factor)
        what, pid = self._process(ctx)
        if not procs.tree(pid):
            raise FaultError(f"{what} (pid {pid}) is not running")
        factor = cast(SlowParams, self.params).factor
        record = self._record(ctx, what, [pid], factor=factor, period=SLOW_PERIOD)
        self._thread = threading.Thread(
            target=self._cycle, args=(pid, factor), name=f"ftctl-slow-{what}", daemon=True
        )
        self._thread.start()
        return record

    def _cycle(self, pid: int, factor: float) -> None:
        running = SLOW_PERIOD / factor
        try:
            while not self.cancelled.is_set():
                # The tree is read again each cycle: a slowed worker may start executors.
                tree = procs.stop_tree(pid)
                if not tree:
                    return
                for proc in tree:
                    self._seen.setdefault(proc.pid, proc)
                if self.cancelled.wait(SLOW_PERIOD - running):
                    return
                procs.cont_tree(tree)
                if self.cancelled.wait(running):
                    return
        finally:
            procs.cont_tree(list(self._seen.values()))

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        procs.cont_tree(list(self._seen.values()))


# ---------------------------------------------------------------------------- channels


class _ChannelFaultBase(ChaosFault):
    kind: ClassVar[ChannelKind]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: ChannelFault | None = None

    def _peers(self, ctx: FaultContext, src: str) -> tuple[str, ...]:
        peer = cast(PeerParams, self.params).peer
        if peer is None:
            return ()
        t = parse_target(peer)
        others = [i for i in ctx.instances() if i != src]
        if t.kind == "instance":
            return (peer,)
        if t.kind == "operator":
            return tuple(i for i in others if i.partition("[")[0] == t.operator)
        if t.kind == "random":
            return (self.rng.choice(others),) if others else ()
        hosts = {w.pid for w in _matching(ctx, t)}
        return tuple(
            i for i in others
            if (pid := ctx.task_pid(i)) is not None and procs.ancestor_in(pid, hosts)
        )

    def inject(self, ctx: FaultContext) -> InjectRecord:
        src = self._instance(ctx)
        dst = self._peers(ctx, src)
        if cast(PeerParams, self.params).peer is not None and not dst:
            raise FaultError(f"no peer {cast(PeerParams, self.params).peer} of {src}")
        params = self.params.model_dump(exclude={"peer"})
        self.spec = ChannelFault(
            src=src, dst=dst, kind=self.kind, params=params, seed=self.rng.getrandbits(32)
        )
        record = self._record(ctx, src, [], channel=self.spec.to_json())
        ctx.channel_fault(self.spec)
        return record

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        spec, self.spec = self.spec, None
        if spec is not None:
            ctx.clear_channel_fault(spec.id)


class Partition(_ChannelFaultBase):
    name = "partition"
    kind = "partition"


class Delay(_ChannelFaultBase):
    name = "delay"
    kind = "delay"


class Drop(_ChannelFaultBase):
    name = "drop"
    kind = "drop"


# ---------------------------------------------------------------------------- capacity


class RestoreCapacity(ChaosFault):
    """Start replacements for the workers this run lost (matching the target selector;
    ``random`` = all lost), at once or one by one at seeded arrival offsets."""

    name = "restore-capacity"

    def inject(self, ctx: FaultContext) -> InjectRecord:
        selector = dict(self.parsed.labels) if self.parsed.kind == "selector" else None
        lost = self.ledger.take(selector)
        offsets = arrival_offsets(cast(RestoreParams, self.params), len(lost), self.rng)
        record = self._record(ctx, self.target, [], started=[], offsets=offsets)
        start = record.t
        for i, (worker, offset) in enumerate(zip(lost, offsets, strict=True)):
            if not self._wait_until(ctx, start + offset):
                # Not restored: still lost, for a later restore-capacity to bring back.
                for rest in lost[i:]:
                    self.ledger.add(rest)
                record.details["cancelled"] = True
                break
            new = ctx.start_worker(dict(worker.labels))
            step = {"worker": new.id, "pid": new.pid, "replaces": worker.id,
                    "labels": dict(new.labels), "offset": round(offset, 6), "t": ctx.now()}
            record.pids.append(new.pid)
            record.details["started"].append(step)
            self.on_step("worker-started", step)
        return record
