"""``CausalInstance``: tree-clock diffs, diff and payload logs, local snapshots, and the
replay of a recovery plan (see the package docstring)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from itertools import chain, repeat
from typing import Any

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.runtime.operators import WATERMARK_MAX
from protocols.causal.dlog_parts import DiffLogParts
from protocols.causal.dlog_parts import unpack as unpack_dlog
from protocols.causal.messages import (
    Answer,
    CausalInit,
    Covered,
    Durable,
    FoldDiffLog,
    LocalSnapshot,
    Plan,
    Query,
    Replayed,
    ResendTo,
    Restored,
    TrimDiffLog,
)
from protocols.causal.params import CausalParams
from protocols.causal.recovery import CausalIncomplete, ReplayEvent, observations, unobserved
from protocols.causal.seen_apart import SeenApart, unpack_apart
from protocols.contract.actions import SNAPSHOTTING, Chain, DeclarePhase, InstanceAction, Send
from protocols.contract.events import BatchIn, MarkerIn, Started
from protocols.contract.messages import Ended, Msg
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.shared.logged import SLOT, LoggedInstance
from protocols.shared.packed_counts import unpack
from protocols.shared.payload_log import PayloadLog
from protocols.shared.treeclock import Plain, TreeClock, plain_child

# The marker a sender puts on a channel before it resends or, as a replacement, resumes
# it: ``meta`` is ``(start, watermark)``, the sender time it resumes at (spec R4, R5; see
# ``_resumed``) and the channel's watermark as of the last batch before it, the highest
# any batch below ``start`` carried (None without event time; see ``_wm_before``).
RESUME = "resume"

# Operators without state (map, filter, flat_map): they persist nothing, and a replacement
# restores nothing; it starts with clock T* and time t_min (spec R3), and each input
# channel's watermark is the one its parent's RESUME marker carries.
STATELESS = frozenset({"map", "filter", "flat_map"})


def restarts_from_tstar(kind: str) -> bool:
    """Spec R3: an operator without state persists nothing and restarts from T*.

    With or without event time: such an instance keeps, per input channel, the highest
    watermark received and forwards their minimum. T* names its parents' last batches,
    not the watermarks they carried; each parent's RESUME marker carries that
    channel's watermark as of the last batch before the resume point, so the
    replacement's watermarks are its predecessor's at T* before it runs anything.
    """
    return kind in STATELESS


# A sink's de-duplication state with each output (spec causal.md S1), as a chain of
# deltas: output j after a local snapshot persists, under ref ``SINK_REF + j``, what
# changed since output j - 1 (see ``persist_sink``). A replacement restores the snapshot,
# then the chain.
SINK_REF = 2


def snapshot_interval(params: CausalParams, inputs: int) -> int:
    """Processed batches between an instance's local snapshots: ``snapshot_every`` per
    input channel."""
    return params.snapshot_every * max(1, inputs)


def sink_refs(params: CausalParams, inputs: int) -> tuple[int, ...]:
    """The refs a sink's chain may occupy: what its replacement is given to read. A sink
    outputs at most once per processed batch, so a chain is never longer than the
    snapshot interval; one that would be ends in a snapshot (``persist_sink``)."""
    return tuple(range(SINK_REF, SINK_REF + snapshot_interval(params, inputs)))


def fold_sink_deltas(older: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """Two consecutive deltas of one chain as one, stored under the newer's ref.

    The time is the newer's; visible times and positions only grow, so per channel the
    newer's hold where it has one (a delta names only the channels that moved); counts
    are absolute, so for an identity both touched the newer one's hold, ``seen``
    included: an identity the newer touched with no ``seen`` entry had ``seen`` equal to
    ``emitted`` then. Diff-log entries are each delta's own, so they are joined in order.
    Restoring the result (``_restore_sink``) leaves what restoring both would.
    """
    dlog = {ch: [*older["dlog"].get(ch, ()), *entries] for ch, entries in newer["dlog"].items()}
    for ch, entries in older["dlog"].items():
        dlog.setdefault(ch, entries)
    emitted = delta_counts(newer["emitted"])
    return {**newer, "dlog": dlog, "emitted": {**delta_counts(older["emitted"]), **emitted},
            "vis": {**older["vis"], **newer["vis"]}, "pos": {**older["pos"], **newer["pos"]},
            "seen": {**{i: n for i, n in older["seen"].items() if i not in emitted},
                     **newer["seen"]}}


def delta_counts(emitted: dict[Any, int] | list[Any]) -> dict[Any, int]:
    """A delta's visible counts: stored as a list of identities when each is at 1 (their
    first count, nearly every output of a Nexmark sink), which spares hashing each once
    more to build a dict."""
    return dict.fromkeys(emitted, 1) if isinstance(emitted, list) else emitted


class CausalInstance(LoggedInstance[CausalParams]):
    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: CausalParams):
        super().__init__(me, cores, params)
        core = self.core
        self.depth = params.depth + 1
        # ``clocks: off`` measures what the clocks cost (paper 000, Fig. 3): no diff is
        # piggybacked or logged, so a failure can only be recovered by the fallback.
        self.clocks = params.clocks == "on"
        # Per input channel: a merging instance (a sink behind 20 shards) gets many small
        # batches, each a slice of one upstream batch.
        self.every = snapshot_interval(params, len(core.inputs))
        self.epoch = 0
        self.incarnation = 0  # ``CausalInit.incarnation``: the RESUMEs meant for it
        self.clock = TreeClock(core.id)
        self.time = 0
        # Diffs in plain form (``TreeClock.receive_plain``): shared by the batches that
        # carry them, the diff log and snapshots, and marshal-able on the wire.
        self.last_diff: Plain | None = None
        self.dlog: dict[int, list[tuple[int, Plain]]] = {ch: [] for ch in core.inputs}
        # Per input channel, the diff log's parts its snapshots store (``dlog_parts``).
        self.dlog_parts: dict[int, DiffLogParts] = {}
        # Per input channel, the sender time of the last batch processed: with clocks,
        # the clock's level-1 entry for that parent (spec D6), kept apart so that
        # ``clocks: off`` still trims payload logs.
        self.ptime: dict[int, int] = dict.fromkeys(core.inputs, 0)
        # Per input channel, the sender time of the last batch accepted (processed or
        # pending): a batch at or below it is a duplicate by its identity (parent, parent
        # time), spec S1.
        self.got: dict[int, int] = dict.fromkeys(core.inputs, 0)
        # A replacement's input channels until their sender's ``RESUME``: what arrives
        # before it is sent again after it.
        self.unsynced: set[int] = set()
        self.pending: dict[int, deque[Batch]] = {ch: deque() for ch in core.inputs}
        self.eos_wait: set[int] = set()
        self.replay: deque[ReplayEvent] = deque()
        self.tstar: TreeClock | None = None
        self.awaiting = False
        self.since = 0
        self.snaps = 0
        # Records and events processed since the last local snapshot, and how many the
        # next one waits for (``snapshot_balance`` times the entries the state held at
        # the last one): a q6 tail average behind a reorder took 1,700 small batches a
        # schedule and snapshotted its 2,000 sellers every 40 of them, a tenth of all the
        # schedule's work. Waiting for as much processing as the state is large keeps
        # snapshots at most about as costly as processing, and what a replacement
        # replays at most about what restoring the snapshot reads.
        # A sink keeps its cadence: its chain of deltas is never longer than ``every``.
        self.work = 0
        self.due = 0
        self.balance = 0.0 if core.is_sink else params.snapshot_balance
        # Sinks: the identities counted since the last delta of the chain, the chain's
        # length since the last local snapshot, and per input channel the highest
        # diff-log ``seq`` already persisted (by a snapshot or a delta).
        self.touched: set[Any] = set()
        # While every identity counted since the last delta was new (its counts 1, as
        # on Nexmark q0 nearly always): those identities, batch by batch, instead of
        # ``touched``; None once one was not. The delta is then made without looking
        # each one up in the sink's counts (a million of them a q0 schedule).
        self.first: list[list[Any]] | None = []
        # While apart: the parts that store the differences, and what moved them since.
        self.apart_parts = SeenApart()
        self.chain = 0
        self.dmark: dict[int, int] = {}
        # A sink's input channels whose visible time, position or diff log moved since
        # the last delta: the next one names only those (the sink behind 20 shards runs
        # one of them per batch). None: every channel, after a start or a plan.
        self.moved: set[int] | None = None
        # The coordinator names each input channel's parent: a diff names instances.
        self.chan_of: dict[str, int] = {}
        # Round-robin output goes to channel (own time mod n) (spec change 2): where a
        # replacement resumes is decided by its time alone, not by a hidden counter.
        core.round_robin_by(self._now)
        # Spec R3: an operator without state (map, filter, flat_map) persists nothing; a
        # replacement starts from T* (clock) and t_min (time), given with its plan, and
        # from the per-channel watermarks its parents' RESUME markers carry.
        self.from_tstar = restarts_from_tstar(core.spec.kind)
        # Quiet (rule N6, docs/rules.md): a stateless instance with one input and
        # several output channels sends nothing on a channel its event produced nothing
        # for; the event's diff goes with its next batch there (``carry``). Under N5 each
        # such event was an empty batch to every child behind a hash fan-out: most of
        # what a simulated Nexmark q4 or q6 schedule delivered. At every multiple of
        # ``every`` of its time it sends on every channel, so no child's view of it lags
        # further (its T* restart point, and what its parents keep, move on).
        self.quiet = (self.from_tstar and len(core.inputs) == 1 and len(core.out_channels) > 1
                      and self.clocks)
        # A quiet replacement's output channels still numbered for now (``_renumber``):
        # the child's sender time up to which it has everything, and its position.
        self.renumber: dict[int, tuple[int, int]] = {}
        # A quiet instance's silent events per output channel since its last batch there:
        # their diffs go with the next one (``stamp``), so the child that has a batch has
        # every event up to it logged, as under N5: spec R7 still holds, and M3 finds a
        # failed parent's events there (plain silence lost them: a join failing with its
        # silent child had events logged nowhere).
        self.carry: dict[int, list[Plain]] = ({ch: [] for ch in core.out_channels}
                                              if self.quiet else {})
        # A replacement started from T* with event time: the input channels whose
        # watermark at T* is not known yet (no RESUME yet). It runs nothing until every
        # one is known: an event run earlier would forward a lower watermark than its
        # predecessor did at the same time.
        self.wm_unknown: set[int] = set()
        # Per output channel: the highest watermark of the batches trimmed from the payload
        # log (a T* replacement: its watermark at T*), what a RESUME carries when no
        # batch below its start is left in the log.
        self.floor_wm: dict[int, int] = dict.fromkeys(core.out_channels, -1)
        # Per output channel, a resume point and the child incarnation it is for, whose
        # RESUME waits until this instance has produced every batch below it (a
        # replacement regenerating them) and knows its watermark at T*: only then is the
        # watermark it carries known.
        self.announce: dict[int, tuple[int, int]] = {}
        # A stateless replacement's input channels whose RESUME came before its plan, and
        # what followed it: checked and run once T* says what it already has.
        self.early: dict[int, tuple[int, int | None]] = {}
        self.held: dict[int, list[Batch]] = {}
        # Stateless: (time, sender time per input channel) after each event since g, the
        # lowest time a recovery may restart it from: T* at g, what its parents keep.
        self.hist: deque[tuple[int, dict[int, int]]] = deque([(0, dict(self.ptime))])

    def _now(self) -> int:
        return self.time

    def start(self, ev: Started) -> None:
        init = ev.init if isinstance(ev.init, CausalInit) else CausalInit()
        self.epoch = init.epoch
        self.incarnation = init.incarnation
        self.awaiting = init.recover
        if init.recover:
            self.unsynced = set(self.core.inputs)
        self.chan_of = dict(init.parents)
        blob: dict[str, Any] | None = ev.restored
        current = blob is not None and blob["epoch"] == self.epoch
        if current:
            assert blob is not None
            self._restore(blob)
        elif blob is not None:
            self.emitted = unpack(blob["emitted"])  # visible output outlives epochs
        if self.core.is_sink:
            self._restore_chain([b for b in ev.extra.values() if b is not None])
            # Restored counts are often equal again (no fallback since the snapshot):
            # then the sink counts in bulk (``LoggedInstance.count_all``) from the start.
            self.settle_counts()
        if not current and not self.from_tstar:
            self._persist()  # a slot exists before any failure can need it
        if self.awaiting:
            # The restore clock R: the coordinator asks each parent A to resend from
            # 1 + R[A] (spec R4) once it has the plan.
            self.report(Restored(None if self.from_tstar else self.clock.copy()))
            if self.done:
                self.report(Ended())

    # ------------------------------------------------------------ snapshots

    def _blob(self) -> dict[str, Any]:
        done = {ch: self.pos[ch] - len(q) for ch, q in self.pending.items()}
        return {
            "epoch": self.epoch, "n": self.snaps, "core": self.core.snapshot_state(),
            # Clocks and batches as plain tuples: the blob is marshalled, several times
            # cheaper than pickling thousands of small objects (``ftctl.codec``).
            "pos": done, "time": self.time, "clock": self.clock.to_plain(),
            "ptime": dict(self.ptime),
            "last": self.last_diff,
            "plog": {ch: v.pack() for ch, v in self.plog.items()},  # encoded once
            "floor_wm": dict(self.floor_wm),
            "dlog": {ch: self._dlog_parts(ch).pack(v) for ch, v in self.dlog.items()},
            "done": self.done, "emitted": self.packed.pack(self.emitted),
            "seen": self._seen_apart(),
        }

    def _dlog_parts(self, ch: int) -> DiffLogParts:
        parts = self.dlog_parts.get(ch)
        if parts is None:
            parts = self.dlog_parts[ch] = DiffLogParts()
        return parts

    def _seen_apart(self) -> list[bytes]:
        """A sink's ``seen`` counts where they differ from its visible ones, as parts
        (``seen_apart``): ``seen`` never exceeds ``emitted`` and equals it except after a
        fallback, so stored whole it would double the snapshot (nearly every record's
        identity, on Nexmark q1)."""
        parts = self.apart_parts
        if not self.apart:  # until a restore: comparing the dicts took a q1 sink seconds
            parts.clear()
            return []
        seen, emitted, differ = self.seen, self.emitted, self.differ
        if differ is None:  # every identity, once after the counts were set apart
            differ = {i: m for i, n in emitted.items() if (m := seen.get(i, 0)) != n}
            stored = parts.base(differ)
        else:  # then only what suppressed records changed: a q1 sink, apart a whole
            # run after a fallback, re-scanned 500,000 identities per snapshot (10 s)
            stored = parts.changes(differ, seen)
        self.apart = bool(differ)
        self.differ = differ
        if not differ:
            parts.clear()
            return []
        return stored

    def _plog_of(self, plain: Iterable[tuple[Any, int, int | None, Plain]]) -> PayloadLog:
        log = PayloadLog()
        for records, seq, wm, meta in plain:
            batch = Batch(records, seq, wm, meta)
            log.append(self.key(batch), batch)
        return log

    def _restore(self, blob: dict[str, Any]) -> None:
        self.core.restore_state(blob["core"])
        self.pos = dict(blob["pos"])
        self.time = blob["time"]
        self.snaps = blob["n"]
        self.clock = TreeClock.from_plain(blob["clock"])
        self.ptime = dict(blob["ptime"])
        self.got = dict(self.ptime)
        self.last_diff = blob["last"]
        self.plog = {ch: self._plog_of(PayloadLog.unpack(v)) for ch, v in blob["plog"].items()}
        self.floor_wm = dict(blob["floor_wm"])
        self.dlog = {}
        for ch, parts in blob["dlog"].items():
            self.dlog[ch] = unpack_dlog(parts)
            self._dlog_parts(ch).adopt(self.dlog[ch], parts)
        self.done = blob["done"]
        self.emitted = unpack(blob["emitted"])
        self.seen = {**self.emitted, **unpack_apart(blob["seen"])}

    def _persist(self) -> None:
        self.snaps += 1
        self.since = 0
        self.work = 0
        if self.balance:
            self.due = int(self.balance * self.core.state_size())
        # Open until the coordinator has the LocalSnapshot (it closes it): a crash before
        # then loses a snapshot the coordinator never learned of.
        self.out.append(DeclarePhase(SNAPSHOTTING, True, self.time))
        blob = self._blob()
        # The snapshot holds every count and every diff-log entry: a new chain starts.
        self.touched = set()
        self.first = []
        self.chain = 0
        self.dmark = dict(blob["pos"])
        self.moved = set()
        self.persist(SLOT, blob)
        self.report(LocalSnapshot(blob["ptime"], self.time))

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        """With every output, in the same step (spec causal.md S1), what a replacement
        needs beyond the last local snapshot to stand exactly where this output left it:

        - per input channel, the sender time of the last batch made visible: the sink's
          level-1 clock entries, the message identities (parent, parent time) it has. A
          replacement in the same epoch asks each parent to resend after it and drops
          any batch at or below it, so nothing visible is made visible again, in
          whatever order the channels interleave (and the batch's channel position, for
          the FIFO gap check only);
        - the diff-log entries since the snapshot and the time: its clock (rebuilt from
          them) and its answers about a failed parent must cover the same batches, or the
          parent's replacement would resume after batches it never replayed;
        - the counts per record identity changed since the snapshot: a whole-graph
          fallback renumbers every channel, and then only record identity tells a
          duplicate (spec S2).

        Each output persists only what changed since the one before, as the next delta of
        the chain (``SINK_REF + j``): storing everything since the snapshot with every
        output cost a sink the square of its outputs between snapshots (on Nexmark q1,
        whose identities are nearly all distinct, 90% of a simulated run). The chain is
        tagged with the epoch and the snapshot it follows; a chain at its longest ends in
        a local snapshot instead, which holds everything. A host that carries out several
        outputs at once may write their deltas as one (``fold_sink_deltas``).
        """
        if self.chain >= self.every:
            self._persist()
            return
        touched, self.touched = self.touched, set()
        first, self.first = self.first, []
        moved, self.moved = self.moved, set()
        chans = self.core.inputs if moved is None else moved
        seen, emitted, dmark, pos, pending = (self.seen, self.emitted, self.dmark, self.pos,
                                              self.pending)
        dlog: dict[int, list[tuple[int, Plain]]] = {}
        for ch in chans:
            log = self.dlog[ch]
            mark, k = dmark.get(ch, 0), len(log)
            while k and log[k - 1][0] > mark:
                k -= 1
            dlog[ch] = log[k:]
            if log:
                dmark[ch] = max(mark, log[-1][0])
        self.persist(SINK_REF + self.chain, {
            "epoch": self.epoch, "snap": self.snaps, "j": self.chain, "time": self.time,
            "vis": {ch: self.ptime[ch] for ch in chans},
            "pos": {ch: pos[ch] - len(pending[ch]) for ch in chans},
            "dlog": dlog,
            "emitted": list(chain.from_iterable(first)) if first is not None  # all at 1
            else dict(zip(touched, map(emitted.get, touched, repeat(0)), strict=True)),
            # seen <= emitted, and equal except after a fallback: only differences stored.
            "seen": {i: n for i in touched if (n := seen.get(i, 0)) != emitted.get(i, 0)}
            if self.apart else {}}, Chain((self.epoch, self.snaps), fold_sink_deltas))
        self.chain += 1

    def closing(self, caught: list[Any], below: list[Any]) -> None:
        if self.differ is not None:  # else the next snapshot compares every count
            self.apart_parts.note(caught, below)

    def counted(self, idents: list[Any], shown: list[Any], first: bool) -> None:
        # Suppressed records count too: the positions stored with the next output cover
        # their batches, so their ``seen`` must be stored with them, or a replacement
        # after a fallback would take the next record of the same identity for them
        # (topologies/joins/join-window.yaml, seed 884 with every fault kind).
        if first and self.first is not None:
            self.first.append(idents)
            return
        if self.first:  # no longer all first counts: those go with the rest
            self.touched.update(chain.from_iterable(self.first))
        self.first = None
        self.touched.update(idents)

    def _restore_chain(self, deltas: list[dict[str, Any]]) -> None:
        """What the last incarnations made visible after the restored local snapshot: the
        deltas of its chain, in order. Everything only grows within an epoch and visible
        counts across epochs, so a delta the snapshot already covers (left over from an
        earlier chain) changes nothing, and every delta present is applied. This
        incarnation's chain goes on after the restored one, whose deltas it must not
        overwrite before its next snapshot covers them."""
        deltas.sort(key=lambda d: (d["epoch"] != self.epoch, d["snap"], d["j"]))
        for d in deltas:
            self._restore_sink(d)
        self.chain = 1 + max((d["j"] for d in deltas
                              if (d["epoch"], d["snap"]) == (self.epoch, self.snaps)),
                             default=-1)
        self.dmark = {ch: max(self.pos[ch], 0) for ch in self.core.inputs}

    def _restore_sink(self, sink: dict[str, Any]) -> None:
        """One delta of the chain. From an older epoch only its visible counts still
        hold."""
        seen, emitted = self.counts_to_raise()
        counts = delta_counts(sink["emitted"])
        for i, n in counts.items():
            if n > emitted.get(i, 0):
                emitted[i] = n
        if sink["epoch"] != self.epoch:
            return
        differ = sink["seen"]
        for i, n in counts.items():
            n = differ.get(i, n)
            if n > seen.get(i, 0):
                seen[i] = n
        for ch, entries in sink["dlog"].items():
            log = self.dlog[ch]
            for e in entries:
                if e[0] > self.pos[ch]:
                    log.append(e)
                    self.clock.apply_plain(e[1])
        for ch, p in sink["pos"].items():
            self.pos[ch] = max(self.pos[ch], p)
        for ch, t in sink["vis"].items():
            self.ptime[ch] = self.got[ch] = max(self.ptime[ch], t)
        # The clock's level-1 entries are the visible vector even where the diff-log
        # entries behind it were trimmed (a parent's newer snapshot covers them, T3):
        # parents resend after it (R4) and a failed parent resumes after it (R1).
        parent = {c: p for p, c in self.chan_of.items()}
        self.clock.apply_plain((self.core.id, 0, tuple(
            (parent[ch], t, ()) for ch, t in sink["vis"].items() if ch in parent)))
        self.time = max(self.time, sink["time"])
        self.clock.time = max(self.clock.time, self.time)

    # ------------------------------------------------------------ normal operation

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        ch, batch = ev.channel, ev.batch
        if ch in self.early:
            self.held[ch].append(batch)
            return self.flush()
        t = batch.meta[1]
        if self.pos[ch] < 0 and t > self.got[ch] and ch not in self.unsynced:
            # A stateless replacement knows its parents by sender time only (T*): the
            # channel position restarts at the resend's first batch.
            self.pos[ch] = batch.seq - 1
            self.moved = None
        # A duplicate by identity (spec S1), then the FIFO gap check: a batch past the
        # next one on the channel waits for the resend that covers it.
        if t > self.got[ch] and batch.seq == self.pos[ch] + 1 and ch not in self.unsynced:
            self.pos[ch] = batch.seq
            self.got[ch] = t
            self.process(ch, batch)
        return self.flush()

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        if ev.marker.kind == RESUME:
            if ev.marker.id != self.incarnation:
                # Asked for an earlier incarnation of this instance (a control delayed on
                # the way, or a replacement that caught up only after this one started):
                # its own resend follows; what comes with this one is dropped as before
                # any RESUME.
                return self.flush()
            if self.from_tstar and self.awaiting:
                self.early[ev.channel] = ev.marker.meta
                self.held[ev.channel] = []
            else:
                self._resumed(ev.channel, *ev.marker.meta)
        elif ev.channel in self.early:
            self.held[ev.channel].append(ev.marker)  # type: ignore[arg-type]
        elif ev.channel not in self.unsynced:  # an end of stream is resent after RESUME
            if self.pos[ev.channel] < 0 and ev.marker.meta is not None:
                self.pos[ev.channel] = ev.marker.meta  # nothing came after the RESUME
                self.moved = None
            return super().on_marker(ev, now)
        return self.flush()

    def _resumed(self, ch: int, start: int, wm: int | None) -> None:
        """The sender resends or resumes ``ch`` at sender time ``start``: exactly one past
        the last batch this instance has from it. Earlier would send it duplicates, which
        must never leave a replacement or a resending parent (spec R4, R5); later, a gap
        nothing fills. Either is a wrong plan, an internal error like R7/R8.

        ``wm`` is the channel's watermark as of the batch before ``start``: a replacement
        started from T* takes it as the highest watermark received on ``ch``, what its
        predecessor had there at T*, and runs once it has it for every channel."""
        have = self.got[ch]
        if start != have + 1:
            parent = next((p for p, c in self.chan_of.items() if c == ch), ch)
            what = "duplicates" if start <= have else "a gap"
            raise CausalIncomplete(f"{self.core.id}: {parent} resumes at sender time {start},"
                                   f" this instance has up to {have} ({what})")
        self.unsynced.discard(ch)
        core = self.core
        if ch in self.wm_unknown:
            if wm is not None:
                core.raise_input_watermark(ch, wm)
            self.wm_unknown.discard(ch)
            if not self.wm_unknown:
                # Every event sent its watermark on every output (N5), so the predecessor
                # had sent this one on each, and it is the floor a resume below T* reads.
                self.floor_wm = dict.fromkeys(core.out_channels, core.resume_watermark())
                self._pump()
        elif core.needs_wm and not core.is_sink:
            # Like the sender time: the watermark a resend or a replacement starts from
            # is the one this instance has (with the batches it holds for its replay).
            # A sink is left out: its visible vector may run past its snapshot's state.
            have = max([core.in_wm[ch], *(b.watermark for b in self.pending[ch]
                                          if b.watermark is not None)])
            # Past the sender's end-of-stream flush the receiver holds the final
            # watermark; a sender restarted from T* after its flush cannot tell its
            # predecessor flushed (it flushes again), so there it does not compare.
            if wm != have and have != WATERMARK_MAX:
                parent = next((p for p, c in self.chan_of.items() if c == ch), ch)
                raise CausalIncomplete(f"{core.id}: {parent} resumes at sender time {start}"
                                       f" with watermark {wm}, this instance has {have}")

    def resend(self, ch: int, start: int, to: int = 0) -> None:
        # The RESUME goes first; a replacement that has not produced every batch below
        # ``start`` yet sends it once it has (``_announce``): before then nothing at or
        # past ``start`` exists to resend. ``to``: the child's incarnation.
        self.announce[ch] = (start, to)
        self._announce((ch,))
        super().resend(ch, start)

    def _announce(self, chans: Iterable[int], force: bool = False) -> None:
        """Send the waiting RESUME of each of ``chans`` whose watermark is known: every
        batch below its start produced, and this instance's own watermark at T* known
        (without event time it carries none and never waits)."""
        ready = force or not self.core.needs_wm
        for ch in chans:
            if ch not in self.announce:
                continue
            start, to = self.announce[ch]
            if ready or (self.time >= start - 1 and not self.wm_unknown):
                del self.announce[ch]
                wm = self._wm_before(ch, start)
                self.out.append(Send(ch, Marker(RESUME, to, (start, wm))))

    def _wm_before(self, ch: int, start: int) -> int | None:
        """The watermark of ``ch`` as of its last batch below ``start``: the highest any
        batch below it carried (a receiver keeps the highest), from the payload log and,
        for what was trimmed from it, ``floor_wm``. A resume point is never at or below a
        trimmed batch (spec T2)."""
        return self._highest_wm(ch, start) if self.core.needs_wm else None

    def _highest_wm(self, ch: int, start: int) -> int:
        wm = self.floor_wm.get(ch, -1)
        key = self.key
        for b in self.plog.get(ch, []):
            if key(b) >= start:
                break
            if b.watermark is not None and b.watermark > wm:
                wm = b.watermark
        return wm

    def sent(self, ch: int, batch: Batch) -> None:
        super().sent(ch, batch)  # stamped: its key is known (and above the watermark read)
        if ch in self.renumber:
            self._renumber(ch, batch)
        if ch in self.announce and self.key(batch) >= self.announce[ch][0]:
            self._announce((ch,))  # ``take`` sends the batch after the marker

    def _renumber(self, ch: int, batch: Batch | None) -> None:
        """A quiet replacement's numbering of ``ch``: what it regenerates up to the
        child's sender time ``t`` is filtered (the child has it) and numbered for now.
        The first batch past ``t`` (or the end of stream) settles it: the regenerated
        batches in the payload log (resent to that child should it restore an older
        snapshot) are numbered back from the child's position, as its predecessor
        numbered them, and what follows goes on from there."""
        t, pos = self.renumber[ch]
        if batch is not None and self.key(batch) <= t:
            return
        del self.renumber[ch]
        before = [b for b in self.plog[ch].since(0) if b is not batch]
        for i, b in enumerate(before):
            b.seq = pos - len(before) + 1 + i
        if batch is not None:
            pos += 1
            batch.seq = pos
        self.core.number_from(ch, pos)

    def flush(self) -> list[InstanceAction]:
        if self.announce:
            self.take()
            self._announce(list(self.announce))
        return super().flush()

    def close_outputs(self) -> None:
        for ch in list(self.renumber):
            self._renumber(ch, None)  # every batch was produced: the end marker's seq
        self._announce(list(self.announce), force=True)  # every batch was produced
        super().close_outputs()

    def gc(self, ch: int, upto: int) -> None:
        log = self.plog.get(ch)
        if log and self.core.needs_wm:
            self.floor_wm[ch] = self._highest_wm(ch, upto + 1)
        super().gc(ch, upto)

    def stamp(self, ch: int, batch: Batch) -> None:
        # Every batch carries its sender time, the root of its diff (spec D3, D5); without
        # clocks, the bare root. A quiet instance's adds, as a fourth element, the diffs of
        # its events since its last batch on ``ch`` (``carry``).
        if not self.clocks:
            batch.meta = (self.core.id, self.time, ())
            return
        carried = self.carry.get(ch)
        if carried:
            batch.meta = (*self.last_diff, tuple(carried))  # type: ignore[misc]
            self.carry[ch] = []
        else:
            batch.meta = self.last_diff

    def key(self, batch: Batch) -> int:
        """Payload logs, resends and a replacement's output filter address a batch by its
        sender time (spec D5, R4, R5), not by its position on the channel."""
        meta: Plain = batch.meta
        return meta[1]

    def step(self) -> None:
        if self.awaiting:
            self.more = True  # a recovering source waits for where to resume
            return
        self.time += 1
        self.last_diff = (self.core.id, self.time, ())
        self.clock.time = self.time
        super().step()
        self._tick()

    def on_eos(self, ch: int) -> None:
        # Held until every batch before it ran (and the replay, if any, is over).
        if ch not in self.core.finished:
            self.eos_wait.add(ch)
            self._pump()

    def process(self, ch: int, batch: Batch) -> None:
        if not (self.awaiting or self.replay or self.wm_unknown or self.eos_wait
                or self.tstar is not None or any(self.pending.values())):
            self._run(ch, batch)  # what ``_pump`` would do, without visiting every channel
            return
        self.pending[ch].append(batch)
        self._pump()

    def _run(self, ch: int, batch: Batch, at: int | None = None) -> None:
        self.time = at if at is not None and at > self.time else self.time + 1
        self.ptime[ch] = batch.meta[1]
        if self.moved is not None:
            self.moved.add(ch)
        if self.clocks:
            meta = batch.meta
            if len(meta) == 4:  # the sender's silent events since its last batch here
                log = self.dlog[ch]
                for d in meta[3]:
                    log.append((batch.seq, TreeClock.receive_plain(
                        self.core.id, self.time, d, self.depth)))
                meta = meta[:3]
            diff = TreeClock.receive_plain(self.core.id, self.time, meta, self.depth)
            self.clock.apply_plain(diff)
            self.last_diff = diff
            self.dlog[ch].append((batch.seq, diff))
        if self.from_tstar:
            self.hist.append((self.time, dict(self.ptime)))
        sent = len(self.out)
        self.work += len(batch.records)
        self.core.deliver(ch, batch)
        self.take()
        if self.clocks and not self.core.is_sink:
            self._no_silent_event(sent)
        self.after_deliver()
        self._tick()

    def _no_silent_event(self, since: int, force: bool = False) -> None:
        """Every event sends on every output channel, an empty batch if nothing else; a
        quiet instance's (N6) only at a multiple of ``every`` of its time, its other
        events' diffs carried to each channel's next batch.

        Spec causal.md N5: an event no child sees leaves no diff anywhere, so a replacement
        cannot place it, and where it lands changes what later events send (a watermark
        that advances one event earlier or later adds or removes a watermark-only batch,
        shifting every later ``seq`` its children de-duplicate by). A quiet instance's
        silence depends on its time and output alone, so its replacement is silent where
        it was.
        """
        core = self.core
        got = {a.channel for a in self.out[since:] if type(a) is Send}
        if self.quiet and self.time % self.every and not force:
            diff = self.last_diff
            assert diff is not None  # set by the event that just ran
            for out in core.out_channels:
                if out not in got:
                    self.carry[out].append(diff)
            return
        wm = core.wm_sent if core.needs_wm else None
        for out in core.out_channels:
            if out not in got:
                core.send(out, Batch([], watermark=wm))
        self.take()

    def _tick(self) -> None:
        self.since += 1
        self.work += 1
        if self.since >= self.every and self.work >= self.due and not self.from_tstar:
            self._persist()

    def _pump(self) -> None:
        if self.wm_unknown:
            return  # a T* replacement's watermarks come with its parents' RESUMEs
        while not self.awaiting:
            if self.replay:
                t, parent, ptime = self.replay[0]
                ch = self.chan_of.get(parent) if parent is not None else None
                q = self.pending.get(ch) if ch is not None else None
                if parent is None and self.core.inputs:
                    # The observed end-of-stream flush: after every batch its inputs
                    # still deliver (FIFO), once every input ended.
                    busy = [c for c, q in self.pending.items() if q]
                    if busy:
                        self._run(busy[0], self.pending[busy[0]].popleft())
                    elif self.eos_wait | self.core.finished == set(self.core.inputs):
                        self.replay.popleft()
                        self._eos(t)
                    else:
                        return
                    continue
                if ch is None or q is None:
                    self.replay.popleft()  # nothing to match (a source's own event)
                    continue
                if not q:
                    return  # the batch to replay next has not been resent yet
                b = q.popleft()
                btime = b.meta[1] if b.meta is not None else 0
                if btime == ptime:
                    self.replay.popleft()
                    self._run(ch, b, t)
                elif btime < ptime:
                    self._run(ch, b)  # FIFO forces it before the observed one
                else:  # R7 held, so FIFO delivers every observed batch in order
                    raise CausalIncomplete(f"{self.core.id}: replay expects {parent}#{ptime}"
                                           f" as {t}, the channel is past it ({btime})")
                continue
            if self.tstar is not None:
                # Spec R8: the replay rebuilt at least the causal history the children
                # rely on (T*). Nothing is merged: a gap here is a bug, not a repair. A
                # source has nothing to replay: it regenerates its events (R3).
                if self.core.inputs and not self.tstar.leq(self.clock):
                    raise CausalIncomplete(f"{self.core.id}: clock {self.clock.to_plain()} "
                                           f"does not cover T* {self.tstar.to_plain()}")
                self.tstar = None
                self.report(Replayed())
            ran = False
            for ch, q in self.pending.items():
                if q:
                    self._run(ch, q.popleft())
                    ran = True
            if not ran:
                break
        if not self.awaiting and not self.replay:
            self._eos()

    def _eos(self, at: int | None = None) -> None:
        for ch in sorted(self.eos_wait):
            if not self.pending[ch]:
                self.eos_wait.discard(ch)
                self._end(ch, at)

    def _end(self, ch: int, at: int | None = None) -> None:
        """End of stream on ``ch``. Once every input ended, the flush (windows fired at the
        last watermark, an instance's final batches) is an event of its own, with a time
        and a bare diff, and sends on every output (spec N5): each sender time names
        exactly one batch per channel, so resending from T + 1 never skips a flush."""
        core = self.core
        if ch in core.finished or not core.end_of_stream(ch):
            return
        if core.out_channels:
            self.time = at if at is not None and at > self.time else self.time + 1
            self.last_diff = (core.id, self.time, ())
            self.clock.time = self.time
            sent = len(self.out)
            self.take()
            if self.clocks:
                self._no_silent_event(sent, force=True)
        self.take()
        self.close_outputs()

    # ------------------------------------------------------------ controls

    def control(self, msg: Msg) -> None:
        if isinstance(msg, Query):
            self._answer(msg)
        elif isinstance(msg, Plan):
            self._plan(msg)
        elif isinstance(msg, Durable):
            if self.awaiting:
                # A replacement's history starts at T*, given with its plan: before it,
                # it knows nothing it could vouch for (a restart lands at or past g).
                return
            hist = self.hist
            while len(hist) > 1 and hist[1][0] <= msg.upto:
                hist.popleft()
            if hist[0][0] <= msg.upto:
                self.report(Covered(dict(hist[0][1])))
        elif isinstance(msg, ResendTo):
            self.resend(msg.channel, msg.start, msg.to)
        elif isinstance(msg, FoldDiffLog):
            self._fold(msg.channel, msg.g)
        elif isinstance(msg, TrimDiffLog):
            ch, upto, src = msg.channel, msg.upto, msg.src
            self.dlog[ch] = [e for e in self.dlog[ch] if _time_of(e[1], src) > upto]
        else:
            super().control(msg)

    def _fold(self, ch: int, g: Mapping[str, int]) -> None:
        """Spec T3 for a stateless parent: merge the prefix of the diff log whose every
        instance at levels 1..f sits at or below its g into one entry. T* merges all of
        them anyway (each is at or below any t_min that reads it), and none is replayed."""
        log = self.dlog[ch]
        n = 0
        while n < len(log) and _below(log[n][1], g, self.depth - 1):
            n += 1
        if n < 2:
            return
        base = TreeClock.from_plain(log[0][1])
        for _, diff in log[1:n]:
            base.apply_plain(diff)
        self.dlog[ch] = [(log[n - 1][0], base.to_plain()), *log[n:]]

    def _answer(self, q: Query) -> None:
        # ``via``: the senders from this instance's parent down to B (spec M3); [B] for a
        # child of B.
        ch = self.chan_of[q.via[0]]
        self.report(Answer(q.rid, q.about, q.via, ch, self.pos[ch], self.clock.copy(),
                           observations(self.dlog[ch], q.via)))

    def _plan(self, plan: Plan) -> None:
        self.moved = None
        if self.from_tstar and self.awaiting:
            self._start_from_tstar(plan.tstar, plan)
        if self.core.inputs and self.clocks:  # a source regenerates its events (R3)
            gaps = unobserved(plan.replay, self.time, plan.upto)
            if gaps:
                raise CausalIncomplete(f"{self.core.id}: B-times {gaps} after {self.time} "
                                       f"(children saw up to {plan.upto}) observed nowhere")
        self.awaiting = False
        for ch, start in plan.resume.items():
            self.resend(ch, start, plan.to.get(ch, 0))
        self.replay = deque(e for e in plan.replay if e[0] > self.time)
        self.tstar = plan.tstar
        self._pump()
        early, held = self.early, self.held
        self.early, self.held = {}, {}
        for ch, meta in early.items():
            self._resumed(ch, *meta)
            for m in held[ch]:
                if isinstance(m, Batch):
                    self.out += self.on_batch(BatchIn(self.me.id, ch, m), 0.0)
                else:
                    self.out += self.on_marker(MarkerIn(self.me.id, ch, m), 0.0)

    def _start_from_tstar(self, tstar: TreeClock, plan: Plan) -> None:
        """Spec R3: a stateless replacement starts with clock T* and time t_min. Every
        event sent one batch on every output (N5), so its channel positions are t_min. A
        quiet one's are not known: it takes each child's position where its resume
        starts (``_renumber``). With event time its watermarks come with its parents'
        RESUMEs."""
        self.clock = tstar.copy()
        self.time = tstar.time
        self.clock.time = self.time
        for parent, ch in self.chan_of.items():
            self.ptime[ch] = self.got[ch] = _time_of(tstar.to_plain(), parent)
            self.pos[ch] = -1
        for ch in self.core.out_channels:
            self.core.number_from(ch, self.time)
            if self.quiet and ch in plan.resume:
                if plan.resume[ch] - 1 > self.time:
                    self.renumber[ch] = (plan.resume[ch] - 1, plan.pos.get(ch, 0))
                else:
                    self.core.number_from(ch, plan.pos.get(ch, 0))
        self.hist = deque([(self.time, dict(self.ptime))])
        if self.core.needs_wm:
            self.wm_unknown = set(self.core.inputs)


def _below(node: Plain, g: Mapping[str, int], levels: int) -> bool:
    """Every instance at levels 1..``levels`` below ``node`` is at or below its g."""
    if levels <= 0:
        return True
    return all(kid[1] <= g.get(kid[0], 0) and _below(kid, g, levels - 1) for kid in node[2])


def _time_of(diff: Plain, src: str) -> int:
    node = plain_child(diff, src)
    return node[1] if node is not None else 0
