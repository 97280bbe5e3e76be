"""Store faults on Spark: done by the driver on the run's snapshot store (``DirectoryStore``).

- corrupt / truncate / delete: one stored object, the scenario's ``snapshot`` of the
  target, else the target's newest (the one a recovery would read), has a byte flipped,
  loses its tail, or its file is removed. The damaged bytes replace the file atomically
  (written beside it, then moved over it), so no reader sees half of it. Nothing happens
  until a recovery reads it: the coordinator's read then fails (``CorruptObject``,
  ``MissingObject``) and the protocol hears ``StoreFault``, as on the simulation host.
- store-unavailable: for ``duration`` the store holds its outage file
  (``DirectoryStore.OUTAGE_FILE``); every object read and write, by the driver or by a
  task, fails with ``StoreUnavailable`` while it is there. A file in the store reaches
  every process that uses the store, wherever it runs, with nothing sent to the tasks.

``lose-unsynced`` has no Spark realization: a file here is durable once written (the
store does not model a page cache a crash could take), see docs/chaos.md.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from typing import Literal, cast

import pyarrow.fs as pafs

from chaos.context import FaultContext, InjectRecord, StoreAccess
from chaos.faults import ChaosFault, FaultError
from ftctl.config.fault_kinds import StoredObjectParams
from ftctl.store import DirectoryStore, damaged  # the simulation host's damage too

DamageKind = Literal["corrupt", "truncate", "delete"]

# Outages under way per store (its root): the outage file stays until the last one heals.
_outages: dict[str, int] = {}
_outages_lock = threading.Lock()


def damage_object(store: DirectoryStore, snapshot: int, instance: str, kind: DamageKind,
                  at: float) -> int:
    """Damage one stored object in place (``at``: where, as a fraction of its bytes);
    returns its size before. Raises FileNotFoundError if it is gone meanwhile."""
    path = store.object_path(snapshot, instance)
    info = store.fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(path)
    if kind == "delete":
        store.fs.delete_file(path)
        return int(info.size)
    with store.fs.open_input_stream(path) as f:
        data = f.read()
    tmp = f"{path.rsplit('/', 1)[0]}/.damaged-{secrets.token_hex(8)}"
    with store.fs.open_output_stream(tmp) as f:
        f.write(damaged(data, kind, at))
    store.fs.move(tmp, path)
    return len(data)


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
            record.details["bytes"] = damage_object(store, snapshot, instance, self.kind,
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


class StoreOutage(ChaosFault):
    """Every read and write of the store fails until healed (the nemesis heals it after
    ``duration``, or when the run ends)."""

    name = "store-unavailable"
    _store: DirectoryStore | None = None

    def inject(self, ctx: FaultContext) -> InjectRecord:
        store = _store(ctx, self.name)
        self._store = store
        record = self._record(ctx, "store", [], location=store.root)
        with _outages_lock:
            _outages[store.root] = _outages.get(store.root, 0) + 1
            with store.fs.open_output_stream(store.outage_path()) as f:
                f.write(b"store-unavailable\n")
        return record

    def heal(self, ctx: FaultContext) -> None:
        super().heal(ctx)
        store = self._store
        if store is None:
            return
        self._store = None
        with _outages_lock:
            left = _outages.get(store.root, 1) - 1
            if left > 0:
                _outages[store.root] = left
                return
            _outages.pop(store.root, None)
            with contextlib.suppress(FileNotFoundError):
                store.fs.delete_file(store.outage_path())
