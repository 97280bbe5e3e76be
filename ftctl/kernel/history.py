"""The run history: one record schema that both hosts and the fault layer write.

Every entry of a run's history (``SimResult.events``, ``HostResult.events``,
``results/<run>/events.jsonl``) is a ``HistoryEvent``, written through a ``History`` and
read back through ``read_history``. ``docs/history.md`` documents every kind field by field.

- ``v``: the schema version, 2. A record without ``v`` is version 1 (what ftctl wrote
  before this module) and ``upgrade_v1`` maps it.
- ``seq``: strictly increasing within a run (the order the events were written in).
- ``t``: the run clock: simulated seconds (sim), seconds since the host started (Spark).
- ``host``: ``sim`` or ``spark``.
- ``kind``: one of ``KINDS``, kebab-case. Protocol notes (``Note``) are kind ``protocol``
  with ``name`` and ``data``.
- ``instance`` / ``incarnation``: the instance the event is about, where there is one.
- ``fault``: the fault occurrence the event belongs to (nemesis ``"index.occurrence"``,
  simulation ``"<n>"``), linking inject, heal, steps, deferral and errors.
- ``caused_by``: the ``seq`` of the event that led to this one, where the writer knows it
  (not ``cause``: that is ``FailureDetected.cause``, a detection's data field).
- ``wall``: ISO-8601 wall-clock time, for records of a stored run.
- ``data``: the kind's own fields, declared in ``KINDS`` and checked by the writer.

The writer validates: an undeclared kind, a missing required field or a field the kind
does not declare raises ``HistoryError``. Kinds marked ``open`` take extra fields (fault
details that differ per fault type, a protocol note's payload).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

VERSION = 2
Host = Literal["sim", "spark"]
HOSTS: tuple[Host, ...] = ("sim", "spark")
ENVELOPE = ("v", "seq", "t", "host", "kind", "instance", "incarnation", "fault", "caused_by",
            "wall", "data")


class HistoryError(ValueError):
    """A history record that does not fit the schema."""


@dataclass(frozen=True, slots=True)
class KindSpec:
    """What one kind carries: required and optional ``data`` fields, whether ``instance``
    is required, and whether other data fields are allowed (``open``)."""

    doc: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    instance: bool = False
    open: bool = False


_FAULT_IDS = ("target", "index", "occurrence")  # a nemesis occurrence; "fault" holds its id

KINDS: dict[str, KindSpec] = {
    # ---------------------------------------------------------------- run
    "timeout": KindSpec("the run hit its time limit and stops", ("seconds",)),
    "cluster-starting": KindSpec("a local cluster is being started for the run",
                                 ("workers", "cores", "backend")),
    "session-started": KindSpec("the Spark session is up", ("master", "seconds")),
    "run-started": KindSpec("the coordinator starts the protocol: its first plan follows",
                            ("instances",)),
    "run-finished": KindSpec("the topology stopped; its output is final and checks follow",
                             ("complete", "seconds")),
    "interrupted": KindSpec("the run was interrupted (Ctrl-C, an error)"),
    "run-stopped": KindSpec("the protocol stopped the run (StopRun): (reason); (instance) "
                            "and (snapshot) name the object it could not trust",
                            ("reason",), ("snapshot",)),
    "killed": KindSpec("a reader found the process running the run gone", ("pid",)),
    "chaos-schedule": KindSpec("the fault schedule a chaos run follows",
                               ("name", "seed", "faults", "expected_s")),
    "connection-refused": KindSpec("a control connection without the run's token", ("peer",)),
    # ---------------------------------------------------------------- instances
    "instance-started": KindSpec(
        "a replacement incarnation was started (Spark: handed to a waiting slot, queued for "
        "a fenced survivor's slot, or a slot job launched: (start) slot|queued|job; (spare): "
        "not a job; (restore_bytes): the snapshot's size)", ("reason",),
        ("restore", "spare", "start", "restore_bytes"), instance=True),
    "instance-registered": KindSpec("a Spark task connected to the driver", ("pid",),
                                    ("executor", "worker", "restore_s"), instance=True),
    "instance-running": KindSpec("a start group was released: its instances run; "
                                 "(placement): the worker each runs on", ("instances",),
                                 ("placement",)),
    "instance-stopped": KindSpec("the coordinator fenced these instances", ("instances",)),
    "source-rewound": KindSpec("a restarted source replays from an offset",
                               ("from", "to", "records"), instance=True),
    "instance-rolled-back": KindSpec(
        "a running instance rolls back in place to (to), restoring (restore); (skipped): "
        "why it did not", ("to",), ("restore", "skipped"), instance=True),
    "route-changed": KindSpec("a slot is now served by another unit", ("slot", "to")),
    "zombie-fenced": KindSpec("a fenced unit came back; what it did was dropped",
                              ("events", "dropped"), instance=True),
    # ---------------------------------------------------------------- failures
    "failure-suspected": KindSpec("an instance suspects another (instance) failed",
                                  ("by", "reason"), instance=True),
    "failure-detected": KindSpec("the coordinator declares instances failed", ("instances",),
                                 ("cause", "reasons", "nodes", "pids")),
    "capacity-warm": KindSpec("returning workers have a waiting slot (or were waited for "
                              "long enough, (cold)): the protocol is offered their cores "
                              "now", ("workers", "seconds"), ("cold",)),
    "restart-deferred": KindSpec("a restart waits for a free slot", ("priority",),
                                 instance=True),
    "recovered": KindSpec("every restart a detection caused is running", ("seconds",)),
    "store-read-failed": KindSpec(
        "a start or rollback of (fenced) needs (snapshot) of (instance), which is (problem)"
        " (corrupt, missing, unavailable): it is stopped instead, the protocol told",
        ("snapshot", "problem", "why", "fenced"), instance=True),
    "store-write-failed": KindSpec("a persist of (snapshots) failed: its unit died there",
                                   ("instances", "reason"), ("snapshots",)),
    "frame-lost": KindSpec("a frame to (instance) was lost to a channel fault", ("sender",),
                           instance=True),
    # ---------------------------------------------------------------- phases, capacity
    "phase-entered": KindSpec("a protocol phase began; (instance): its holder; (by): "
                              "kernel for the kernel's own", ("phase", "key"), ("by",)),
    "phase-left": KindSpec("a protocol phase ended; (reason): its holder stopped",
                           ("phase", "key"), ("reason", "by")),
    "node-down": KindSpec("a simulated node was lost with its instances",
                          ("node", "instances")),
    "node-up": KindSpec("a simulated node (or its replacement) is back", ("node",)),
    "output-committed": KindSpec("a sink's staged output up to (upto) became visible",
                                 ("sink", "upto", "records")),
    "capacity-changed": KindSpec("the Spark host saw workers leave or come",
                                 ("total", "free", "alive"), ("joined", "left")),
    # ---------------------------------------------------------------- faults
    "fault-injected": KindSpec(
        "a fault struck", ("type",),
        ("target", "instances", "duration", "at_event", *_FAULT_IDS, "at", "offset", "pids",
         "resolved", "details", "planned"), open=True),
    "fault-healed": KindSpec("a fault was lifted", ("type",),
                             ("target", *_FAULT_IDS, "at", "resolved", "pids")),
    "fault-skipped": KindSpec("a fault did not strike, and why", ("type", "reason"),
                              ("target", "instances", "at_event")),
    "fault-error": KindSpec("a fault could not be carried out", ("type", "error"),
                            (*_FAULT_IDS, "at", "offset", "planned")),
    "fault-step": KindSpec("one step of a fault that acts in steps", ("type", "step"),
                           _FAULT_IDS, open=True),
    "fault-deferred": KindSpec("a fault waits for its target to run again",
                               ("type", "reason"), (*_FAULT_IDS, "at", "offset")),
    "fault-retargeted": KindSpec("a fault moved to another running instance",
                                 ("type", "reason", "to"), (*_FAULT_IDS, "at")),
    "channel-fault": KindSpec("the Spark host put a link rule in force",
                              ("id", "channel", "src", "peers", "params")),
    "channel-fault-cleared": KindSpec("the Spark host lifted a link rule", ("id",)),
    # ---------------------------------------------------------------- protocols
    "protocol": KindSpec("a protocol's Note (name, its data)", ("name", "data")),
}

# Version 1 kinds that were renamed, and where their fields went.
V1_RENAMES: dict[str, str] = {
    "detected": "failure-detected", "restarted": "instance-started",
    "restart": "instance-started", "registered": "instance-registered",
    "running": "instance-running", "stop": "instance-stopped", "replay": "source-rewound",
    "fault": "fault-injected", "fault-inject": "fault-injected", "fault-heal": "fault-healed",
}


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    seq: int
    t: float
    host: Host
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)
    instance: str | None = None
    incarnation: int | None = None
    fault: str | None = None
    caused_by: int | None = None
    wall: str | None = None
    v: int = VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": self.v, "seq": self.seq, "t": self.t, "host": self.host,
                               "kind": self.kind}
        for key in ("instance", "incarnation", "fault", "caused_by", "wall"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["data"] = dict(self.data)
        return out

    @classmethod
    def from_json(cls, rec: Mapping[str, Any]) -> HistoryEvent:
        if rec.get("v") != VERSION:
            raise HistoryError(f"history record of version {rec.get('v')!r}: {dict(rec)}")
        extra = set(rec) - set(ENVELOPE)
        if extra:
            raise HistoryError(f"unknown history field(s) {sorted(extra)}")
        ev = cls(seq=int(rec["seq"]), t=float(rec["t"]), host=cast(Host, rec["host"]),
                 kind=str(rec["kind"]), data=dict(rec.get("data") or {}),
                 instance=rec.get("instance"), incarnation=rec.get("incarnation"),
                 fault=rec.get("fault"), caused_by=rec.get("caused_by"),
                 wall=rec.get("wall"))
        validate(ev)
        return ev

    @property
    def note(self) -> str | None:
        """A protocol note's name (None for every other kind)."""
        return str(self.data["name"]) if self.kind == "protocol" else None

    @property
    def payload(self) -> Mapping[str, Any]:
        """A protocol note's own data; for every other kind, ``data``."""
        return cast(Mapping[str, Any], self.data["data"]) if self.kind == "protocol" \
            else self.data


