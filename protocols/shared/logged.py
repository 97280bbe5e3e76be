"""Channel machinery shared by the log-based protocols (``lineage`` and ``causal``).

- **Per-channel positions.** A receiver accepts a batch only if its ``seq`` is the next one
  on that channel; duplicates (replays of what it has) and gaps (a sender resent from its
  log while a newer batch was already on the wire) are dropped. A gap is always closed
  later: a resend covers everything from the requested position to the sender's newest
  batch, in order, on the same FIFO channel.
- **Payload logs.** Every instance logs what it sent per output channel so it can resend
  from any position (``Resend`` control); ``TrimPayloadLog`` controls drop the prefix a
  child no longer needs. A protocol whose logs are never trimmed keeps them encoded
  (``encoded_log``, see ``payload_log``).
- **Chunked resends.** A protocol may bound the batches one event resends
  (``resend_chunk``): the rest follow on a timer that fires at once, so no event decodes
  and queues a whole history (50M votes held one Spark task's heartbeat thread past the
  failure detector's timeout). While a chunked resend runs on a channel, new batches on
  it are logged but not sent; the resend reaches them, in order.
- **End of stream** carries the channel's final ``seq`` so a receiver ignores it until it
  has every batch before it; a resend repeats it once the sender has finished.
- **Sinks** de-duplicate a recomputation by record identity, counting occurrences: a sink
  counts how many records of each identity it has made visible (persisted together with
  the output, in the same step, so a crash can never separate them) and, in a
  re-execution, makes a record visible only once more of its identity have arrived than
  were visible. A record's identity is what the sink's mode fixes independently of the
  order in which its inputs interleave (``ftctl validate`` refuses the rest):
  ``multiset``, the record ``(key, value)`` itself (the multiset is fixed, so any
  arrival order of a recomputation brings each record as often as golden has it);
  ``ordered-per-key`` and ``final-per-key``, the key (its record sequence, or at least
  its length and last value, is fixed: the n-th record of a key is a duplicate whenever
  n records of it are visible). Counting per key under ``multiset`` would assume the
  recomputation brings each key's records in the original order, which a join or a
  merge of several instances does not keep (spec causal.md E4).

``LoggedInstance`` collects one event's actions in ``out``: what the core produced (moved
there by ``take`` right after each core call, so every batch is stamped and logged with
the state it was sent in; a sink's records are kept in ``sink_records`` until
``flush_sink`` filters them) and what the protocol adds, in order. ``flush`` returns them
without the batches a child already has.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker
from protocols.contract.actions import (
    REPLAYING,
    Chain,
    DeclarePhase,
    Emit,
    InstanceAction,
    Persist,
    Report,
    Send,
    SetTimer,
)
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, SourceReady, Started, TimerFired
from protocols.contract.logic import EOS, InstanceLogic
from protocols.contract.messages import Ended, Msg
from protocols.contract.names import ChannelId, InstanceId
from protocols.contract.params import P
from protocols.contract.view import InstanceView
from protocols.shared.packed_counts import PackedCounts
from protocols.shared.payload_log import PayloadLog

RESEND_TIMER = "resend:"  # + the channel: the next chunk of a resend on it

# Each instance owns one slot of the snapshot store, overwritten in place: a replacement
# always restores the newest local snapshot, and no snapshot id is shared between instances.
SLOT = 1


@dataclass(frozen=True, slots=True)
class Resend(Msg):
    """Control: send ``channel``'s payload log again from batch ``start`` on, and filter
    newer sends on it below ``start`` (the child already has them). Batches are addressed
    by ``LoggedInstance.key``."""

    channel: ChannelId
    start: int


@dataclass(frozen=True, slots=True)
class TrimPayloadLog(Msg):
    """Control: the child of ``channel`` never needs batches up to ``upto`` again."""

    channel: ChannelId
    upto: int


@dataclass(frozen=True, slots=True)
class Ready(Msg):
    """Report: a replacement runs; each input channel's sender should resend from
    ``starts[channel]``."""

    starts: Mapping[ChannelId, int]


MESSAGES: tuple[type[Msg], ...] = (Resend, TrimPayloadLog, Ready)


def _by_record(k: Any, v: Any) -> Hashable:
    return (k, v)


def _by_key(k: Any, v: Any) -> Hashable:
    return k


_KEY = itemgetter(0)


def identities(identity: Callable[[Any, Any], Hashable], records: list[tuple[Any, Any]]
               ) -> list[Hashable]:
    """Each record's identity under ``identity`` (``record_identity``), in bulk."""
    if identity is _by_key:
        return list(map(_KEY, records))
    if identity is _by_record:
        # A record is its identity: the tuples themselves, not copies (a million
        # tuples a q1 schedule).
        if set(map(type, records)) == {tuple}:
            same: list[Hashable] = list(records)
            return same
        return [(k, v) for k, v in records]
    return [identity(k, v) for k, v in records]


