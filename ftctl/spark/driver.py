"""The driver side: the coordinator's control listener and one Spark job per instance.

Both feed one event queue that the host's loop (``ftctl.spark.host``) consumes, so the
coordinator protocol only ever runs on that one thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ftctl.spark import wire
from ftctl.spark.identity import Identity
from ftctl.spark.latency import LatencyLog
from ftctl.spark.placement import executor_id, pinned_rdd
from ftctl.spark.task import SparePayload, TaskPayload, run_partition

# Events put on the queue (all tuples, first element the kind).
# (EV_REG, iid, inc, pid, data_address, conn, executor id, Identity, worker host:port,
# seconds the task took to build the instance and restore it), each of the last four
# None where the task did not say
EV_REG = "reg"
EV_MSG = "msg"  # (EV_MSG, iid, frame)
EV_LOST = "lost"  # (EV_LOST, iid, inc): the control connection dropped
EV_JOB_DONE = "job-done"  # (EV_JOB_DONE, iid, inc, result)
EV_JOB_FAILED = "job-failed"  # (EV_JOB_FAILED, iid, inc, reason)

MAX_SPARE_FAILURES = 3  # empty slot jobs failing in a row before no more are submitted
# A slot whose instance was fenced alive comes back in milliseconds on a quiet machine; one
# that has not by then (paused, or on a worker that is going) is no longer waited for. Long
# enough for a loaded machine (seconds), where the job launched instead takes 10-35 s.
RETURN_WAIT = 5.0
# A returning slot is not cancelled (its job killed) for this long after its instance was
# stopped: under load its task may take seconds to notice, and a slot is worth keeping.
RETURN_GRACE = 10.0
# A failure domain where an instance failed this recently gets no restart while another
# has a waiting slot: in a correlated failure its other workers may be going too.
FAILED_AVOID = 10.0
# Empty slots used by a recovery are replaced this long after: a new Python worker's
# imports take a core for a second, which the restarts need first on a small machine.
REFILL_DELAY = 2.0
# A returning worker's executor starts a moment after the master lists the worker alive.
WARM_WAIT = 30.0


class ControlServer:
    """Accepts tasks' control connections; each gets a reader thread feeding ``events``.

    Listens on ``bind`` (loopback unless the user sets ``--bind``: executors on other
    machines must reach it). Every connection must pass the run token's HMAC challenge
    before a byte of it is decoded; one that does not is closed and reported to
    ``on_refused`` with its peer address (the host logs a ``connection-refused`` event).
    """

    def __init__(self, token: bytes, events: queue.Queue[tuple[Any, ...]],
                 bind: str = wire.HOST, on_refused: Callable[[str], None] | None = None,
                 latency_spill: Path | None = None):
        self.events = events
        self.listener = wire.listen(token, bind)
        self.address: wire.Address = wire.advertised(self.listener.address)
        self.on_refused = on_refused
        self.closed = threading.Event()
        self.conns: list[Connection] = []
        # Liveness is judged where frames arrive, not where the host gets to them: a
        # backlog in the host's queue must not make a healthy task look hung.
        self.last_seen: dict[tuple[str, int], float] = {}
        # Readers waiting for room in the host's queue: their peers are held up by us.
        self.blocked: set[tuple[str, int]] = set()
        self.counters: dict[tuple[str, int], tuple[int, int]] = {}
        # Heartbeats: the sender's monotonic stamp of the newest one, its connection (to
        # look for unread bytes), and what it carried beyond the counters.
        self.stamps: dict[tuple[str, int], float] = {}
        self.hb_conns: dict[tuple[str, int], Connection] = {}
        self.extras: dict[tuple[str, int], dict[str, Any]] = {}
        self.latency = LatencyLog(latency_spill)  # (sink instance, t, seconds) per sample
        self.on_spare: Callable[[int, Connection, SlotInfo], None] | None = None
        threading.Thread(target=self._accept, name="ftctl-control", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn = wire.accept(self.listener)
            except AuthenticationError:
                # Not a task of this run: its bytes were never decoded; say who it was.
                if self.on_refused is not None:
                    with contextlib.suppress(Exception):
                        self.on_refused(_peer(self.listener.last_accepted))
                continue
            except (OSError, EOFError):
                if self.closed.is_set():
                    return
                continue  # a peer that vanished mid-handshake
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: Connection) -> None:
        iid, inc = None, -1
        put, put_nowait = self.events.put, self.events.put_nowait
        try:
            first = wire.recv(conn)
            if first[0] == wire.HBREG:
                self._heartbeats(conn, first[2], first[1])
                return
            if first[0] == wire.SPARE:
                # Nothing more is read from a slot: the job runner writes its assignment.
                if self.on_spare is None:
                    conn.close()
                else:
                    self.on_spare(first[1], conn, SlotInfo.from_frame(first))
                return
            if first[0] != wire.REG:
                conn.close()
                return
            inc, iid, pid, addr = first[1:5]
            executor = first[5] if len(first) > 5 else None  # where the task runs
            who = Identity.from_wire(first[6]) if len(first) > 6 else None
            worker = first[7] if len(first) > 7 else None
            restore_s = first[8] if len(first) > 8 else None
            key = (iid, inc)
            self.last_seen[key] = time.monotonic()
            put((EV_REG, iid, inc, pid, addr, conn, executor, who, worker, restore_s))
            while True:
                frame = wire.recv(conn)
                self.last_seen[key] = time.monotonic()
                try:
                    put_nowait((EV_MSG, iid, frame))
                except queue.Full:
                    self.blocked.add(key)
                    put((EV_MSG, iid, frame))
                    self.blocked.discard(key)
                    self.last_seen[key] = time.monotonic()
        except (EOFError, OSError):
            pass
        if iid is not None:
            put((EV_LOST, iid, inc))

    def _heartbeats(self, conn: Connection, iid: str, inc: int) -> None:
        """A task's heartbeat connection: noted here, never queued behind other frames."""
        key = (iid, inc)
        self.hb_conns[key] = conn
        with contextlib.suppress(EOFError, OSError):
            while True:
                _, _, rin, rout, stamp, extra = conn.recv()
                self.last_seen[key] = time.monotonic()
                self.stamps[key] = stamp
                self.counters[key] = (rin, rout)
                samples = extra.pop("latency", None)
                if samples:
                    self.latency.add(iid, samples)
                self.extras[key] = extra
        self.hb_conns.pop(key, None)

    def heartbeat_pending(self, key: tuple[str, int]) -> bool:
        """Whether bytes of the task's heartbeat connection wait unread.

        A paused task sends nothing; a reader thread starved of the GIL just has not read
        yet. (A closed connection reads as pending too: its loss is reported separately.)
        """
        conn = self.hb_conns.get(key)
        if conn is None:
            return False
        try:
            return bool(conn.poll(0))
        except (OSError, ValueError, EOFError):
            return False

    def close(self) -> None:
        self.closed.set()
        for conn in self.conns:
            wire.shutdown(conn)
        with contextlib.suppress(OSError):
            self.listener.close()


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """What a waiting slot said of itself (``wire.SPARE``)."""

    pid: int | None = None
    fresh: bool = True  # it has hosted nothing yet in this attempt of its task
    executor: str | None = None
    worker: str | None = None  # host:port of its worker, as the master lists it

    @classmethod
    def from_frame(cls, frame: tuple[Any, ...]) -> SlotInfo:
        rest = list(frame[2:6]) + [None] * (4 - len(frame[2:6]))
        return cls(rest[0], True if rest[1] is None else bool(rest[1]), rest[2], rest[3])


