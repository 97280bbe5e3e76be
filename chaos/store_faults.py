"""Store faults on Spark: done by the driver on the run's snapshot store (``DirectoryStore``).

- corrupt / truncate / delete: one stored object, the scenario's ``snapshot`` of the
  target, else the target's newest (the one a recovery would read), has a byte flipped,
  loses its tail, or is removed (``DirectoryStore.damage``: the damaged bytes are written
  anew and take the object's place, so no reader sees half of them). Nothing happens
  until a recovery reads it: the coordinator's read then fails (``CorruptObject``,
  ``MissingObject``) and the protocol hears ``StoreFault``, as on the simulation host.
- store-unavailable: for ``duration`` the store holds its outage file
  (``DirectoryStore.OUTAGE_FILE``); every object read and write, by the driver or by a
  task, fails with ``StoreUnavailable`` while it is there. A file in the store reaches
  every process that uses the store, wherever it runs, with nothing sent to the tasks.
- store-full: for ``duration`` the store holds its full file (``DirectoryStore.FULL_FILE``);
  every object write fails with ``StoreFull`` while it is there, reads work.
- store-slow: for ``duration`` the store holds its slow file (``DirectoryStore.SLOW_FILE``)
  with the latency; every object read and write waits that long first. Overlapping ones:
  the file holds the largest latency of those under way.

- lose-unsynced: the target's task is killed as by ``kill-task``, and the objects the
  driver adopted from it since its last report or emit (``ftctl.spark.durability``) are
  removed from the store when its frames end: the store no longer lists them, as on the
  simulation host. The record names them (``lost``) and their ``bytes``.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from concurrent.futures import CancelledError
from typing import Literal, cast

from chaos.context import FaultContext, InjectRecord, StoreAccess, WriteLoss
from chaos.faults import ChaosFault, FaultError, KillTask, NotRunning
from ftctl.config.fault_kinds import StoredObjectParams, StoreSlowParams
from ftctl.store import DirectoryStore

DamageKind = Literal["corrupt", "truncate", "delete"]

# Markers under way per (store root, marker file), each fault's content: the file stays
# until the last one heals, and holds what the one that counts says (``_MarkerFault``).
_markers: dict[tuple[str, str], dict[int, bytes]] = {}
_markers_lock = threading.Lock()
# Seconds a lose-unsynced waits for its target's frames to end: its control connection
# closes as it dies; at worst a detection ends them (a hang is found within 4.5 s).
LOSS_WAIT = 30.0


def _store(ctx: FaultContext, what: str) -> DirectoryStore:
    store = ctx.snapshot_store() if isinstance(ctx, StoreAccess) else None
    if store is None:
        raise FaultError(f"{what} needs a host whose snapshot store the driver reaches")
    return store


class _StoreDamage(ChaosFault):
    @property
    def kind(self) -> DamageKind:
        return cast(DamageKind, self.name)

    def inject(self, ctx: FaultContext) -> InjectRecord:
        store = _store(ctx, self.name)
        wanted = cast(StoredObjectParams, self.params).snapshot
        instance = self._owner(ctx, store, wanted)
        refs = [s for s in store.snapshots_of(instance) if wanted in (None, s)]
        if not refs:
            at = "" if wanted is None else f" at snapshot {wanted}"
            raise FaultError(f"nothing stored of {instance}{at}")
        snapshot = max(refs)
        record = self._record(ctx, instance, [], snapshot=snapshot)
        try:
            record.details["bytes"] = store.damage(snapshot, instance, self.kind,
                                                  self.rng.random())
        except FileNotFoundError:  # discarded by the coordinator since it was listed
            raise FaultError(f"snapshot {snapshot} of {instance} was discarded meanwhile"
                             ) from None
        return record

    def _owner(self, ctx: FaultContext, store: DirectoryStore, wanted: int | None) -> str:
        """The target's instance; for ``random`` one drawn among those with an object."""
        if self.parsed.kind != "random":
            return self._instance(ctx)
        owners = [i for i in ctx.instances()
                  if any(wanted in (None, s) for s in store.snapshots_of(i))]
        if not owners:
            raise FaultError("nothing stored" + ("" if wanted is None else f" at {wanted}"))
        return self.rng.choice(owners)


