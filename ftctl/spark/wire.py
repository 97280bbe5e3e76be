"""Connections between tasks and the coordinator: framing and authentication.

Every connection is a ``multiprocessing.connection`` socket opened with the run's token as
``authkey``: the HMAC challenge runs before the first frame is read, so nothing is ever
unpickled from a peer that does not know the token. Frames are whole pickled Python
objects (a list of batches, a control tuple); the runtime already batches records, so
one frame carries hundreds of them.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

HOST = "127.0.0.1"
Address = tuple[str, int]

# Control frames, task -> driver: (kind, incarnation, ...)
REG = "reg"  # (REG, inc, iid, pid, data_address)
HB = "hb"  # (HB, inc, records_in, records_out)
HBREG = "hbreg"  # (HBREG, inc, iid): opens a task's heartbeat-only connection
MULTI = "multi"  # (MULTI, inc, [(EMIT|PERSIST|REPORT, ...), ...], records_in, records_out)
EMIT = "emit"  # (EMIT, records)
PERSIST = "persist"  # (PERSIST, snapshot, blob)
REPORT = "report"  # (REPORT, kind, data)

# Control frames, driver -> task.
GO = "go"  # (GO, {downstream iid: (address, inc)}, {upstream iid: inc})
CONNECT = "connect"  # (CONNECT, downstream iid, address | None, inc)
FENCE = "fence"  # (FENCE, upstream iid, inc): drop its frames from older incarnations
CONTROL = "control"  # (CONTROL, payload) for the instance protocol
EXIT = "exit"  # (EXIT,)


def new_token() -> bytes:
    return secrets.token_bytes(32)


def listen(token: bytes) -> Listener:
    return Listener((HOST, 0), family="AF_INET", backlog=128, authkey=token)


def connect(address: Address, token: bytes) -> Connection:
    conn = Client(tuple(address), family="AF_INET", authkey=token)
    _nodelay(conn)
    return conn


def accept(listener: Listener) -> Connection:
    conn = listener.accept()
    _nodelay(conn)
    return conn


def _nodelay(conn: Connection) -> None:
    # Control frames are small and latency matters (heartbeats, reports); data frames
    # are already large, so Nagle's delay only hurts.
    with contextlib.suppress(OSError):
        s = socket.socket(fileno=_dup(conn))
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        finally:
            s.close()


def shutdown(conn: Connection | None) -> None:
    """Unblock any thread sending or receiving on ``conn``, then close it.

    ``close()`` alone does not wake a thread blocked in ``send`` on Linux; a socket
    shutdown does, with an error that the blocked thread treats as a lost peer.
    """
    if conn is None:
        return
    with contextlib.suppress(OSError, ValueError):
        s = socket.socket(fileno=_dup(conn))
        try:
            s.shutdown(socket.SHUT_RDWR)
        finally:
            s.close()
    with contextlib.suppress(OSError, ValueError):
        conn.close()


def _dup(conn: Connection) -> int:
    import os

    return os.dup(conn.fileno())


def send(conn: Connection, frame: Any) -> None:
    conn.send(frame)
