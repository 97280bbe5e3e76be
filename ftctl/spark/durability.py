"""Which stored objects a crash of their writer would take (``lose-unsynced`` on Spark).

The contract's durability rule, as the simulation host's ``MemoryStore`` keeps it: a
``Persist`` is durable once the writer's next ``Report`` or ``Emit`` takes effect. On
Spark a task writes its object itself and the driver adopts it when it carries out the
task's ``PERSISTED`` item; the task's later ``REPORT`` or ``EMIT`` item syncs it. Until
then the object is unsynced: in the writer's page cache, as far as the model goes, and a
``lose-unsynced`` crash of the writer takes it. The driver's loop keeps the account
(``Durability``: a list append per adopt, a dict pop per report or emit).

A ``lose-unsynced`` is asked for from the nemesis thread (``expect``) before the target
is killed, and carried out by the driver when the incarnation's frames end (its control
connection closes, or it is dropped): frames the task sent before it died are carried
out first, as after ``kill-task``, so a report among them syncs what it covers, and no
frame of it is carried out after its writes vanished.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from ftctl.store import LostWrites, StoredKey


class Durability:
    """Per writing unit, the objects adopted from it since its last report or emit; and
    the ``lose-unsynced`` faults waiting for their incarnation's end."""

    def __init__(self) -> None:
        # unit -> objects not yet synced, in adopt order. Driver loop only.
        self.unsynced: dict[str, list[StoredKey]] = {}
        # (unit, incarnation) -> the fault waiting for what it took. Filled from the
        # nemesis thread, emptied by the driver: under the lock.
        self._expected: dict[tuple[str, int], Future[LostWrites]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the driver's loop

    def adopted(self, writer: str, snapshot: int, instance: str) -> None:
        """``writer``'s object is in the store now, not durable yet."""
        self.unsynced.setdefault(writer, []).append((snapshot, instance))

    def synced(self, writer: str) -> None:
        """``writer``'s report or emit took effect: what it wrote so far is durable."""
        self.unsynced.pop(writer, None)

    def take(self, writer: str) -> list[StoredKey]:
        """``writer``'s unsynced objects, once each, in adopt order; it has none after."""
        return list(dict.fromkeys(self.unsynced.pop(writer, ())))

    # ------------------------------------------------------------------ lose-unsynced

    def expect(self, writer: str, incarnation: int) -> Future[LostWrites]:
        """A ``lose-unsynced`` of this incarnation: its unsynced writes vanish when its
        frames end; the future gets what they were (any thread). Cancelling it (the
        target was not killed after all) withdraws it: nothing is lost."""
        future: Future[LostWrites] = Future()
        with self._lock:
            self._expected[(writer, incarnation)] = future
        return future

    def ended(self, writer: str, incarnation: int) -> Future[LostWrites] | None:
        """The incarnation's frames ended: the fault waiting for it, if any (it is the
        caller's to carry out and answer)."""
        if not self._expected:  # the common case, without the lock
            return None
        with self._lock:
            return self._expected.pop((writer, incarnation), None)

    def abandon(self) -> None:
        """The run is over: faults still waiting took nothing."""
        with self._lock:
            waiting, self._expected = list(self._expected.values()), {}
        for future in waiting:
            if future.set_running_or_notify_cancel():
                future.set_result(LostWrites(ended=False))