class Corrupt(_StoreDamage):
    name = "corrupt"


class Truncate(_StoreDamage):
    name = "truncate"


class Delete(_StoreDamage):
    name = "delete"


class LoseUnsynced(ChaosFault):
    """The target's task is killed and its writes not yet durable vanish with it."""

    name = "lose-unsynced"

    def inject(self, ctx: FaultContext) -> InjectRecord:
        if not isinstance(ctx, WriteLoss):
            raise FaultError("lose-unsynced needs a host that knows which writes are not "
                             "durable yet")
        instance = self._instance(ctx)
        loss = ctx.lose_unsynced(instance, ctx.task_pid(instance))
        if loss is None:
            raise NotRunning(f"{instance} is not running")
        try:  # the kill as kill-task's: a signal here, or the task's agent
            kill = KillTask(instance, seed=self.seed).inject(ctx)
        except BaseException:
            loss.cancel()
            raise
        record = InjectRecord(self.name, instance, kill.t, kill.pids, dict(kill.details))
        try:
            lost = loss.result(timeout=LOSS_WAIT)
        except (TimeoutError, CancelledError, OSError) as exc:
            # killed all the same: the record says the loss is not known
            record.details.update(lost=None, error=str(exc) or type(exc).__name__)
            return record
        record.details.update(lost=[list(k) for k in lost.objects], bytes=lost.size)
        if not lost.ended:
            record.details["ended"] = False  # the run was over first: nothing taken
        return record


class _MarkerFault(ChaosFault):
    """A fault the store reads from a marker file in it, there from inject to heal (the
    nemesis heals it after ``duration``, or when the run ends). Overlapping ones of a kind
    share the file: it holds ``content`` of the one that counts, and goes with the last."""

    marker = ""  # the store's file name for it (``DirectoryStore.OUTAGE_FILE``, ...)
    _store: DirectoryStore | None = None

    def content(self) -> bytes:
        return f"{self.name}\n".encode()

    def strongest(self, contents: list[bytes]) -> bytes:
        """What the file holds while ``contents`` are under way."""
        return contents[0]

    def inject(self, ctx: FaultContext) -> InjectRecord:
        store = _store(ctx, self.name)
        self._store = store
        record = self._record(ctx, "store", [], location=store.root, **self.details())
        key = (store.root, self.marker)
        with _markers_lock:
            under_way = _markers.setdefault(key, {})
            under_way[id(self)] = self.content()
            self._write(store, under_way)
        return record

    def details(self) -> dict[str, object]:
        return {}

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        store = self._store
        if store is None:
            return
        self._store = None
        key = (store.root, self.marker)
        with _markers_lock:
            under_way = _markers.get(key, {})
            under_way.pop(id(self), None)
            if under_way:
                self._write(store, under_way)
                return
            _markers.pop(key, None)
            with contextlib.suppress(FileNotFoundError):
                store.fs.delete_file(store.marker_path(self.marker))

    def _write(self, store: DirectoryStore, under_way: dict[int, bytes]) -> None:
        # written beside it and moved over it: a reader never sees half of it
        path = store.marker_path(self.marker)
        tmp = f"{path}.{secrets.token_hex(8)}"
        with store.fs.open_output_stream(tmp) as f:
            f.write(self.strongest(list(under_way.values())))
        store.fs.move(tmp, path)


class StoreOutage(_MarkerFault):
    """Every read and write of the store fails until healed."""

    name = "store-unavailable"
    marker = DirectoryStore.OUTAGE_FILE


class StoreFullFault(_MarkerFault):
    """Every write of the store fails with no space left until healed; reads work."""

    name = "store-full"
    marker = DirectoryStore.FULL_FILE


class StoreSlowFault(_MarkerFault):
    """Every read and write of the store takes ``latency`` seconds more until healed."""

    name = "store-slow"
    marker = DirectoryStore.SLOW_FILE

    @property
    def latency(self) -> float:
        return cast(StoreSlowParams, self.params).latency

    def content(self) -> bytes:
        return repr(self.latency).encode()

    def strongest(self, contents: list[bytes]) -> bytes:
        return max(contents, key=float)

    def details(self) -> dict[str, object]:
        return {"latency": self.latency}