@dataclass
class Slot:
    """One slot's job, as the runner sees it."""

    sid: int
    # launching: submitted, not registered yet (empty, or with ``handed``); idle: waiting
    # on ``conn``; busy: hosting ``key``; returning: its instance was fenced while alive,
    # the slot is expected back; lost: its instance failed, the slot is not counted on.
    state: str = "launching"
    conn: Connection | None = None
    key: tuple[str, int] | None = None
    handed: TaskPayload | None = None  # given to it, for Spark's retry of its task
    where: str | None = None  # the executor location it was pinned to, if any
    executor: str | None = None
    worker: str | None = None
    since: float = 0.0  # when it started returning


def operator_of(iid: str) -> str:
    return iid.rsplit("[", 1)[0]


class JobRunner:
    """Runs every instance in a slot: a long-lived Spark task that hosts one instance after
    another (``ftctl.spark.task.run_slot``), each slot one single-task job in its group.

    A start goes to a waiting slot when there is one (an assignment: no Spark job on the
    critical path); else to a slot that is coming back because its instance was just
    fenced alive (a global rollback hands survivors' slots to the restarts), or to an
    empty slot already launched; only else is a slot job launched with the instance in
    it. ``spares`` slots are kept waiting beyond
    that, refilled in the background and spread over the executors, so that a failure
    domain's loss finds warm slots on the surviving side. ``pick`` orders waiting slots
    for an instance (failure-domain anti-affinity); the default prefers the instance's
    ``locations`` executor, then the slot whose executor hosts the fewest instances of the
    same operator, then the fewest instances.
    """

    def __init__(self, sc: Any, run_id: str, events: queue.Queue[tuple[Any, ...]],
                 spares: int = 0, recycle: bool = True):
        self.sc = sc
        # False (``--start job``): a slot hosts one instance and ends with it, and a start
        # never waits for a slot coming back: Spark's job start is in every restart.
        self.recycle = recycle
        self.run_id = run_id
        self.events = events
        self.spares = spares
        self.threads: dict[str, threading.Thread] = {}  # job group -> the thread running it
        self.group_of: dict[tuple[str, int], str] = {}  # (instance, incarnation) -> group
        self.lock = threading.Lock()
        self.slots: dict[int, Slot] = {}
        self.pending: collections.deque[TaskPayload] = collections.deque()
        self.next_spare = 0
        self.spare_base: SparePayload | None = None  # what every slot's payload shares
        self.closing = False
        self.spare_failures = 0  # empty slots lost in a row without one registering
        self.launched = 0  # slot jobs submitted, with an instance or empty
        # instance -> preferred executor (ftctl/spark/placement.py); others go anywhere
        self.locations: dict[str, str] = {}
        # The application's executors as task locations: where empty slots are spread.
        self.executors: Callable[[], list[str]] = list
        # A slot's failure domain (its worker's label, say); None: its worker alone.
        self.domain: Callable[[Slot], str | None] = lambda s: s.worker or s.executor
        self.pin: Callable[[Any, Any, str], Any] = pinned_rdd  # a job that prefers ``where``
        self.gone: set[str] = set()  # workers (host:port) the cluster lists as not alive
        self.failed_at: dict[str | None, float] = {}  # failure domain -> its last failure
        self.joined: dict[str, float] = {}  # worker -> when its first slot registered
        self.refill_due = False  # a delayed refill of empty slots is on its timer
        # Told of every slot that registers waiting, with its worker (host:port).
        self.on_ready: Callable[[str], None] | None = None

    @property
    def idle(self) -> dict[int, Connection]:
        with self.lock:
            return {s.sid: s.conn for s in self.slots.values()
                    if s.state == "idle" and s.conn is not None}

    def group(self, iid: str, inc: int) -> str:
        return f"ftctl-{self.run_id}-{iid}-{inc}"

    def where(self, iid: str, inc: int) -> Slot | None:
        """The slot hosting that incarnation, if it runs in one."""
        with self.lock:
            for s in self.slots.values():
                if s.key == (iid, inc):
                    return s
        return None

    # ------------------------------------------------------------ starts

    def submit(self, payload: TaskPayload) -> str:
        """Start ``payload``'s instance: ``slot`` (a waiting slot took it), ``queued`` (it
        waits for a slot coming back) or ``job`` (a slot job was launched with it)."""
        while True:
            with self.lock:
                slot = self._pick(payload.instance) if self.spare_base is not None else None
                if slot is None:
                    if (self.spare_base is not None and self.recycle
                            and self._coming() > len(self.pending)):
                        self.pending.append(payload)
                        return "queued"
                    break
                conn = self._hand(slot, payload)
            if self._send(slot, conn, payload):
                self._refill()
                return "slot"
        self._launch_slot(payload)
        return "job"

    def _hand(self, slot: Slot, payload: TaskPayload) -> Connection:
        """``slot`` hosts ``payload`` from now on (under the lock); its connection."""
        key = (payload.instance, payload.inc)
        conn = slot.conn
        assert conn is not None
        slot.state, slot.conn, slot.key, slot.handed = "busy", None, key, payload
        self.group_of[key] = self._spare_group(slot.sid)
        return conn

    def _send(self, slot: Slot, conn: Connection, payload: TaskPayload) -> bool:
        try:
            wire.send(conn, (wire.ASSIGN, payload))
            return True
        except (OSError, ValueError):
            with self.lock:  # that slot is gone (its job will report nothing): next one
                slot.state, slot.key, slot.handed = "lost", None, None
                self.group_of.pop((payload.instance, payload.inc), None)
            return False
        finally:
            conn.close()

    def workers_gone(self, addresses: set[str]) -> list[tuple[str, int]]:
        """These workers (host:port) are gone: their waiting slots are not handed starts
        (their processes die with the executor, which the driver hears of seconds later).
        Returns the starts (instance, incarnation) handed to slots on them: one handed in
        the moment before the master saw its worker go never registers, and Spark may not
        retry its task (the retry is only for an executor lost alone)."""
        with self.lock:
            self.gone = set(addresses)
            handed: list[tuple[str, int]] = []
            returning = False
            for s in self.slots.values():
                if s.worker not in self.gone:
                    continue
                if s.state == "idle":
                    s.state = "lost"
                    if s.conn is not None:
                        s.conn.close()
                        s.conn = None
                elif s.state == "returning":
                    # A fenced survivor's slot on a worker that is gone never comes back:
                    # the starts queued for it get slots of their own now, not after
                    # RETURN_WAIT.
                    s.state, returning = "lost", True
                elif s.state == "busy" and s.key is not None:
                    handed.append(s.key)
        if returning:
            self._refill()
        return handed

    def _pick(self, iid: str) -> Slot | None:
        waiting = [s for s in self.slots.values() if s.state == "idle" and s.conn is not None]
        for s in waiting:
            # A waiting slot reads nothing: anything readable is its connection closing
            # (its process died), so it is not handed a start.
            if s.worker in self.gone or _closed(s.conn):
                s.state = "lost"
        waiting = [s for s in waiting if s.state == "idle"]
        if not waiting:
            return None
        op = operator_of(iid)
        hosting = [s for s in self.slots.values() if s.state == "busy" and s.key is not None]
        want = self.locations.get(iid)
        now = time.monotonic()

        def shaken(s: Slot, dom: str | None) -> bool:
            # Its domain failed a moment ago and more of it may follow (a rack dies worker
            # by worker), unless the slot is on a worker that joined since: capacity
            # coming back, where restarts should go.
            failed = self.failed_at.get(dom)
            return (failed is not None and now - failed < FAILED_AVOID
                    and self.joined.get(s.worker or "", failed) <= failed)

        def score(s: Slot) -> tuple[bool, bool, int, int, int, int]:
            dom = self.domain(s)
            same = [h for h in hosting if operator_of(h.key[0]) == op]  # type: ignore[index]
            return (shaken(s, dom),
                    not (want is not None and s.executor is not None
                         and executor_id(want) == s.executor),
                    sum(1 for h in same if self.domain(h) == dom),
                    sum(1 for h in same if h.executor == s.executor),
                    sum(1 for h in hosting if h.executor == s.executor), s.sid)
        return min(waiting, key=score)

    def _coming(self) -> int:
        """Slots expected to wait soon: their instance was fenced alive a moment ago, or
        they are empty and on their way up (a launched job already: a start handed to one
        is not slower than a job of its own, and takes no core more)."""
        now = time.monotonic()
        return sum(1 for s in self.slots.values()
                   if (s.state == "returning" and now - s.since < RETURN_WAIT)
                   or (s.state == "launching" and s.handed is None))

    def released(self, iid: str, inc: int, alive: bool) -> None:
        """The coordinator stopped that incarnation: ``alive``, its slot is expected back
        (for a while); else (it failed) its slot is not counted on."""
        with self.lock:
            for s in self.slots.values():
                if s.key == (iid, inc) and s.state == "busy":
                    s.state, s.since = ("returning" if alive else "lost"), time.monotonic()
                    if not alive:
                        self.failed_at[self.domain(s)] = s.since
        if alive:  # one that does not come back in time stops holding up the queue
            timer = threading.Timer(RETURN_WAIT, self._refill)
            timer.daemon = True
            timer.start()
        self._refill()

    def connect_to(self, coordinator: wire.Address, token: bytes) -> None:
        """Where slots register: from now on every instance runs in a slot."""
        self.spare_base = SparePayload(self.run_id, -1, coordinator, token)

    def start_spares(self, coordinator: wire.Address, token: bytes) -> None:
        """Keep ``spares`` empty slots waiting from now on."""
        self.connect_to(coordinator, token)
        self._refill(now=True)

    def spare_ready(self, sid: int, conn: Connection, info: SlotInfo | None = None) -> None:
        """A slot registered, new or back from an instance (on the control server's thread).

        A fresh registration of a slot that was given an instance is Spark retrying its
        task: the executor that ran the first attempt was lost (Spark does not count that
        against ``maxFailures``), so the instance never registered. The retry gets the
        same payload at once, instead of idling while the coordinator waits out
        ``REGISTER_TIMEOUT`` for the instance."""
        info = info or SlotInfo()
        retry = waiting = False
        with self.lock:
            slot = self.slots.get(sid)
            if slot is None or self.closing or self._spare_group(sid) not in self.threads:
                payload = None
            else:
                slot.executor = info.executor or slot.executor
                slot.worker = info.worker or slot.worker
                if slot.worker is not None:
                    self.joined.setdefault(slot.worker, time.monotonic())
                self.spare_failures = 0
                if info.fresh and slot.handed is not None and slot.state == "busy":
                    payload, retry = slot.handed, True
                else:
                    if slot.key is not None:  # its instance is over: never cancel it for it
                        self.group_of.pop(slot.key, None)
                    slot.key, slot.handed = None, None
                    slot.state, slot.conn = "idle", conn
                    payload = self.pending.popleft() if self.pending else None
                    if payload is not None:
                        conn = self._hand(slot, payload)
                    waiting = payload is None
        if waiting:
            if self.on_ready is not None and info.worker is not None:
                self.on_ready(info.worker)
            return
        if payload is None or slot is None:
            conn.close()
            return
        if self._send(slot, conn, payload):
            self._refill()
        elif not retry:  # the slot went before it could take the start: another one
            self.submit(payload)

    def warm(self, count: int, executors: int) -> None:
        """Launch ``count`` empty slots on each of up to ``executors`` executors that host
        no slot yet, as they appear: a returning worker's executor starts a moment after
        the master lists the worker, and its slots are what makes its capacity usable."""
        def run() -> None:
            deadline = time.monotonic() + WARM_WAIT
            done: set[str] = set()
            while len(done) < executors and time.monotonic() < deadline and not self.closing:
                try:
                    live = self.executors()
                except Exception:
                    live = []
                with self.lock:
                    used = {s.where for s in self.slots.values()} | {
                        _by_id(live, s.executor) for s in self.slots.values() if s.executor}
                for e in live:
                    if e not in used and e not in done and len(done) < executors:
                        done.add(e)
                        for _ in range(count):
                            self._launch_slot(None, e)
                time.sleep(0.2)

        threading.Thread(target=run, name="ftctl-warm", daemon=True).start()

    def _refill(self, now: bool = False) -> None:
        """Launch slot jobs for starts no slot will take soon, at once; and empty ones up
        to ``spares`` waiting (unless empty slots keep failing before they register),
        ``REFILL_DELAY`` later unless ``now``."""
        with self.lock:
            if self.closing or self.spare_base is None:
                return
            jobs: list[TaskPayload | None] = []
            while len(self.pending) > self._coming():
                jobs.append(self.pending.pop())
            jobs.reverse()
            empty = sum(1 for s in self.slots.values()
                        if s.handed is None and s.state in ("launching", "idle"))
            short = (max(0, self.spares - empty)
                     if self.spare_failures <= MAX_SPARE_FAILURES else 0)
            if short and now:
                jobs += [None] * short
            elif short and not self.refill_due:
                self.refill_due = True
                timer = threading.Timer(REFILL_DELAY, self._refill_now)
                timer.daemon = True
                timer.start()
        for payload in jobs:
            self._launch_slot(payload)

    def _refill_now(self) -> None:
        with self.lock:
            self.refill_due = False
        self._refill(now=True)

    def _spare_group(self, sid: int) -> str:
        return f"ftctl-{self.run_id}-spare-{sid}"

    def _launch_slot(self, first: TaskPayload | None, where: str | None = None) -> None:
        base = self.spare_base
        assert base is not None, "connect_to first"
        with self.lock:
            if self.closing:
                return
            sid = self.next_spare
            self.next_spare += 1
            if where is None:
                where = (self.locations.get(first.instance) if first is not None
                         else self._spread())
            slot = Slot(sid, where=where)
            if first is not None:
                key = (first.instance, first.inc)
                slot.state, slot.key, slot.handed = "busy", key, first
                self.group_of[key] = self._spare_group(sid)
            self.slots[sid] = slot
            self.launched += 1
        self._launch(self._spare_group(sid), self._spare_job,
                     dataclasses.replace(base, spare=sid, first=first,
                                         once=not self.recycle), where)

    def _spread(self) -> str | None:
        """The executor with the fewest slots: empty slots spread over the domains."""
        try:
            executors = self.executors()
        except Exception:
            return None
        if not executors:
            return None
        count = collections.Counter(s.where or (s.executor and _by_id(executors, s.executor))
                                    for s in self.slots.values())
        return min(executors, key=lambda e: (count[e], executors.index(e)))

    def _launch(self, group: str, target: Callable[[str, Any, str | None], None],
                payload: Any, where: str | None = None) -> None:
        t = threading.Thread(target=target, args=(group, payload, where), daemon=True,
                             name=f"ftctl-job-{group}")
        with self.lock:
            self.threads[group] = t
        t.start()

    def _collect(self, group: str, payload: Any, what: str, where: str | None) -> Any:
        # Job groups are per thread (pyspark's pinned threads): this one's jobs only.
        self.sc.setJobGroup(group, what, interruptOnCancel=True)
        rdd = self.pin(self.sc, payload, where) if where else None
        if rdd is None:  # no preference, or one the JVM would not take: Spark places it
            rdd = self.sc.parallelize([payload], 1)
        result = rdd.mapPartitions(run_partition).collect()
        return result[0] if result else None

    def _spare_job(self, group: str, payload: SparePayload, where: str | None) -> None:
        sid = payload.spare
        what = (f"ftctl slot {sid}" if payload.first is None
                else f"ftctl slot {sid}: {payload.first.instance} #{payload.first.inc}")
        try:
            result = self._collect(group, payload, what, where)
            failed = None
        except Exception as exc:
            result, failed = None, _reason(exc)
        with self.lock:
            self.threads.pop(group, None)
            slot = self.slots.pop(sid, Slot(sid))
            if slot.conn is not None:
                slot.conn.close()
            key = slot.key if slot.state == "busy" else None
            if key is not None:
                self.group_of.pop(key, None)
            if failed is not None and key is None and slot.state in ("launching", "idle"):
                self.spare_failures += 1
        if key is not None:
            if failed is None:
                self.events.put((EV_JOB_DONE, *key, result))
            else:
                self.events.put((EV_JOB_FAILED, *key, failed))
        elif failed is None and isinstance(result, dict) and result.get("instance"):
            # Let go at the end: the last instance it hosted, with its final counters.
            self.events.put((EV_JOB_DONE, result["instance"], result["inc"], result))
        self._refill()

    def cancel(self, iid: str, inc: int) -> None:
        with self.lock:
            group = self.group_of.get((iid, inc))
            if group is None or group not in self.threads:
                return
            slot = next((s for s in self.slots.values() if s.key == (iid, inc)), None)
            wait = (RETURN_GRACE - (time.monotonic() - slot.since)
                    if slot is not None and slot.state == "returning" else 0.0)
        if wait > 0:  # still coming back, slowly: give it until the grace is over
            self.cancel_later(iid, inc, wait)
            return
        with contextlib.suppress(Exception):
            self.sc.cancelJobGroup(group)

    def cancel_later(self, iid: str, inc: int, delay: float) -> None:
        """Cancel the job if the task has not exited by itself within ``delay``."""
        timer = threading.Timer(delay, self.cancel, args=(iid, inc))
        timer.daemon = True
        timer.start()

    def release_spares(self) -> None:
        """No more slots: waiting ones end their jobs (they see their connection close),
        and so does every slot that comes back from now on."""
        with self.lock:
            self.closing = True
            idle = [s.conn for s in self.slots.values() if s.conn is not None]
            for s in self.slots.values():
                s.conn = None
            self.pending.clear()
        for conn in idle:
            wire.shutdown(conn)

    def wait_all(self, timeout: float) -> bool:
        with self.lock:
            threads = list(self.threads.values())
        for t in threads:
            t.join(timeout)
        with self.lock:
            return not self.threads

    def cancel_all(self) -> None:
        with self.lock:
            groups = list(self.threads)
        for group in groups:
            with contextlib.suppress(Exception):
                self.sc.cancelJobGroup(group)


def _closed(conn: Connection | None) -> bool:
    try:
        return conn is None or bool(conn.poll(0))
    except (OSError, ValueError, EOFError):
        return True


def _by_id(executors: list[str], wanted: str) -> str | None:
    for e in executors:
        if executor_id(e) == wanted:
            return e
    return None


def _peer(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    for line in text:
        if "Exception" in line or "Error" in line or "exited" in line:
            return line.strip()[:200]
    return (text[0] if text else type(exc).__name__)[:200]