def validate(ev: HistoryEvent) -> None:
    """Raise ``HistoryError`` unless ``ev`` fits its kind's declaration."""
    spec = KINDS.get(ev.kind)
    if spec is None:
        raise HistoryError(f"undeclared history kind {ev.kind!r}")
    if ev.host not in HOSTS:
        raise HistoryError(f"{ev.kind}: unknown host {ev.host!r}")
    missing = [f for f in spec.required if f not in ev.data]
    if missing:
        raise HistoryError(f"{ev.kind}: missing field(s) {missing}")
    if spec.instance and ev.instance is None:
        raise HistoryError(f"{ev.kind}: no instance")
    if not spec.open:
        extra = set(ev.data) - set(spec.required) - set(spec.optional)
        if extra:
            raise HistoryError(f"{ev.kind}: undeclared field(s) {sorted(extra)}")


# What a run writes as often as its protocols act, not as often as something happens to
# it: a causal run on the sharder opens and closes a phase at each of its shards' local
# snapshots, 4.3 records per 100 votes (23 bytes a vote as objects, 2.3 GB at 100M).
ROUTINE_KINDS = frozenset({"phase-entered", "phase-left"})


class History:
    """The writer: stamps ``seq``, ``t`` and ``host``, validates, keeps the events and
    hands each record's JSON to ``sink`` (a run directory's ``events.jsonl``), in ``seq``
    order. ``start``: the records written before (a reopened run). ``unkept``: kinds
    handed to ``sink`` but not kept in ``events`` (with a sink only: the file has them,
    so memory does not grow with the input). Thread-safe."""

    def __init__(self, host: Host, clock: Callable[[], float], *,
                 sink: Callable[[dict[str, Any]], None] | None = None,
                 wall: Callable[[], str] | None = None, digits: int = 6, start: int = 0,
                 unkept: frozenset[str] = frozenset()):
        self.host: Host = host
        self.clock = clock
        self.sink = sink
        self.wall = wall
        self.digits = digits
        self.events: list[HistoryEvent] = []
        self.unkept = unkept if sink is not None else frozenset()
        self._seq = start
        self._lock = threading.Lock()

    def write(self, kind: str, *, instance: str | None = None,
              incarnation: int | None = None, fault: str | None = None,
              caused_by: int | None = None, **data: Any) -> HistoryEvent:
        with self._lock:
            ev = HistoryEvent(seq=self._seq + 1, t=round(self.clock(), self.digits),
                              host=self.host, kind=kind, data=data, instance=instance,
                              incarnation=incarnation, fault=fault, caused_by=caused_by,
                              wall=self.wall() if self.wall is not None else None)
            validate(ev)
            self._seq += 1
            if kind not in self.unkept:
                self.events.append(ev)
            if self.sink is not None:
                self.sink(ev.to_json())
        return ev

    def note(self, name: str, data: Mapping[str, Any], *,
             instance: str | None = None) -> HistoryEvent:
        """A protocol's ``Note`` (the coordinator's or an instance's)."""
        return self.write("protocol", instance=instance, name=name, data=dict(data))


