"""``FalkirkInstance``: epochs, frontiers and persistence per policy (spec N1-N6, R2-R10).

Every batch carries ``meta = (epoch, j)``, j its position among that epoch's batches on
the channel; ``Marker("close", t, meta=wm)`` ends epoch t on a channel, with the epoch's
event-time watermark (N4: only these move a window's watermark). An instance completes t
once every input closed t: it persists what its policy asks (state ``2t+3``, output log
segment ``2t+4``), reports it (after the Persist, so the report means durable), then
closes t downstream. Stateless instances process batches as they come (epochs
interleave, §3.3); stateful ones process only their current epoch and buffer later ones
(spec D3). Sinks stage each completed epoch and report it for commit.

Recovery: ``Pause`` freezes the instance (inputs buffered, nothing sent) and reports the
exact metadata at TOP; a restart or ``RollBackTo`` resets it to a frontier and holds it;
``Rewind`` voids what a live receiver holds beyond a rolled-back sender's frontier;
``Replay`` resends a channel's logged (or regenerated) epochs and closes; ``Resume``
lets everything run. Receivers drop batches of closed epochs and, by position, batches
they already have (R10).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

from ftctl.runtime.actions import Send as CoreSend
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from ftctl.runtime.operators import WATERMARK_MAX
from protocols.contract.actions import (
    SNAPSHOTTING,
    DeclarePhase,
    InstanceAction,
    Persist,
    Report,
    Send,
    StageOutput,
)
from protocols.contract.events import (
    BatchIn,
    ControlIn,
    MarkerIn,
    RollBackTo,
    SourceReady,
    Started,
)
from protocols.contract.logic import InstanceLogic
from protocols.contract.messages import Ended
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView
from protocols.falkirk.messages import (
    Available,
    Committed,
    Pause,
    Paused,
    Ready,
    Replay,
    Resume,
    Rewind,
    Setup,
    TrimLog,
    checkpoint_ref,
    segment_ref,
)
from protocols.falkirk.params import FalkirkParams
from protocols.falkirk.policy import SINK, SOURCE, Policy

CLOSE = "close"
WM_CHANNEL = -1  # a log entry on no channel: the watermark the logger closed an epoch with
Logged = list[tuple[int, list[Any], Any]]  # (channel, records, watermark) in send order


class FalkirkInstance(InstanceLogic[FalkirkParams]):
    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: FalkirkParams, policy: Policy | None = None):
        super().__init__(me, cores, params)
        if policy is None:
            stateful = bool(getattr(self.core.op, "stateful", False))
            kind = "source" if me.is_source else "sink" if me.is_sink else ""
            policy = params.policy_of(me.operator, stateful, kind)
        self.policy = policy
        self.empty_state = self.core.snapshot_state()
        self.setup = Setup(0, -1, 0, 1, False)
        self._reset(-1)
        self.paused = False
        self.held = False
        self.round = 0

    # ------------------------------------------------------------ state

    def _reset(self, k: int) -> None:
        """Forget everything outside the frontier ``↓k``."""
        self.frontier = k
        self.completed = k
        self.cur = k + 1  # the epoch a stateful instance processes
        self.closed = dict.fromkeys(self.me.inputs, k)
        self.received: dict[tuple[int, int], int] = {}
        # M̄ and D̄ at TOP cover the kept history too: everything inside ↓k
        self.consumed = dict.fromkeys(self.me.inputs, k)
        self.sent = dict.fromkeys(self.me.out_channels, k)
        self.out_pos: dict[tuple[int, int], int] = {}
        self.later: list[tuple[int, Batch]] = []  # stateful: batches of epochs > cur
        self.pending: list[tuple[str, int, Any]] = []  # while paused or held
        self.log: dict[int, Logged] = {}
        # sinks: epoch -> (channel, records) per batch, to stage at its completion
        self.chunks: dict[int, list[tuple[int | None, list[Any]]]] = {}
        self.close_wm: dict[tuple[int, int], Any] = {}  # (channel, t) -> close(t).wm (N4)
        self.sent_wm: dict[int, Any] = {}  # t -> the watermark this instance closed t with
        self.next_batch = (k + 1) * self.setup.epoch_every  # sources

    @property
    def fin(self) -> int:
        return self.setup.last_epoch + 1

    @property
    def stopped(self) -> bool:
        return self.paused or self.held

    def _restore(self, blob: Any, k: int, extra: Mapping[int, Any]) -> list[InstanceAction]:
        self.core.restore_state(blob if blob is not None else self.empty_state)
        self._reset(k)
        for ref, seg in sorted(extra.items()):
            if seg is not None:
                self.log[(ref - 4) // 2] = [(ch, list(recs), wm) for ch, recs, wm in seg]
        if self.me.is_source:
            lo = self.core.lo
            self.core.seek(min(self.core.hi, lo + self.next_batch * self.core.batch_size))
        if self.me.is_sink:
            self.completed = max(k, self.setup.committed)
        return []

    # ------------------------------------------------------------ lifecycle

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        if isinstance(ev.init, Setup):
            self.setup = ev.init
            self.round = ev.init.round
        self._restore(ev.restored, self.setup.frontier, ev.extra)
        self.held = self.setup.hold
        return [Report(Ready(self.round))] if self.held else []

    def on_rollback(self, ev: RollBackTo, now: float) -> list[InstanceAction]:
        kept = {t: seg for t, seg in self.log.items() if t <= ev.to}  # still valid (R9)
        self._restore(ev.restored, ev.to, {})
        self.log = kept
        self.held, self.paused = True, False
        return [Report(Ready(self.round))]

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        msg = ev.msg
        if isinstance(msg, Pause):
            self.paused, self.round = True, msg.round
            return [Report(Paused(msg.round, self.completed, dict(self.consumed),
                                  dict(self.closed), dict(self.sent)))]
        if isinstance(msg, Rewind):
            return self._rewind(msg)
        if isinstance(msg, Replay):
            return self._replay(msg)
        if isinstance(msg, Resume):
            self.paused = self.held = False
            pending, self.pending = self.pending, []
            acts: list[InstanceAction] = []
            for kind, ch, obj in pending:
                acts += self._batch(ch, obj) if kind == "b" else self._close(ch, obj)
            return acts
        if isinstance(msg, TrimLog):
            for t in [t for t in self.log if t <= msg.upto]:
                self.log[t] = [x for x in self.log[t] if x[0] != msg.channel]
            return []
        return []

    def _rewind(self, msg: Rewind) -> list[InstanceAction]:
        for ch, k in msg.upto.items():
            self.closed[ch] = min(self.closed[ch], k)
            self.consumed[ch] = min(self.consumed[ch], k)  # M̄ at TOP: what it still holds
            self.pending = [p for p in self.pending
                            if p[1] != ch or self._epoch(p) <= k]
            self.later = [(c, b) for c, b in self.later if c != ch or b.meta[0] <= k]
            for key in [key for key in self.received if key[0] == ch and key[1] > k]:
                del self.received[key]
            if self.me.is_sink:
                self._drop_chunks(ch, k)
        self.round, self.held = msg.round, True  # nothing moves until Resume (R8)
        return [Report(Ready(msg.round))]

    def _drop_chunks(self, ch: int, k: int) -> None:
        """A sink's staged-to-be records of channel ``ch`` beyond ``k`` are void."""
        for t in [t for t in self.chunks if t > k]:
            self.chunks[t] = [r for r in self.chunks[t] if r[0] != ch]

    @staticmethod
    def _epoch(p: tuple[str, int, Any]) -> int:
        kind, _, obj = p
        return int(obj.meta[0]) if kind == "b" else int(obj)

    # ------------------------------------------------------------ input

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        if self.stopped:
            self.pending.append(("b", ev.channel, ev.batch))
            return []
        return self._batch(ev.channel, ev.batch)

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        if ev.marker.kind != CLOSE:
            return []
        if self.stopped:
            self.pending.append(("c", ev.channel, ev.marker.id))
            self.close_wm[(ev.channel, ev.marker.id)] = ev.marker.meta
            return []
        self.close_wm[(ev.channel, ev.marker.id)] = ev.marker.meta
        return self._close(ev.channel, ev.marker.id)

    def _batch(self, ch: int, batch: Batch) -> list[InstanceAction]:
        t, j = batch.meta
        if self._duplicate(ch, t, j):
            return []
        self.received[(ch, t)] = j + 1
        if self._waits(t):
            self.later.append((ch, batch))
            return []
        return self._process(ch, batch, t)

    def _duplicate(self, ch: int, t: int, j: int) -> bool:
        """R10: an epoch already closed on ``ch``, or a position already received."""
        return t <= self.closed[ch] or j < self.received.get((ch, t), 0)

    def _waits(self, t: int) -> bool:
        """N3: a stateful instance processes its current epoch only."""
        return self.policy.stateful and t > self.cur

    def _segment(self, t: int) -> list[list[Any]]:
        """The output log segment of epoch ``t``, as persisted."""
        return [[ch, recs, wm] for ch, recs, wm in self.log.get(t, [])]

    def _process(self, ch: int, batch: Batch, t: int) -> list[InstanceAction]:
        self.consumed[ch] = max(self.consumed[ch], t)
        # N4: a batch's watermark says how far its sender had got when it sent it, which
        # depends on arrival order; only close(t).wm moves watermarks, at completion of t.
        self.core.deliver(ch, Batch(batch.records, batch.seq, None, batch.meta)
                          if batch.watermark is not None else batch)
        out = self.core.take_output()
        if self.me.is_sink and out.records:  # staged with epoch t once it completes
            self.chunks.setdefault(t, []).append((ch, out.records))
        return self._sends(out.sends, t)

    def _sends(self, sends: list[CoreSend], t: int) -> list[InstanceAction]:
        """The core's batches, renumbered within epoch ``t`` (empty ones dropped)."""
        acts: list[InstanceAction] = []
        for a in sends:
            if isinstance(a.msg, Batch) and a.msg.records:
                acts.append(self._send(a.channel, a.msg.records, a.msg.watermark, t))
        return acts

    def _send(self, ch: int, records: list[Any], wm: Any, t: int,
              log: bool = True) -> Send:
        j = self.out_pos.get((ch, t), 0)
        self.out_pos[(ch, t)] = j + 1
        self.sent[ch] = max(self.sent[ch], t)
        if log and self.policy.logs and not self.me.is_source:
            self.log.setdefault(t, []).append((ch, records, wm))
        return Send(ch, Batch(records, seq=j + 1, watermark=wm, meta=(t, j)))

    def _close(self, ch: int, t: int) -> list[InstanceAction]:
        if t <= self.closed[ch]:
            return []
        self.closed[ch] = t
        acts: list[InstanceAction] = []
        while self.cur <= self.fin and all(c >= self.cur for c in self.closed.values()):
            acts += self._complete(self.cur)
            self.cur += 1
            if self.policy.stateful:
                now, self.later = ([x for x in self.later if x[1].meta[0] == self.cur],
                                   [x for x in self.later if x[1].meta[0] != self.cur])
                for c, b in now:
                    acts += self._process(c, b, self.cur)
        return acts

    def _complete(self, t: int) -> list[InstanceAction]:
        """N5: persist, report, then close t downstream (a sink: stage and report)."""
        acts: list[InstanceAction] = []
        wm = self._epoch_watermark(t)
        if t < self.fin and self.core.needs_wm and not self.me.is_sink:
            self.core.advance_watermark(wm)
            acts += self._sends(self.core.take_output().sends, t)
        if t == self.fin:
            for ch in self.me.inputs:
                if ch not in self.core.finished:
                    self.core.end_of_stream(ch)
            out = self.core.take_output()
            if not self.me.is_sink:
                acts += self._sends(out.sends, t)
            elif out.records:
                self.chunks.setdefault(t, []).append((None, out.records))
        self.completed = t
        if self.me.is_sink:
            if t > self.setup.committed:
                recs = list(chain.from_iterable(part for _, part in self.chunks.pop(t, [])))
                acts += [StageOutput(self.me.id, t, recs), Report(Committed(t))]
            return acts + ([Report(Ended())] if t == self.fin else [])
        offset = self.setup.checkpoint_offset
        self.sent_wm[t] = wm
        if self.policy.logs:
            # first, so the segment still ends with the epoch's last batch
            self.log.setdefault(t, []).insert(0, (WM_CHANNEL, [], wm))  # replayed closes carry it
            acts.append(Persist(self.me.id, segment_ref(t), self._segment(t)))
        if self.policy.checkpoints(t, offset):
            # Open until the coordinator has its Available (it closes it): only then is
            # the checkpoint in F*; a crash before then loses it.
            acts += [DeclarePhase(SNAPSHOTTING, True, t),
                     Persist(self.me.id, checkpoint_ref(t), self.core.snapshot_state())]
        if self.policy.restorable(t, offset):
            kind = "checkpointed" if self.policy.stateful else (
                "logged" if self.policy.logs else "completed")
            acts.append(Report(Available(t, kind, self.policy.logs)))
        acts += [Send(ch, Marker(CLOSE, t, meta=wm)) for ch in self.me.out_channels]
        if t == self.fin:
            acts.append(Report(Ended()))
        return acts

    def _epoch_watermark(self, t: int) -> Any:
        """N4: close(t).wm of an inner instance is the minimum of its inputs' close(t).wm
        (unknown counts as no progress: a window then fires late, never early)."""
        wms = [self.close_wm.get((ch, t)) for ch in self.me.inputs]
        for key in [key for key in self.close_wm if key[1] <= t]:
            del self.close_wm[key]
        return min((-1 if w is None else w for w in wms), default=-1)

    def _source_watermark(self, u: int) -> Any:
        """N1: wm_u is the event time of the first record of epoch u+1 (max if none)."""
        core = self.core
        lo = core.lo + (u + 1) * self.setup.epoch_every * core.batch_size
        if not core.needs_wm or core.gen is None or lo >= core.hi:
            return WATERMARK_MAX
        return core.gen(lo, lo + 1)[0][2]

    # ------------------------------------------------------------ sources

    def more_to_produce(self, slot: InstanceId) -> bool:
        return self.completed < self.fin

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        if self.stopped or self.completed >= self.fin:
            return []
        every = self.setup.epoch_every
        t = self.next_batch // every
        acts: list[InstanceAction] = [
            self._send(ch, recs, wm, t) for ch, recs, wm in self._generate(self.next_batch)]
        self.next_batch += 1
        if self.next_batch % every == 0 or self.core.exhausted:
            last = self.fin if self.core.exhausted else t
            for u in range(self.completed + 1, last + 1):
                wm = self._source_watermark(u)
                acts += [Send(ch, Marker(CLOSE, u, meta=wm)) for ch in self.me.out_channels]
                if u == self.fin:
                    acts.append(Report(Ended()))
            self.completed = last
        return acts

    def _generate(self, j: int) -> list[tuple[int, list[Any], Any]]:
        """Batch j of this source, split onto channels as its first emission did (N1):
        round-robin picks channel ``j mod m``, so a regeneration lands where it did."""
        core = self.core
        lo = core.lo + j * core.batch_size
        hi = min(lo + core.batch_size, core.hi)
        if lo >= hi or core.gen is None:
            return []
        core.seek(max(core.offset, hi))
        recs = core.source_records(lo, hi)
        wm = recs[-1][2] if core.needs_wm and recs else None
        out = []
        for group in core.spec.outputs:
            chans = group.channels
            if len(chans) == 1 or group.partition == "broadcast":
                parts = dict.fromkeys(chans, recs)
            elif group.partition == "hash":
                parts = core.hash_parts(recs, chans)
            else:
                parts = {chans[j % len(chans)]: recs}
            out += [(ch, parts[ch], wm) for ch in chans if ch in parts]
        return out

    def _replay(self, msg: Replay) -> list[InstanceAction]:
        """R9: the logged (or regenerated) epochs the receiver lacks, each with its close,
        then the closes of epochs without data."""
        acts: list[InstanceAction] = []
        ch = msg.channel
        last = max([self.completed, *(t for t in msg.epochs)])
        for t in range(msg.after + 1, last + 1):
            if t in msg.epochs:
                self.out_pos = {k: v for k, v in self.out_pos.items() if k != (ch, t)}
                if self.me.is_source:
                    every = self.setup.epoch_every
                    for j in range(t * every, min((t + 1) * every, self.next_batch)):
                        acts += [self._send(c, r, w, t, log=False)
                                 for c, r, w in self._generate(j) if c == ch]
                else:
                    acts += [self._send(c, r, w, t, log=False)
                             for c, r, w in self.log.get(t, []) if c == ch]
            if t <= self.completed:
                acts.append(Send(ch, Marker(CLOSE, t, meta=self._replayed_watermark(t))))
        return acts

    def _replayed_watermark(self, t: int) -> Any:
        if self.me.is_source:
            return self._source_watermark(t)
        if t in self.sent_wm:
            return self.sent_wm[t]
        return next((wm for c, _, wm in self.log.get(t, []) if c == WM_CHANNEL), -1)


__all__ = ["SINK", "SOURCE", "FalkirkInstance"]
