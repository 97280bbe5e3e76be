"""Connections between tasks and the coordinator: framing and authentication.

Every connection is a ``multiprocessing.connection`` socket opened with the run's token as
``authkey``: the HMAC challenge runs before the first frame is read, so nothing is ever
decoded from a peer that does not know the token. The runtime already batches records,
so one frame carries hundreds of them.

Frames are encoded by ``ftctl.codec``, not by ``Connection.send``: marshal for plain
values, pickle for anything else (so control frames sent with ``Connection.send`` decode
too). Data frames carry batches and markers as plain tuples so that they stay
marshal-able.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from ftctl.codec import decode
from ftctl.codec import encode_wire as encode
from ftctl.runtime.messages import Batch, Marker, Message

HOST = "127.0.0.1"
Address = tuple[str, int]

# Control frames, task -> driver: (kind, incarnation, ...)
# (REG, inc, iid, pid, data_address[, executor id[, identity[, worker[, restore s]]]])
REG = "reg"
HB = "hb"  # (HB, inc, records_in, records_out)
HBREG = "hbreg"  # (HBREG, inc, iid): opens a task's heartbeat-only connection
# (SPARE, slot id, pid, fresh, executor id, worker host:port): a slot waiting to be given an
# instance; fresh: it has hosted none yet in this attempt of its task
SPARE = "spare"
MULTI = "multi"  # (MULTI, inc, [item, ...], records_in, records_out): one flush's items
# Items of a MULTI frame, one per instance action (``slot``: the slot it is for).
EMIT = "emit"  # (EMIT, slot, records, uid): a batch named by its uid (``Emit``)
# (OUTPUT, slot, records as ``codec.encode_blob`` pickles them, how many): a sink's output
# without uids, kept by the driver as these bytes (``SinkStore.append_pickled``)
OUTPUT = "output"
STAGE = "stage"  # (STAGE, slot, epoch, records pickled as OUTPUT's, how many)
PERSIST = "persist"  # (PERSIST, slot, ref, the blob as ``store.seal`` frames it)
PERSISTED = "persisted"  # (PERSISTED, slot, ref, file name, bytes): the task wrote the blob
REPORT = "report"  # (REPORT, slot, msg)
PEER = "peer"  # (PEER, sender, to, msg, unit | None); relayed to the receiver as below
NOTE = "note"  # (NOTE, kind, data): for the run's history
PHASE = "phase"  # (PHASE, phase, on, key)
SUSPECT = "suspect"  # (SUSPECT, instance, reason)
ROUTE = "route"  # (ROUTE, slot, unit)

# Control frames, driver -> task.
# Data frames are fenced by data epochs (``CoordinatorKernel.epoch``): the incarnation, plus
# the in-place rollbacks of the instance. GO and CONNECT give the receiver's epoch, which
# the sender stamps on its frames; FENCE gives a sender's.
GO = "go"  # (GO, {downstream iid: (address, epoch)}, {upstream iid: epoch})
CONNECT = "connect"  # (CONNECT, downstream iid, address | None, epoch)
FENCE = "fence"  # (FENCE, upstream iid, epoch): drop its frames from older epochs
ROLLBACK = "rollback"  # (ROLLBACK, epoch, slot, to, restored blob): RollBackTo, in place
CONTROL = "control"  # (CONTROL, msg[, slot]) for the instance protocol
PEERS = "peers"  # (PEERS, [(sender, msg, to), ...]): relayed peer messages, in order
EXIT = "exit"  # (EXIT,)
ASSIGN = "assign"  # (ASSIGN, TaskPayload): a waiting slot hosts that instance


def new_token() -> bytes:
    return secrets.token_bytes(32)


def listen(token: bytes, host: str = HOST) -> Listener:
    return Listener((host, 0), family="AF_INET", backlog=128, authkey=token)


WILDCARDS = ("0.0.0.0", "")


def check_bind(host: str) -> str:
    """An IPv4 address (or host name) this machine can listen on, or ValueError."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"cannot listen on {host!r}: {exc}") from exc
    return host


def advertised(address: Address) -> Address:
    """Where peers should connect to a listener bound to ``address``: a wildcard bind is
    reached through this host's name, not through 0.0.0.0."""
    host, port = address
    if host in WILDCARDS:
        host = socket.gethostbyname(socket.gethostname())
    return host, port


def local_host(conn: Connection) -> str:
    """This end's address of ``conn``: the interface this host reaches the peer through.

    A task listens for its upstream peers there: on loopback while the driver is on
    loopback (the default, one machine), on the cluster network's interface when the
    driver binds one (``--bind``), where tasks on other hosts can reach it.
    """
    s = socket.socket(fileno=_dup(conn))
    try:
        return str(s.getsockname()[0])
    finally:
        s.close()


def connect(address: Address, token: bytes) -> Connection:
    conn = Client((address[0], address[1]), family="AF_INET", authkey=token)
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


DataItems = list[tuple[int, Message]]


def send(conn: Connection, frame: Any) -> None:
    conn.send_bytes(encode(frame))


def recv(conn: Connection) -> Any:
    return decode(conn.recv_bytes())


def encode_data(src: str, epoch: int, items: DataItems, to: int = 0) -> bytes:
    """A data frame: ``(src, epoch, [(channel, message), ...], to)``: the sender's data
    epoch, and the receiver's (``to``) as the sender was told it when it connected.

    Batches travel as ``(ch, records, seq, watermark, meta)`` and markers as
    ``(ch, kind, id, meta)`` so that the whole frame is marshal-able when the records and
    the protocol's piggyback are (``ftctl.codec`` pickles it otherwise).
    """
    flat: list[tuple[Any, ...]] = []
    for ch, msg in items:
        if type(msg) is Batch:
            flat.append((ch, msg.records, msg.seq, msg.watermark, msg.meta))
        else:
            m: Marker = msg  # type: ignore[assignment]
            flat.append((ch, m.kind, m.id, m.meta))
    return encode((src, epoch, flat, to))


def decode_data(buf: bytes) -> tuple[str, int, DataItems, int]:
    src, epoch, flat, to = decode(buf)
    items: DataItems = [
        (t[0], Batch(t[1], t[2], t[3], t[4]) if len(t) == 5 else Marker(t[1], t[2], t[3]))
        for t in flat
    ]
    return src, epoch, items, to