# ---------------------------------------------------------------------------- reading


def upgrade_v1(record: Mapping[str, Any], seq: int, host: Host = "spark") -> dict[str, Any]:
    """A version 1 record (``{"t", "event"|"kind", **fields}``) as a version 2 record.

    Renamed kinds get their new names (``V1_RENAMES``); ``instance``/``incarnation`` of a
    kind that declares an instance move to the envelope; the fault type, stored as
    ``fault`` in version 1, becomes ``data.type`` and the occurrence (``index.occurrence``,
    or the simulation's ``id``) becomes ``fault``. A kind this schema does not know was a
    protocol note and becomes ``protocol``.
    """
    rec = dict(record)
    t = float(rec.pop("t", 0.0))
    wall = rec.pop("wall", None)
    old = str(rec.pop("event", None) or rec.pop("kind", ""))
    rec.pop("kind", None)
    kind = V1_RENAMES.get(old, old)
    out: dict[str, Any] = {"v": VERSION, "seq": seq, "t": t, "host": host}
    if wall is not None:
        out["wall"] = wall
    if kind not in KINDS:
        return {**out, "kind": "protocol", "data": {"name": old, "data": rec}}
    if kind.startswith("fault-"):
        if old == "fault":
            rec["type"] = "crash"
        elif "fault" in rec:
            rec["type"] = rec.pop("fault")
        if "index" in rec and "occurrence" in rec:
            out["fault"] = f"{rec['index']}.{rec['occurrence']}"
        elif "id" in rec:
            out["fault"] = str(rec.pop("id"))
    if kind == "instance-started":
        rec.setdefault("reason", "restart")
    if KINDS[kind].instance:
        for key in ("instance", "incarnation"):
            if key in rec:
                out[key] = rec.pop(key)
    return {**out, "kind": kind, "data": rec}


Records = Iterable["HistoryEvent | Mapping[str, Any]"]


def read_history(records: Records,
                 host: Host = "spark") -> list[HistoryEvent]:
    """A run's history from stored or in-memory records of either version, in ``seq``
    order. Version 1 records are numbered in the order they come in (``host`` names the
    host that wrote them: stored runs were all Spark runs)."""
    out: list[HistoryEvent] = []
    for n, rec in enumerate(records, start=1):
        if isinstance(rec, HistoryEvent):
            out.append(rec)
        elif "v" in rec:
            out.append(HistoryEvent.from_json(rec))
        else:
            out.append(HistoryEvent.from_json(upgrade_v1(rec, n, host)))
    return sorted(out, key=lambda e: e.seq)


def of_kind(events: Iterable[HistoryEvent], *kinds: str) -> list[HistoryEvent]:
    return [e for e in events if e.kind in kinds]


def notes(events: Iterable[HistoryEvent], *names: str) -> list[HistoryEvent]:
    """The protocol notes of these names."""
    return [e for e in events if e.kind == "protocol" and e.data["name"] in names]
