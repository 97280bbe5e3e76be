"""An instance of ``progressive`` (paper 004, §4; spec R1-R6, R8, R15-R18, R20-R21).

Every message on a channel, batch or marker, takes the next number of that channel
(``core.out_seq``), so one rule de-duplicates everything: a receiver accepts exactly
``pos + 1`` (``Positions``) of its own generation. Batches carry ``meta = gen``, markers
``meta = (gen, seq)``.

- Sources inject punctuation ``P_k`` every ``interval`` seconds (in progressive mode only
  at a mini-batch boundary) and keep everything they send in the source buffer until the
  coordinator's ``Trim``.
- A non-source aligns ``P_k`` (a channel that delivered it is held), then forwards it and
  keeps a snapshot in memory (for a live rollback) and in storage (for a replacement).
- Sinks make records visible at once, filtered by counts per record identity (the record
  under ``multiset``, the key under the per-key modes; ``protocols.shared.logged``):
  ``seen`` (part of the snapshot) against ``emitted`` (stored with each output, ref
  ``SINK_COUNTS``). Only a replay in progressive mode keeps the original order; a
  blocking rollback brings a join's or a merge's records in another order, so counting
  per key under ``multiset`` would take one record for another (spec causal.md E4).
- In recovery (after ``Recover`` or as a replacement, ``Init``) every non-sink keeps a
  recovery buffer per output channel and serves ``Resend`` from it; in progressive mode
  sources close a mini-batch every ``mini_batch`` wire batches and the others process
  whole mini-batches in a fixed order (``Aligner``), so a replayed partition sends what
  its predecessor sent, number for number. ``Normal`` ends all that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

from ftctl.runtime.messages import Batch, Marker
from protocols.contract.actions import (
    SNAPSHOTTING,
    Chain,
    DeclarePhase,
    Emit,
    InstanceAction,
    Persist,
    Report,
    Send,
    SetTimer,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    MarkerIn,
    SourceReady,
    Started,
    TimerFired,
)
from protocols.contract.logic import EOS, InstanceLogic
from protocols.contract.messages import InputEnded
from protocols.contract.names import InstanceId, SnapshotRef
from protocols.progressive.buffers import RecoveryBuffer, SourceBuffer
from protocols.progressive.burst import Mode
from protocols.progressive.messages import (
    FINAL,
    MINI_BATCH,
    PUNCTUATION,
    SINK_COUNTS,
    SINK_DELTAS,
    Checkpointed,
    Finished,
    Init,
    Normal,
    Ready,
    Recover,
    Resend,
    Trim,
)
from protocols.progressive.minibatch import Aligner, Cutter, Positions
from protocols.progressive.params import ProgressiveParams
from protocols.shared.logged import closed_gap, identities, record_identity
from protocols.shared.packed_counts import (
    CountsChain,
    PackedCounts,
    fold_deltas,
    with_deltas,
)

Message = Batch | Marker


class MissingSnapshot(LookupError):
    """A live rollback asked for a snapshot the instance does not keep."""


RESUME = "progressive-resume"  # timer of a source rolled back after it ran dry
RESUME_STEPS = 16  # its batches per punctuation interval


class ProgressiveInstance(InstanceLogic[ProgressiveParams]):
    def __init__(self, me: Any, cores: Any, params: ProgressiveParams):
        super().__init__(me, cores, params)
        core = self.core
        self.gen = 0
        self.mode = Mode.NORMAL
        self.pos = self.positions(core.inputs, None)
        self.snapshots: dict[int, dict[str, Any]] = {}  # k -> state, for live rollback
        self.next_punct = 1
        self.next_at: float | None = None
        self.trimmed = 0
        self.source_buf: SourceBuffer[tuple[int, Message]] = SourceBuffer()
        self.recovery: RecoveryBuffer[Message] = RecoveryBuffer()
        self.cutter = Cutter(params.mini_batch)
        self.aligner: Aligner[Batch] | None = None  # progressive mode: order preservation
        self.ended_pending: set[int] = set()  # eos seen, held batches still to process
        self.aligning: int | None = None
        self.waiting: set[int] = set()
        # Progressive mode: the mini-batch P_k followed on its inputs; P_k is taken right
        # after that mini-batch is released, never on arrival (see ``due``).
        self.after_mb = 0
        self.blocked: dict[int, list[Message]] = {}
        # Progressive mode blocks no channel, so a fast input can bring P_{k+1} while
        # this instance still waits for P_k elsewhere: it waits here, per channel.
        # Each with the mini-batch it followed (see ``after_mb``).
        self.early: dict[int, list[tuple[Marker, int]]] = {}
        self.future: list[tuple[int, Message]] = []  # of a rollback not taken yet
        # One dict until the first rollback or restart: before it every record is new
        # to this execution and to the world alike, so both counts are the same
        # (``visible`` then counts a batch in C).
        self.emitted: dict[Any, int] = {}
        self.seen: dict[Any, int] = self.emitted
        # Apart, how many records ``seen`` lacks to equal ``emitted`` (None: not summed
        # since they were set; -1: not counted, see ``rejoin``).
        self.behind: int | None = None
        self.deltas = CountsChain(len(SINK_DELTAS))
        self.packed = PackedCounts()  # ``emitted`` as the base stores it
        self.packed_seen = PackedCounts()  # ``seen`` as the snapshots store it
        self.identity = record_identity(core.sink_mode)
        self.done = False
        self.initial = self.state_of_fresh_core()

    # ------------------------------------------------------------ state

    def state(self) -> dict[str, Any]:
        return {"core": self.core.snapshot_state(), "pos": self.processed(),
                "seen": self.seen_parts(), "punct": self.next_punct}

    def seen_parts(self) -> list[bytes]:
        """``seen`` as a snapshot stores it. While it is ``emitted`` (one dict) the parts
        the sink's base encodes serve both, as after ``rejoin``: encoding each identity
        for both was a sixth of a Nexmark q0 schedule."""
        if self.seen is self.emitted:
            parts = self.packed.pack(self.emitted)
            self.packed_seen = self.packed.copy()
            return parts
        return self.packed_seen.pack(self.seen)

    def processed(self) -> dict[int, int]:
        """Per input channel the last message reflected in the state: batches held for a
        later mini-batch are not, so a restore asks for them again."""
        pos = dict(self.pos.pos)
        if self.aligner is not None:
            for per in self.aligner.held.values():
                for ch, batches in per.items():
                    if batches:
                        pos[ch] = min(pos[ch], min(b.seq for b in batches) - 1)
        return pos

    def restore(self, k: int, blob: dict[str, Any] | None) -> None:
        """Back to the state at ``P_k`` (None: the initial state, k = 0)."""
        core = self.core
        if blob is None:
            blob = self.initial
        core.restore_state(blob["core"])
        self.pos = self.positions(core.inputs, blob["pos"])
        # The snapshot's parts hold ``seen`` until a count in it rises.
        self.seen = self.packed_seen.unpack(blob["seen"])
        self.behind = None
        self.next_punct = k + 1
        self.snapshots = {j: s for j, s in self.snapshots.items() if j <= k}
        self.aligning, self.waiting, self.blocked, self.early = None, set(), {}, {}
        self.after_mb = 0
        self.ended_pending = set()
        self.done = False

    def kept(self, k: int) -> dict[str, Any] | None:
        """The state at ``P_k`` kept for a live rollback (None: the initial state, k = 0).

        The coordinator rolls back only to a complete checkpoint, which every instance
        persisted and keeps; one this instance does not hold is a broken invariant, and
        restoring the initial state instead would quietly recount everything."""
        if not k:
            return None
        try:
            return self.snapshots[k]
        except KeyError:
            raise MissingSnapshot(
                f"progressive: {self.me.id} is asked to roll back to P_{k} but keeps "
                f"only {sorted(self.snapshots) or 'none'}") from None

    def enter(self, gen: int, mode: Mode, k: int) -> list[InstanceAction]:
        """Take generation ``gen`` in a recovery ``mode`` from ``P_k``."""
        self.gen, self.mode = gen, mode
        self.cutter = Cutter(self.params.mini_batch)
        self.aligner = Aligner(tuple(self.core.inputs)) if mode is Mode.PROGRESSIVE else None
        if self.core.is_source:
            self.source_buf.rewind(k)
        elif not self.core.is_sink:
            self.buffer_on()
        held, self.future = self.future, []
        acts: list[InstanceAction] = []
        for ch, m in held:
            acts += self.receive(ch, m)
        return acts

    # ------------------------------------------------------------ start and controls

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        if isinstance(ev.init, Init) and ev.init.mode != Mode.NORMAL:
            self.restore(ev.init.k, ev.restored)
            if ev.restored is not None:  # kept for a live rollback to the same k
                self.snapshots[ev.init.k] = ev.restored
            self.emitted, self.packed = self.restore_counts(ev.extra)
            self.behind = None
            # A base before this incarnation's deltas overwrite the last one's; the Ready
            # report makes it durable before anything else happens.
            base = [self.sink_base()] if self.core.is_sink else []
            acts = self.enter(ev.init.gen, Mode(ev.init.mode), ev.init.k)
            resume = tuple(sorted(self.pos.resume().items()))
            return [*base, Report(Ready(resume)), *acts]
        return []

    def restore_counts(self, extra: Mapping[SnapshotRef, Any]
                       ) -> tuple[dict[Any, int], PackedCounts]:
        """A sink's visible counts: the base and every delta present; and the base's
        parts where they still hold them (``with_deltas``)."""
        packed = PackedCounts()
        return with_deltas(extra.get(SINK_COUNTS), (extra.get(ref) for ref in SINK_DELTAS),
                           packed), packed

    def sink_base(self) -> Persist:
        # What the last output touched, not yet in a delta: its parts join the base's.
        self.deltas.take(self.emitted, self.packed)
        self.deltas.restart()
        return Persist(self.me.id, SINK_COUNTS, self.packed.pack(self.emitted))

    def sink_delta(self) -> Persist:
        """The counts this output changed, as the next delta of the chain (or a new base
        once the chain is at its longest)."""
        delta = self.deltas.next(self.emitted, self.packed)
        if delta is None:
            return self.sink_base()
        j, counts = delta
        return Persist(self.me.id, SINK_DELTAS[j], counts,
                       Chain("visible", fold_deltas))

    def state_of_fresh_core(self) -> dict[str, Any]:
        return {"core": self.core.snapshot_state(), "pos": {}, "seen": [], "punct": 1}

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        msg = ev.msg
        if isinstance(msg, Recover):
            ran_dry = self.done
            self.restore(msg.to, self.kept(msg.to))
            acts: list[InstanceAction] = []
            if self.core.is_source:
                self.next_at = None
                if ran_dry:  # the host no longer offers this source a step: pace itself
                    acts.append(SetTimer(RESUME, 0.0))
            return acts + self.enter(msg.gen, Mode(msg.mode), msg.to)
        if isinstance(msg, Resend):
            return self.resend(msg.channel, msg.start)
        if isinstance(msg, Trim):
            self.trim(msg.upto)
            return []
        if isinstance(msg, Normal):
            return self.normal(msg.at)
        if isinstance(msg, InputEnded):
            return self.on_eos(msg.channel)
        return []

    def on_timer(self, ev: TimerFired, now: float) -> list[InstanceAction]:
        """A source rolled back after it ran dry produces on its own timer."""
        if ev.key != RESUME or not self.core.is_source or self.done:
            return []
        acts = self.on_source(SourceReady(self.me.id, now), now)
        if not self.done:
            acts.append(SetTimer(RESUME, self.params.interval / RESUME_STEPS))
        return acts

    def resend(self, ch: int, start: int) -> list[InstanceAction]:
        if self.core.is_source:
            msgs = [m for c, m in self.source_buf.items if c == ch and seq_of(m) >= start]
        else:
            msgs = self.recovery.since(ch, start)
        return [Send(ch, m) for m in msgs]

    def trim(self, k: int) -> None:
        self.source_buf.trim(k)
        self.trimmed = max(self.trimmed, k)
        self.snapshots = {j: s for j, s in self.snapshots.items() if j >= k}

    def normal(self, m: int) -> list[InstanceAction]:
        """R20: buffers off, sources trim to ``P_m``, held mini-batches processed."""
        self.mode = Mode.NORMAL
        self.recovery.stop()
        if self.core.is_source:
            self.trim(m)
        acts: list[InstanceAction] = []
        if self.aligner is not None:
            al, self.aligner = self.aligner, None
            for b in sorted(al.held):
                for ch, batch in _round_robin(al.held[b]):
                    acts += self.process(ch, batch)
            for ch in sorted(self.ended_pending):
                acts += self.end(ch)
            if self.due():  # its mini-batch is processed now with the rest
                acts += self.aligned()
        return acts

    # ------------------------------------------------------------ sending

    def stamp(self, acts: list[InstanceAction]) -> list[InstanceAction]:
        """Stamp the generation on the core's sends and keep them where R4/R18 want."""
        for a in acts:
            if type(a) is Send and type(a.msg) is Batch:
                a.msg.meta = self.gen
                self.keep(a.channel, a.msg)
        return acts

    def keep(self, ch: int, m: Message) -> None:
        if self.core.is_source:
            self.source_buf.append((ch, m))
        else:
            self.recovery.append(ch, seq_of(m), m, batch=True)

    def marker(self, kind: str, ident: int) -> list[InstanceAction]:
        """A marker on every output channel, numbered like a batch."""
        acts: list[InstanceAction] = []
        for ch in self.core.out_channels:
            m = Marker(kind, ident, meta=(self.gen, self.core.next_seq(ch), self.trimmed))
            self.keep(ch, m)
            acts.append(Send(ch, m))
        return acts

    # ------------------------------------------------------------ sources

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        if self.done:
            return []
        acts: list[InstanceAction] = []
        if self.next_at is None:
            self.next_at = now + self.params.interval
        elif now >= self.next_at and self.mode is not Mode.PROGRESSIVE:
            acts += self.punctuate(now)
        more = self.core.source_next()
        acts += self.stamp(self.output(self.me.id))
        if self.mode is Mode.PROGRESSIVE and (b := self.cutter.after_batch()) is not None:
            acts += self.marker(MINI_BATCH, b)
            # R1: in progressive mode only right after mb(b), and at mini-batches fixed
            # from the anchor, not by time: markers are numbered like batches, so a
            # replaying source must put P_k exactly where its predecessor did.
            if b % self.params.punct_every == 0:
                acts += self.punctuate(now)
        if not more:
            acts += self.finish(ev.slot)
        return acts

    def punctuate(self, now: float) -> list[InstanceAction]:
        k = self.next_punct
        self.next_punct += 1
        self.next_at = now + self.params.interval
        self.source_buf.mark(k)
        acts = self.marker(PUNCTUATION, k)
        return acts + self.snapshot(k)

    def snapshot(self, k: int) -> list[InstanceAction]:
        st = self.state()
        if k != FINAL:
            self.snapshots[k] = st
        # Open until the coordinator has the Checkpointed report (it closes it).
        return [Persist(self.me.id, k, st), Report(Checkpointed(k, self.gen)),
                DeclarePhase(SNAPSHOTTING, True, k)]

    def finish(self, slot: Any) -> list[InstanceAction]:
        """Every input ended (or the source ran dry): eos on, the final snapshot."""
        self.done = True
        return [*self.marker(EOS, 0), *self.snapshot(FINAL), Report(Finished(self.gen))]

    # ------------------------------------------------------------ receiving

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        return self.receive(ev.channel, ev.batch)

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        return self.receive(ev.channel, ev.marker)

    def receive(self, ch: int, m: Message) -> list[InstanceAction]:
        gen, seq = gen_seq(m)
        if self.stale(gen):
            return []  # sent before a rollback this instance took
        if gen > self.gen:
            self.future.append((ch, m))
            return []
        if ch in self.blocked:
            self.blocked[ch].append(m)
            return []
        if not self.pos.accept(ch, seq):
            return []  # a duplicate, or a gap a resend fills
        if isinstance(m, Batch):
            return self.hold(ch, m) if self.aligner is not None else self.process(ch, m)
        if m.kind == MINI_BATCH and self.aligner is not None:
            self.aligner.close(ch, m.id)
            return self.release()
        if m.kind == PUNCTUATION:
            return self.align(ch, m)
        if m.kind == EOS:
            return self.on_eos(ch)
        return []

    # ------------------------------------------------------------ one decision each

    def positions(self, channels: list[int], pos: dict[int, int] | None) -> Positions:
        return Positions(channels, pos)

    def buffer_on(self) -> None:
        """Adaptive buffering (§4): a recovery buffer per output channel from now on."""
        self.recovery.start(self.core.out_channels)

    def stale(self, gen: int) -> bool:
        """Sent by an incarnation older than this instance's last rollback."""
        return gen < self.gen

    def hold(self, ch: int, batch: Batch) -> list[InstanceAction]:
        """Progressive mode: the batch waits for its mini-batch (R16)."""
        assert self.aligner is not None
        self.aligner.add(ch, batch)
        return []

    def visible(self, records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """R5: each record is one more of its identity in this execution; those new to
        the world. In one loop, not a call per record: on Nexmark q0 (a million records
        into one sink) the calls were a third of a schedule."""
        seen, emitted = self.seen, self.emitted
        if seen is emitted:
            return self.all_visible(records)
        counted, made = len(seen), len(emitted)
        if self.behind is None:
            self.behind = sum(emitted.values()) - sum(seen.values())
        out, shown = [], []
        for r, i in zip(records, identities(self.identity, records), strict=True):
            n = seen.get(i, 0) + 1
            seen[i] = n
            if n > emitted.get(i, 0):
                emitted[i] = n
                shown.append(i)
                out.append(r)
        # A count rose rather than began: the encoded parts may hold the old one.
        if len(seen) - counted != len(records):
            self.packed_seen.stale()
        # Each shown identity new to the world (so its count is 1), unless one rose.
        fresh = len(emitted) - made == len(shown)
        if not fresh:
            self.packed.stale()
        self.deltas.touch(shown, fresh)
        self.rejoin(len(records) - len(out))
        return out

    def rejoin(self, suppressed: int) -> None:
        """``suppressed`` records of the last batch were not shown (``closed_gap``; a
        restore takes ``seen`` from a snapshot older than the visible counts). Once
        equal the two are one dict again, so the records after a rollback's replay are
        counted in bulk."""
        self.behind, equal = closed_gap(self.behind, suppressed, self.seen, self.emitted)
        if equal:
            self.seen = self.emitted
            self.packed_seen = self.packed.copy()

    def all_visible(self, records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """``visible`` while ``seen`` is ``emitted``: every record is one more than is
        visible, so all are shown. Counted by ``Counter.update`` on the plain dict (in C,
        each identity hashed once): the loop was most of a Nexmark q0 schedule."""
        counts = self.emitted
        made = len(counts)
        idents = identities(self.identity, records)
        Counter.update(cast("Counter[Any]", counts), idents)
        fresh = len(counts) - made == len(idents)
        if not fresh:  # a count rose rather than began
            self.packed.stale()
            self.packed_seen.stale()
        self.deltas.touch(idents, fresh)
        return records

    def process(self, ch: int, batch: Batch) -> list[InstanceAction]:
        self.core.deliver(ch, batch)
        return self.stamp(self.output(self.me.id))

    def release(self) -> list[InstanceAction]:
        """Mini-batches complete on every input: processed in the fixed order (R16), then
        ``mb(b)`` forwarded, then a punctuation that followed ``mb(b)`` (R2)."""
        assert self.aligner is not None
        acts: list[InstanceAction] = []
        al = self.aligner
        while not self.done and (ready := al.pop()) is not None:
            b, batches = ready
            for ch, batch in batches:
                acts += self.process(ch, batch)
            acts += self.marker(MINI_BATCH, b)
            acts += self.end_drained(b)
            if self.due():
                acts += self.aligned()
        live = any(ch not in al.ended for ch in al.channels)
        return acts + self.end_drained(al.done if live else None)

    def end_drained(self, released: int | None) -> list[InstanceAction]:
        """Ended inputs whose last mini-batch is out (by ``released``; None: all of
        them), their end in channel order.

        An input's end takes effect right after the mini-batch its last batches belong to
        (the one after the last ``mb`` it sent), or once every input ended, so where it
        falls among the mini-batches does not depend on when the end arrived."""
        assert self.aligner is not None
        closed = self.aligner.closed
        return [a for ch in sorted(self.ended_pending)
                if released is None or closed[ch] < released for a in self.end(ch)]

    def on_output(self, slot: InstanceId, records: list[tuple[Any, Any]]
                  ) -> list[InstanceAction]:
        """R5: a record is visible only if this execution produced more of its identity
        than were ever made visible; the counts are stored with the output, in one step."""
        out = self.visible(records)
        if not out:
            return []
        # the counts first: the Emit waits until they are durable (lose-unsynced)
        return [self.sink_delta(), Emit(self.me.id, out)]

    # ------------------------------------------------------------ punctuations (R2)

    def align(self, ch: int, m: Marker) -> list[InstanceAction]:
        after = self.aligner.closed[ch] if self.aligner is not None else 0
        if (self.aligning is not None and m.id != self.aligning) or self.early.get(ch):
            # a later P on a channel already done
            self.early.setdefault(ch, []).append((m, after))
            return []
        return self.join(ch, m, after)

    def join(self, ch: int, m: Marker, after: int) -> list[InstanceAction]:
        """``m`` (P_k) counts for the alignment of k on ``ch``, where it followed
        mini-batch ``after`` (progressive mode)."""
        if self.aligning is None:
            self.aligning = m.id
            self.waiting = set(self.core.inputs) - self.core.finished
            self.after_mb = 0
            trimmed = m.meta[2] if isinstance(m.meta, tuple) and len(m.meta) > 2 else 0
            self.snapshots = {j: s for j, s in self.snapshots.items() if j >= trimmed}
        self.waiting.discard(ch)
        if self.aligner is None:
            self.blocked[ch] = []
        else:
            self.after_mb = max(self.after_mb, after)
        # In progressive mode nothing is blocked: P_k follows mb(b) on every channel, so
        # the aligner cannot release mini-batch b+1 before P_k arrived everywhere.
        return self.aligned() if self.due() else []

    def due(self) -> bool:
        """P_k arrived on every input that has not ended and, in progressive mode, the
        mini-batch it followed is released. Where P_k goes among the mini-batches an
        instance forwards is then fixed by the mini-batches, not by when an input ended:
        an input that ends before bringing P_k completes the alignment at its end, which
        may come before or after the rest of mini-batch b arrived, and a replay must put
        P_k where its predecessor did, number for number (R18)."""
        if self.aligning is None or self.waiting:
            return False
        return self.aligner is None or self.aligner.done >= self.after_mb

    def aligned(self) -> list[InstanceAction]:
        k = self.aligning
        assert k is not None
        self.aligning = None
        self.next_punct = k + 1
        acts = self.marker(PUNCTUATION, k)  # numbered before the snapshot: see the doc
        acts += self.snapshot(k)
        held = [(c, x) for c, xs in sorted(self.blocked.items()) for x in xs]
        self.blocked = {}
        for c, x in held:
            acts += self.receive(c, x)
        # The next punctuation each early channel brought starts the next alignment.
        early = {c: ms.pop(0) for c, ms in sorted(self.early.items()) if ms}
        self.early = {c: ms for c, ms in self.early.items() if ms}
        for c, (x, after) in early.items():
            acts += self.join(c, x, after)
        return acts

    def on_eos(self, ch: int) -> list[InstanceAction]:
        if ch in self.core.finished:
            return []
        if self.aligner is not None:
            acts: list[InstanceAction] = []
            if self.aligning is not None and ch in self.waiting:
                # An ended channel brings no P_k. If the mini-batch P_k followed is out,
                # the snapshot comes before anything the end releases (its held batches
                # belong to later mini-batches); if not, ``release`` takes it after it.
                self.waiting.discard(ch)
                if self.due():
                    acts += self.aligned()
            self.aligner.end(ch)
            self.ended_pending.add(ch)
            return acts + self.release()
        return self.end(ch)

    def end(self, ch: int) -> list[InstanceAction]:
        self.ended_pending.discard(ch)
        if ch in self.core.finished:
            return []
        all_ended = self.core.end_of_stream(ch)
        acts = self.stamp(self.output(self.me.id))
        if self.aligning is not None:
            self.waiting.discard(ch)
            if self.due():
                acts += self.aligned()
        if all_ended:
            acts += self.finish(self.me.id)
        return acts


def gen_seq(m: Message) -> tuple[int, int]:
    if type(m) is Batch:
        return int(m.meta or 0), m.seq
    meta = m.meta if isinstance(m.meta, tuple) else (0, 0)
    return int(meta[0]), int(meta[1])


def seq_of(m: Message) -> int:
    return gen_seq(m)[1]


def _round_robin(per_channel: dict[int, list[Batch]]) -> list[tuple[int, Batch]]:
    from protocols.progressive.minibatch import round_robin

    return round_robin(per_channel)
