"""Container faults (docker backend): a worker's whole container is killed, stopped,
frozen or restarted through the engine, as a node crash, a clean shutdown, a hung
machine or a reboot would be, rather than signalled process by process.

They act through ``FaultContext.container``; where the workers are processes, the
context raises FaultError (and ``ftctl chaos`` refuses them before the run).

Targets: a selector (``rack=a``, ``worker=w1``) is a seeded pick among the matching live
workers; an instance or operator is the worker running it; ``random`` is a seeded pick
among every live worker when the fault strikes.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from chaos.context import ContainerAction, FaultContext, InjectRecord, WorkerRef
from chaos.faults import ChaosFault, FaultError
from ftctl.config.scenario import StopParams


class ContainerFault(ChaosFault):
    action: ClassVar[ContainerAction]

    def inject(self, ctx: FaultContext) -> InjectRecord:
        worker = self._victim(ctx)
        record = self._record(ctx, worker.id, [worker.pid], labels=dict(worker.labels),
                              action=self.action)  # fmt: skip
        ctx.container(worker.id, self.action, self._timeout())
        self.struck(worker, record)
        return record

    def struck(self, worker: WorkerRef, record: InjectRecord) -> None:
        """After the action: note a lost worker, remember what heal undoes."""

    def _victim(self, ctx: FaultContext) -> WorkerRef:
        if self.parsed.kind != "random":
            return self._worker(ctx)
        live = sorted(ctx.workers(), key=lambda w: w.id)
        if not live:
            raise FaultError("no live worker")
        return self.rng.choice(live)

    def _timeout(self) -> float | None:
        params = self.params
        return float(params.timeout) if isinstance(params, StopParams) else None


class _Undoable(ContainerFault):
    """A container fault that ``heal`` reverses with ``undo`` (at most once)."""

    undo: ClassVar[ContainerAction]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._struck: WorkerRef | None = None
        self._lock = threading.Lock()

    def struck(self, worker: WorkerRef, record: InjectRecord) -> None:
        with self._lock:
            self._struck = worker

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        with self._lock:
            worker, self._struck = self._struck, None
        if worker is None:
            return
        try:
            ctx.container(worker.id, self.undo)
        except Exception as exc:  # e.g. killed meanwhile; healing the rest must go on
            self.on_step("heal-failed", {"worker": worker.id, "error": str(exc)})


class ContainerKill(ContainerFault):
    name = "container-kill"
    action = "kill"

    def struck(self, worker: WorkerRef, record: InjectRecord) -> None:
        self.ledger.add(worker)


class ContainerStop(_Undoable):
    name = "container-stop"
    action = "stop"
    undo = "start"

    def struck(self, worker: WorkerRef, record: InjectRecord) -> None:
        if self.duration is not None:
            super().struck(worker, record)
        else:
            # Stopped for good: lost capacity, as after a kill, for restore-capacity.
            self.ledger.add(worker)


class ContainerPause(_Undoable):
    name = "container-pause"
    action = "pause"
    undo = "unpause"


class ContainerRestart(ContainerFault):
    name = "container-restart"
    action = "restart"