def closed_gap(behind: int | None, suppressed: int, seen: dict[Any, int],
               emitted: dict[Any, int]) -> tuple[int | None, bool]:
    """A sink's gap between ``seen`` and ``emitted`` after a batch that suppressed
    ``suppressed`` records, and whether the two are now equal. ``seen`` never exceeds
    ``emitted``, so each suppressed record closed the gap by one and a shown record left
    it as it was: at 0 the counts are equal, checked. None: not summed yet; -1: a check
    found them unequal (``seen`` above ``emitted`` somewhere), so the gap is not counted
    until they are next set."""
    if behind is None or behind < 0:
        return behind, False
    behind -= suppressed
    if behind:
        return behind, False
    return (0, True) if seen == emitted else (-1, False)


def record_identity(mode: str | None) -> Callable[[Any, Any], Hashable]:
    """What identifies a sink record across recomputations, for sink ``mode`` (see the
    module docstring)."""
    return _by_key if mode in ("ordered-per-key", "final-per-key") else _by_record


def eos_ok(marker: Marker, pos: int) -> bool:
    return marker.meta is None or marker.meta == pos


class LoggedInstance(InstanceLogic[P]):
    more = True  # sources: whether another step is worth offering
    encoded_log = False  # keep the payload logs' batches encoded (see ``payload_log``)
    resend_chunk: int | None = None  # batches a resend sends per event (None: all at once)

    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore], params: P):
        super().__init__(me, cores, params)
        core = self.core
        self.pos: dict[int, int] = dict.fromkeys(core.inputs, 0)
        self.plog = {ch: PayloadLog(self.encoded_log) for ch in core.out_channels}
        self.resume: dict[int, int] = {}  # out channel -> lowest seq worth sending
        self.resending: dict[int, int] = {}  # out channel -> key a chunked resend goes on at
        self.done = False
        # Sinks: per record identity, how many are visible and how many this execution
        # produced (see the module docstring).
        self.identity = record_identity(core.sink_mode)
        # Whether ``seen`` may differ from ``emitted``. Counting keeps them equal (a record
        # of a count n arrives as the (n+1)-th, which is shown), so until then one dict
        # is both: a sink counts each record once, not twice. Only a restore sets them
        # apart, by assigning one (the setters below) or by raising counts in place (a
        # protocol that does takes them from ``counts_to_raise`` and calls
        # ``settle_counts`` after).
        self._emitted: dict[Any, int] = {}
        self._seen: dict[Any, int] = self._emitted
        self.apart = False
        # While apart, how many records ``seen`` lacks to equal ``emitted`` (None: not
        # yet summed since they were last set apart; -1: not to be trusted, see
        # ``rejoin``). A replay after a restore closes the gap, and at 0 the two are one
        # dict again: a purge's replay no longer sets every later record apart too.
        self._behind: int | None = None
        # While apart, the identities whose two counts differed when last looked for
        # (None: not looked for since the counts were last set apart). They only shrink
        # until then: a record of such an identity raises ``seen`` toward ``emitted``,
        # and any other is shown, raising both alike. A protocol that stores the
        # differences with every snapshot updates these from what ``dedup`` reports
        # (``closing``), instead of comparing every identity again.
        self.differ: dict[Any, int] | None = None
        # ``emitted`` as a snapshot stores it: parts encoded once, while counts only grow.
        self.packed = PackedCounts()
        self.out: list[InstanceAction] = []  # the current event's actions, in order
        # Sinks: records the core produced, not visible until ``flush_sink`` filters them.
        self.sink_records: list[tuple[Any, Any]] = []

    # ------------------------------------------------------------ hooks for subclasses

    def start(self, ev: Started) -> None:
        """The incarnation starts: restore what ``ev`` carries."""

    def stamp(self, ch: int, batch: Batch) -> None:
        """Fill ``batch.meta`` before it is logged and sent."""

    def key(self, batch: Batch) -> int:
        """What addresses ``batch`` in its channel's payload log (``Resend`` starts,
        ``TrimPayloadLog`` bounds, the filter of a replacement's output): its ``seq`` here;
        ``causal`` addresses batches by their sender time (spec causal.md D5)."""
        return batch.seq

    def sent(self, ch: int, batch: Batch) -> None:
        """The core sent ``batch`` on ``ch``: stamp it and keep it in the payload log."""
        self.stamp(ch, batch)
        self.plog[ch].append(self.key(batch), batch)

    def process(self, ch: int, batch: Batch) -> None:
        """An accepted batch: run it (subclasses may buffer and reorder)."""
        self.core.deliver(ch, batch)
        self.take()
        self.after_deliver()

    def control(self, msg: Msg) -> None:
        if isinstance(msg, Resend):
            self.resend(msg.channel, msg.start)
        elif isinstance(msg, TrimPayloadLog):
            self.gc(msg.channel, msg.upto)

    # ------------------------------------------------------------ actions of one event

    def take(self) -> None:
        """Move what the core produced into this event's actions, logging each batch sent."""
        out = self.out
        resending = self.resending
        for a in self.output(self.me.id):
            if type(a) is Send and type(a.msg) is Batch:
                self.sent(a.channel, a.msg)
                if a.channel in resending:
                    continue  # logged: the resend under way sends it in its turn
            out.append(a)

    def on_output(self, slot: InstanceId, records: list[tuple[Any, Any]]
                  ) -> list[InstanceAction]:
        self.sink_records += records  # held: ``flush_sink`` decides what becomes visible
        return []

    def take_sink_records(self) -> list[tuple[Any, Any]]:
        records, self.sink_records = self.sink_records, []
        return records

    def report(self, msg: Msg) -> None:
        self.out.append(Report(msg))

    def persist(self, ref: int, blob: Any, chain: Chain | None = None) -> None:
        self.out.append(Persist(self.me.id, ref, blob, chain))

    def flush(self) -> list[InstanceAction]:
        """This event's actions, without the batches a child already has (a replacement
        regenerating old output)."""
        self.take()
        acts, self.out = self.out, []
        resume = self.resume
        if not resume:
            return acts
        key = self.key
        return [a for a in acts
                if not (type(a) is Send and type(a.msg) is Batch
                        and key(a.msg) < resume.get(a.channel, 0))]

    # ------------------------------------------------------------ events

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        self.start(ev)
        return self.flush()

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        ch, batch = ev.channel, ev.batch
        if batch.seq == self.pos[ch] + 1:
            self.pos[ch] = batch.seq
            self.process(ch, batch)
        return self.flush()

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        if ev.marker.kind == EOS and eos_ok(ev.marker, self.pos[ev.channel]):
            self.on_eos(ev.channel)
        return self.flush()

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        self.step()
        return self.flush()

    def more_to_produce(self, slot: InstanceId) -> bool:
        return self.more

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        self.control(ev.msg)
        return self.flush()

    def on_timer(self, ev: TimerFired, now: float) -> list[InstanceAction]:
        if ev.key.startswith(RESEND_TIMER):
            ch = int(ev.key[len(RESEND_TIMER):])
            if ch in self.resending:
                self.resend_more(ch)
        return self.flush()

    # ------------------------------------------------------------ input

    def on_eos(self, ch: int) -> None:
        core = self.core
        if ch in core.finished:
            return
        if core.end_of_stream(ch):
            self.take()
            self.close_outputs()

    @property
    def emitted(self) -> dict[Any, int]:
        """Sinks: per record identity, how many records of it are visible."""
        return self._emitted

    @emitted.setter
    def emitted(self, counts: dict[Any, int]) -> None:
        self._emitted = counts
        self.apart = True
        self._behind = self.differ = None
        self.packed.stale()

    @property
    def seen(self) -> dict[Any, int]:
        """Sinks: per record identity, how many records of it this execution produced."""
        return self._seen

    @seen.setter
    def seen(self, counts: dict[Any, int]) -> None:
        self._seen = counts
        self.apart = True
        self._behind = self.differ = None

    def counts_to_raise(self) -> tuple[dict[Any, int], dict[Any, int]]:
        """``seen`` and ``emitted`` as two dicts, to raise counts of either in place."""
        if self._seen is self._emitted:
            self._seen = dict(self._emitted)
        self._behind = self.differ = None
        return self._seen, self._emitted

    def settle_counts(self) -> None:
        """After counts were raised in place: apart if they differ, else one dict again."""
        self.apart = self._seen != self._emitted
        if not self.apart:
            self._seen = self._emitted
        self._behind = self.differ = None
        self.packed.stale()

    def rejoin(self, suppressed: int) -> None:
        """``suppressed`` records of the last batch were not shown (``closed_gap``)."""
        self._behind, equal = closed_gap(self._behind, suppressed, self._seen, self._emitted)
        if equal:
            self.counts_joined()

    def counts_joined(self) -> None:
        """``seen`` equals ``emitted`` again: one dict, counted in bulk from now on."""
        self._seen = self._emitted
        self.apart = False

    def after_deliver(self) -> None:
        if self.sink_records:
            self.flush_sink()

    def flush_sink(self) -> None:
        records = self.take_sink_records()
        idents = identities(self.identity, records)
        if self.apart:
            out, shown, caught, below = self.dedup(records, idents)
            self.counted(idents, shown, first=False)
            self.closing(caught, below)
            self.rejoin(len(records) - len(out))
        else:
            before = len(self._emitted)
            out = self.count_all(records, idents)
            # Each identity counted for the first time (and once): every count is 1.
            self.counted(idents, idents, first=len(self._emitted) - before == len(idents))
        if out:
            # Output and its de-duplication state reach the outside world in one step:
            # the state first, so the Emit waits until it is durable (a crash that loses
            # unsynced writes must not leave output visible whose state is gone).
            self.persist_sink(out)
            self.out.append(Emit(self.me.id, out))

    def count_all(self, records: list[tuple[Any, Any]], idents: list[Hashable]
                  ) -> list[tuple[Any, Any]]:
        """While ``seen`` equals ``emitted`` every record is one more of its identity than
        is visible: all are shown, and both counts rise alike. Counted in C, by
        ``Counter.update``: record by record in Python this was most of a causal
        sink's time on Nexmark q1, whose identities are nearly all distinct; ``dict.update``
        over ``seen.get`` hashed each identity twice (a Nexmark record is a nested tuple,
        hashed anew every time). An identity twice in one batch counts twice."""
        seen, emitted = self._seen, self._emitted
        before = len(emitted)
        # Counter's own method on a plain dict: it only reads and sets items (in C).
        Counter.update(cast("Counter[Hashable]", seen), idents)
        if emitted is not seen:
            emitted.update(zip(idents, map(seen.__getitem__, idents), strict=True))
        if len(emitted) - before != len(idents):  # a count already there rose
            self.packed.stale()
        return records

    def dedup(self, records: list[tuple[Any, Any]], idents: list[Hashable]
              ) -> tuple[list[tuple[Any, Any]], list[Hashable], list[Hashable],
                         list[Hashable]]:
        """The records whose count of their identity exceeds what is visible, and their
        identities; then the identities of the others (suppressed), split into those
        whose ``seen`` count reached the visible one and those still below it."""
        out, shown, caught, below = [], [], [], []
        seen, emitted = self._seen, self._emitted
        if self._behind is None:  # the gap ``rejoin`` closes, summed once when set apart
            self._behind = sum(emitted.values()) - sum(seen.values())
        before = len(emitted)
        for r, i in zip(records, idents, strict=True):
            n = seen.get(i, 0) + 1
            seen[i] = n
            e = emitted.get(i, 0)
            if n > e:
                emitted[i] = n
                out.append(r)
                shown.append(i)
            elif n == e:
                caught.append(i)
            else:
                below.append(i)
        if len(emitted) - before != len(out):  # a count already there rose
            self.packed.stale()
        return out, shown, caught, below

    def counted(self, idents: list[Hashable], shown: list[Hashable], first: bool) -> None:
        """``idents``: the identities whose ``seen`` count this batch raised, suppressed
        or shown; ``shown``: those whose visible count it raised; ``first``: each was
        counted for the first time, so its counts are now 1."""

    def closing(self, caught: list[Hashable], below: list[Hashable]) -> None:
        """While apart, what a batch's suppressed records did (``dedup``): ``caught``, the
        identities whose ``seen`` count reached the visible one; ``below``, those whose
        ``seen`` count rose and is still below it."""

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        """Persist the de-duplication state that counts ``out`` as made visible."""
        self.persist(SLOT, {"emitted": dict(self.emitted)})

    # ------------------------------------------------------------ output

    def close_outputs(self) -> None:
        """Every input ended (or the source ran dry): end of stream on every output
        channel, carrying its final ``seq``, and report it."""
        self.done = True
        core = self.core
        self.out += [Send(ch, Marker(EOS, meta=core.out_seq[ch])) for ch in core.out_channels]
        self.report(Ended())

    def step(self) -> None:
        """Sources: the next batch."""
        self.more = more = self.core.source_next()
        self.take()
        if not more:
            self.close_outputs()

    # ------------------------------------------------------------ controls

    def resend(self, ch: int, start: int) -> None:
        # A child that needs everything (a purged one, under lineage) leaves nothing to
        # filter; recording it would make every later step rescan its queued sends, and
        # a replacement replaying a whole history in one frame would do so per batch.
        if start > 1:
            self.resume[ch] = start
        else:
            self.resume.pop(ch, None)
        if self.resend_chunk is not None:
            if ch not in self.resending:  # a resend in chunks spans steps: replaying
                self.out.append(DeclarePhase(REPLAYING, True, ch))
            self.resending[ch] = start
            self.resend_more(ch)
            return
        log = self.plog.get(ch)
        if log is not None:
            self.out += [Send(ch, b) for b in log.since(start)]
        if self.done:
            self.out.append(Send(ch, Marker(EOS, meta=self.core.out_seq[ch])))

    def resend_more(self, ch: int) -> None:
        """The next chunk of the resend under way on ``ch``; the timer for the one after,
        or, once the log is exhausted, end of stream if the sender has finished."""
        chunk = self.resend_chunk
        assert chunk is not None
        log = self.plog.get(ch)
        batches = log.since(self.resending[ch], chunk) if log is not None else []
        self.out += [Send(ch, b) for b in batches]
        if len(batches) == chunk:
            self.resending[ch] = self.key(batches[-1]) + 1
            self.out.append(SetTimer(f"{RESEND_TIMER}{ch}", 0.0))
            return
        del self.resending[ch]
        self.out.append(DeclarePhase(REPLAYING, False, ch))
        if self.done:
            self.out.append(Send(ch, Marker(EOS, meta=self.core.out_seq[ch])))

    def gc(self, ch: int, upto: int) -> None:
        log = self.plog.get(ch)
        if log is not None:
            log.trim(upto)

    def log_size(self) -> int:
        return sum(len(v) for v in self.plog.values())
