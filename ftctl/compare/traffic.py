"""Takeover time and message overhead of one run, from its history and the host's counts.

A protocol that recovers by active replication (replica-ring) hands a failed slot to a
live unit instead of restarting it: its recovery is the route change, not a restart, so
``restart_s`` says nothing about it. ``takeover_times`` measures that: per injected fault,
fault to the first ``route-changed`` that moves the struck slot to another unit. A
rollback protocol has none (None in the table).

``messages_per_record`` is what a protocol pays in normal operation: every message of the
run (channel batches and markers, peer messages) per record that reached a sink.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ftctl.kernel.history import Records, read_history


def takeover_times(events: Records) -> list[float]:
    """Seconds from each injected fault to the route change that took its slot over."""
    evs = sorted(read_history(events), key=lambda e: e.t)
    moves = [(e.t, str(e.data["slot"])) for e in evs
             if e.kind == "route-changed" and e.data.get("to") != e.data.get("slot")]
    out: list[float] = []
    for f in evs:
        if f.kind != "fault-injected":
            continue
        target = f.data.get("resolved") or f.data.get("target")
        t = next((t for t, slot in moves if t >= f.t and slot == target), None)
        if t is not None:
            out.append(t - f.t)
    return out


def messages_of(stats: Mapping[str, Any]) -> int:
    """Every message a Spark run's host counted: channel messages and relayed peer ones."""
    peer = stats.get("peer_messages") or {}
    return int(stats.get("channel_messages", 0)) + sum(int(v) for v in peer.values())


def per_record(messages: int, records: int) -> float | None:
    return round(messages / records, 3) if records else None
