"""Channel faults in the sending task: partition, delay and drop between named instances.

The driver sends a ``Control`` payload (``LINK_KIND``) to each end of an affected link; the
sender then filters its outgoing data frames here, per destination instance:

- partition: every frame to the peer is dropped for the fault's duration;
- drop: each frame is dropped with ``probability`` (seeded, so a replay drops alike);
- delay: frames are held ``ms`` (+ uniform ``jitter_ms``) and sent in order by a thread of
  the link, so a delayed link keeps FIFO order and its throughput.

Channels are otherwise reliable (TCP). A dropped data frame breaks that assumption, which
no protocol here is built for, so it is treated like a crash on the receiving side: the
sender counts the drops per peer and reports them on its heartbeat, and the coordinator
fences the receiving instance as failed (the protocol then recovers it, or loses records).
"""

from __future__ import annotations

import contextlib
import heapq
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ftctl.spark import wire

LINK_KIND = "ftctl-link"  # Control payloads {"kind": LINK_KIND, "op": "set"|"clear", ...}


def set_payload(fault_id: str, kind: str, peers: Iterable[str] | None,
                params: dict[str, Any], seed: int) -> dict[str, Any]:
    return {"kind": LINK_KIND, "op": "set", "id": fault_id, "fault": kind,
            "peers": None if peers is None else sorted(peers), "params": dict(params),
            "seed": seed}


def clear_payload(fault_id: str) -> dict[str, Any]:
    return {"kind": LINK_KIND, "op": "clear", "id": fault_id}


def is_link_payload(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("kind") == LINK_KIND


@dataclass
class _Fault:
    kind: str
    peers: frozenset[str] | None  # None: every peer
    params: dict[str, Any]
    rng: random.Random

    def hits(self, dst: str) -> bool:
        return self.peers is None or dst in self.peers


@dataclass(order=True)
class _Held:
    due: float
    seq: int
    conn: Connection = field(compare=False)
    frame: Any = field(compare=False)


class _DelayLine:
    """Sends held frames when they are due, in the order they were handed in."""

    def __init__(self, stopping: threading.Event):
        self.heap: list[_Held] = []
        self.cv = threading.Condition()
        self.seq = 0
        self.last_due = 0.0
        self.stopping = stopping
        threading.Thread(target=self._run, daemon=True, name="ftctl-delay").start()

    def put(self, conn: Connection, frame: Any, delay: float) -> None:
        with self.cv:
            # Never earlier than the frame before: jitter must not reorder a channel.
            self.last_due = max(self.last_due, time.monotonic() + delay)
            self.seq += 1
            heapq.heappush(self.heap, _Held(self.last_due, self.seq, conn, frame))
            self.cv.notify()

    def busy(self) -> bool:
        return bool(self.heap)

    def _run(self) -> None:
        while not self.stopping.is_set():
            with self.cv:
                if not self.heap:
                    self.cv.wait(0.1)
                    continue
                wait = self.heap[0].due - time.monotonic()
                if wait > 0:
                    self.cv.wait(min(wait, 0.1))
                    continue
                held = heapq.heappop(self.heap)
            # A receiver that went away loses the frame, as a message to a dead instance is.
            with contextlib.suppress(OSError, ValueError):
                held.conn.send_bytes(wire.encode_data(*held.frame))


class LinkFaults:
    """The faults active on this task's outgoing links; ``active`` is cheap to test."""

    def __init__(self, stopping: threading.Event):
        self.faults: dict[str, _Fault] = {}
        self.lines: dict[str, _DelayLine] = {}
        self.dropped: dict[str, int] = {}  # frames dropped per peer, this incarnation
        self.stopping = stopping
        self.active = False

    def control(self, payload: dict[str, Any]) -> None:
        if payload.get("op") == "set":
            peers = payload.get("peers")
            self.faults[payload["id"]] = _Fault(
                str(payload["fault"]), None if peers is None else frozenset(peers),
                dict(payload.get("params") or {}), random.Random(int(payload.get("seed", 0))))
        else:
            self.faults.pop(str(payload.get("id")), None)
        self.active = bool(self.faults) or any(line.busy() for line in self.lines.values())

    def intercept(self, dst: str, conn: Connection, frame: Any) -> bool:
        """True if the frame was dropped or held; False: the caller sends it as usual."""
        delay = 0.0
        for f in self.faults.values():
            if not f.hits(dst):
                continue
            if f.kind == "partition" or (
                    f.kind == "drop" and f.rng.random() < float(f.params.get("probability", 0))):
                self.dropped[dst] = self.dropped.get(dst, 0) + 1
                return True
            if f.kind == "delay":
                jitter = float(f.params.get("jitter_ms", 0.0))
                delay += (float(f.params.get("ms", 0.0)) + f.rng.uniform(0, jitter)) / 1000
        line = self.lines.get(dst)
        if delay > 0 or (line is not None and line.busy()):
            if line is None:
                line = self.lines[dst] = _DelayLine(self.stopping)
            line.put(conn, frame, delay)
            return True
        if not self.faults:
            self.active = any(x.busy() for x in self.lines.values())
        return False
