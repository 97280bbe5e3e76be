"""The driver side: the coordinator's control listener and one Spark job per instance.

Both feed one event queue that the host's loop (``ftctl.spark.host``) consumes, so the
coordinator protocol only ever runs on that one thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ftctl.spark import wire
from ftctl.spark.identity import Identity
from ftctl.spark.latency import LatencyLog
from ftctl.spark.placement import pinned_rdd
from ftctl.spark.task import SparePayload, TaskPayload, run_partition

# Events put on the queue (all tuples, first element the kind).
EV_REG = "reg"  # (EV_REG, iid, inc, pid, data_address, conn, executor id, Identity), or None
EV_MSG = "msg"  # (EV_MSG, iid, frame)
EV_LOST = "lost"  # (EV_LOST, iid, inc): the control connection dropped
EV_JOB_DONE = "job-done"  # (EV_JOB_DONE, iid, inc, result)
EV_JOB_FAILED = "job-failed"  # (EV_JOB_FAILED, iid, inc, reason)

MAX_SPARE_FAILURES = 3  # spare jobs failing in a row before no more are submitted


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
        self.on_spare: Callable[[int, Connection], None] | None = None
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
                # Nothing more is read from a spare: the job runner writes its assignment.
                if self.on_spare is None:
                    conn.close()
                else:
                    self.on_spare(first[1], conn)
                return
            if first[0] != wire.REG:
                conn.close()
                return
            inc, iid, pid, addr = first[1:5]
            executor = first[5] if len(first) > 5 else None  # where the task runs
            who = Identity.from_wire(first[6]) if len(first) > 6 else None
            key = (iid, inc)
            self.last_seen[key] = time.monotonic()
            put((EV_REG, iid, inc, pid, addr, conn, executor, who))
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


class JobRunner:
    """Submits one single-task Spark job per instance incarnation, each in its job group.

    With ``spares``, that many extra jobs run spare tasks (``SparePayload``): a restarted
    instance is handed to an idle spare instead of waiting for a job of its own, and a new
    spare is submitted in its place. Instances of the first plan always get their own jobs.
    """

    def __init__(self, sc: Any, run_id: str, events: queue.Queue[tuple[Any, ...]],
                 spares: int = 0):
        self.sc = sc
        self.run_id = run_id
        self.events = events
        self.spares = spares
        self.threads: dict[str, threading.Thread] = {}  # job group -> the thread running it
        self.group_of: dict[tuple[str, int], str] = {}  # (instance, incarnation) -> group
        self.lock = threading.Lock()
        self.idle: dict[int, Connection] = {}  # spare id -> its waiting connection
        self.assigned: dict[int, tuple[str, int]] = {}  # spare id -> instance it runs
        self.handed: dict[int, TaskPayload] = {}  # spare id -> the payload it was given
        self.next_spare = 0
        self.spare_base: SparePayload | None = None  # what every spare's payload shares
        self.closing = False
        self.spare_failures = 0  # spares lost in a row without one registering
        # instance -> preferred executor (ftctl/spark/placement.py); others go anywhere
        self.locations: dict[str, str] = {}

    def group(self, iid: str, inc: int) -> str:
        return f"ftctl-{self.run_id}-{iid}-{inc}"

    def submit(self, payload: TaskPayload) -> bool:
        """Start ``payload``'s instance; True when an idle spare took it."""
        key = (payload.instance, payload.inc)
        while True:
            with self.lock:
                if not self.idle:
                    break
                sid, conn = self.idle.popitem()
                self.assigned[sid] = key
                self.handed[sid] = payload
                self.group_of[key] = self._spare_group(sid)
            try:
                wire.send(conn, (wire.ASSIGN, payload))
            except (OSError, ValueError):
                with self.lock:
                    reported = self.assigned.pop(sid, None) is None
                    self.handed.pop(sid, None)
                    if not reported:
                        self.group_of.pop(key, None)
                if reported:  # its job ended meanwhile and reported this instance failed
                    return True
                continue  # that spare is gone (its job will report nothing): next one
            finally:
                conn.close()
            self._submit_spare()
            return True
        group = self.group(*key)
        self._launch(group, self._job, payload)
        with self.lock:
            self.group_of[key] = group
        return False

    def start_spares(self, coordinator: wire.Address, token: bytes) -> None:
        self.spare_base = SparePayload(self.run_id, -1, coordinator, token)
        for _ in range(self.spares):
            self._submit_spare()

    def spare_ready(self, sid: int, conn: Connection) -> None:
        """A spare registered (called on the control server's thread).

        A spare that registers again after it was given an instance is Spark retrying its
        task: the executor that ran the first attempt was lost (Spark does not count that
        against ``maxFailures``), so the instance never registered. The retry gets the
        same payload at once, instead of idling while the coordinator waits out
        ``REGISTER_TIMEOUT`` for the instance."""
        with self.lock:
            live = not self.closing and self._spare_group(sid) in self.threads
            handed = self.handed.get(sid) if live else None
            if live and handed is None:
                self.idle[sid] = conn
                self.spare_failures = 0
                return
        if handed is not None:
            with contextlib.suppress(OSError, ValueError):
                wire.send(conn, (wire.ASSIGN, handed))
        conn.close()

    def _spare_group(self, sid: int) -> str:
        return f"ftctl-{self.run_id}-spare-{sid}"

    def _submit_spare(self) -> None:
        if self.spare_base is None:
            return
        with self.lock:
            if self.closing:
                return
            sid = self.next_spare
            self.next_spare += 1
        self._launch(self._spare_group(sid), self._spare_job,
                     dataclasses.replace(self.spare_base, spare=sid))

    def _launch(self, group: str, target: Callable[[str, Any], None], payload: Any) -> None:
        t = threading.Thread(target=target, args=(group, payload), daemon=True,
                             name=f"ftctl-job-{group}")
        with self.lock:
            self.threads[group] = t
        t.start()

    def _collect(self, group: str, payload: Any, what: str) -> Any:
        # Job groups are per thread (pyspark's pinned threads): this one's jobs only.
        self.sc.setJobGroup(group, what, interruptOnCancel=True)
        where = self.locations.get(getattr(payload, "instance", ""))
        rdd = pinned_rdd(self.sc, payload, where) if where else None
        if rdd is None:  # no preference, or one the JVM would not take: Spark places it
            rdd = self.sc.parallelize([payload], 1)
        result = rdd.mapPartitions(run_partition).collect()
        return result[0] if result else None

    def _job(self, group: str, payload: TaskPayload) -> None:
        iid, inc = payload.instance, payload.inc
        try:
            result = self._collect(group, payload, f"ftctl {iid} #{inc}")
            self.events.put((EV_JOB_DONE, iid, inc, result))
        except Exception as exc:
            self.events.put((EV_JOB_FAILED, iid, inc, _reason(exc)))
        finally:
            with self.lock:
                self.threads.pop(group, None)

    def _spare_job(self, group: str, payload: SparePayload) -> None:
        sid = payload.spare
        try:
            result = self._collect(group, payload, f"ftctl spare {sid}")
            failed = None
        except Exception as exc:
            result, failed = None, _reason(exc)
        with self.lock:
            self.threads.pop(group, None)
            key = self.assigned.pop(sid, None)
            self.handed.pop(sid, None)
            conn = self.idle.pop(sid, None)
        if key is None:
            # Lost while idle (its executor went): nobody depended on it; replace it,
            # unless spares keep failing before they ever register.
            if conn is not None:
                conn.close()
            if failed is not None:
                with self.lock:
                    self.spare_failures += 1
                    retry = self.spare_failures <= MAX_SPARE_FAILURES
                if retry:
                    self._submit_spare()
        elif failed is None:
            self.events.put((EV_JOB_DONE, *key, result))
        else:
            self.events.put((EV_JOB_FAILED, *key, failed))

    def cancel(self, iid: str, inc: int) -> None:
        with self.lock:
            group = self.group_of.get((iid, inc))
            if group is None or group not in self.threads:
                return
        with contextlib.suppress(Exception):
            self.sc.cancelJobGroup(group)

    def cancel_later(self, iid: str, inc: int, delay: float) -> None:
        """Cancel the job if the task has not exited by itself within ``delay``."""
        timer = threading.Timer(delay, self.cancel, args=(iid, inc))
        timer.daemon = True
        timer.start()

    def release_spares(self) -> None:
        """No more spares: idle ones end their jobs (they see their connection close)."""
        with self.lock:
            self.closing = True
            idle = list(self.idle.values())
            self.idle.clear()
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
