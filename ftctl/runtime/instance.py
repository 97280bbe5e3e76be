"""An operator instance's machinery, shared by every protocol.

``InstanceCore`` runs the operator on delivered batches, partitions its output onto
channels, numbers batches per channel, tracks watermarks and end-of-stream, and keeps what
its steps produced until the protocol takes it (``take_output``: the sends, and a sink's
records). Protocols (``protocols/``) decide *when* the core processes what, what is
persisted or replayed, and whether a sink's records are emitted, staged, held or
filtered; they change the core only through its public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import itemgetter
from typing import Any
from weakref import WeakMethod

from ftctl.runtime.actions import Action, Emit, Send
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch, Marker
from ftctl.runtime.operators import WATERMARK_MAX, FunctionFailed, Operator
from ftctl.runtime.output import Output
from ftctl.runtime.partition import hash_split
from ftctl.runtime.records import Record

_KEY_VALUE = itemgetter(0, 1)


def _key_values(records: list[Record]) -> list[tuple[Any, Any]]:
    return list(map(_KEY_VALUE, records))


class HeldWeakly:
    """A method of the logic that holds a core, as the core holds it: weakly, so that the
    two are no cycle (``InstanceCore.round_robin_by``)."""

    __slots__ = ("ref",)

    def __init__(self, method: Callable[[], int]) -> None:
        self.ref = WeakMethod(method)

    def __call__(self) -> int:
        method = self.ref()
        assert method is not None, "a core outlived its logic"
        return method()

    def __reduce__(self) -> tuple[type[HeldWeakly], tuple[Callable[[], int] | None]]:
        # A deep copy of a logic and its cores holds the copy's method.
        return HeldWeakly, (self.ref(),)

SendHook = Callable[[int, Batch], None]


class InstanceCore:
    def __init__(self, graph: ExecutionGraph, iid: str):
        spec = graph.instances[iid]
        self.id = iid
        self.spec = spec
        self.is_source = spec.is_source
        self.is_sink = spec.is_sink
        # How the verifier compares this sink with golden; what a record's identity is
        # when a protocol de-duplicates a recomputation (protocols/shared/logged.py).
        self.sink_mode = graph.topology.sink_modes().get(spec.op) if self.is_sink else None
        self.inputs = list(spec.inputs)
        self.out_channels = graph.out_channels(iid)
        self.port_of = {ch: graph.channels[ch].port for ch in spec.inputs}
        self.batch_size = graph.topology.input.batch
        self.needs_wm = graph.needs_watermarks
        made = graph.make_operator(iid)
        self.op: Operator = Operator() if self.is_source else made  # type: ignore[assignment]
        self.gen: Callable[[int, int], list[Record]] | None = made if self.is_source else None  # type: ignore[assignment]
        # Batches every run of this graph makes alike (a simulator's); None: made anew.
        self.memo = graph.memo
        self.pure = self.memo is not None and self.op.pure
        self.lo, self.hi = graph.source_range(iid) if self.is_source else (0, 0)
        self.offset = self.lo
        # What the steps produced since the last take, in order: sends, and a sink's
        # records as one ``Emit`` per step.
        self._produced: list[Action] = []
        self.out_seq = dict.fromkeys(self.out_channels, 0)
        self.rr = [0] * len(spec.outputs)
        # Set by a protocol whose instances count their events (``causal``, through
        # ``round_robin_by``): the round-robin choice is then that time mod n, so a
        # replacement restored at a time routes as the original did, with no
        # per-channel counter to carry over.
        self.rr_time: HeldWeakly | None = None
        self.in_wm = dict.fromkeys(self.inputs, -1)
        self.wm = -1  # this instance's event-time watermark
        self.wm_sent = -1
        self.finished: set[int] = set()  # input channels that delivered end-of-stream
        self.on_send: SendHook | None = None
        # Sinks: sees each batch of output with event times (hosts measure latency with it).
        self.on_sink_output: Callable[[list[Record]], None] | None = None
        self.records_in = 0
        self.records_out = 0

    # ------------------------------------------------------------------ input

    def deliver(self, ch: int, batch: Batch) -> None:
        """Run the operator on a batch from channel ``ch`` and route what it produces."""
        recs = batch.records
        try:
            out: list[Record]
            if not recs:
                out = []
            elif self.pure:
                port = self.port_of[ch]
                out = self.memo.derive(self.spec.op, recs,  # type: ignore[union-attr]
                                       lambda r: self.op.process(r, port))
            else:
                out = self.op.process(recs, self.port_of[ch])
        except FunctionFailed as exc:
            raise FunctionFailed(exc.message, self.spec.op) from None
        self.records_in += len(recs)
        if self.needs_wm and batch.watermark is not None and batch.watermark > self.in_wm[ch]:
            self.in_wm[ch] = batch.watermark
            out = self._advance_watermark(min(self.in_wm.values()), out)
        self._output(out)

    def end_of_stream(self, ch: int) -> bool:
        """Record EOS on ``ch``; True (once all inputs ended) after flushing the operator."""
        self.finished.add(ch)
        if len(self.finished) < len(self.inputs):
            return False
        if self.needs_wm:
            self._output(self._advance_watermark(WATERMARK_MAX, []))
        return True

    def advance_watermark(self, wm: int) -> None:
        """Move the watermark to ``wm`` (no lower), as if every input had reached it, and
        output what it fires (a protocol that moves watermarks only at epoch ends)."""
        self._output(self._advance_watermark(wm, []))

    def _advance_watermark(self, wm: int, out: list[Record]) -> list[Record]:
        if wm <= self.wm:
            return out
        self.wm = wm
        fired = self.op.on_watermark(wm)
        return out + fired if fired else out

    # ------------------------------------------------------------------ sources

    def source_next(self) -> bool:
        """Emit the next batch of a source; False once the source is exhausted."""
        if self.offset >= self.hi:
            return False
        end = min(self.offset + self.batch_size, self.hi)
        recs = self.source_records(self.offset, end)
        self.offset = end
        if self.needs_wm and recs:
            self.wm = recs[-1][2]
        self._output(recs)
        return self.offset < self.hi

    def source_records(self, lo: int, hi: int) -> list[Record]:
        """A source's records for offsets [lo, hi), made once per process when the graph
        has a memo (``ftctl.runtime.memo``): a protocol that regenerates a batch gets the
        same list."""
        assert self.gen is not None
        return (self.gen(lo, hi) if self.memo is None
                else self.memo.source(self.id, lo, hi, self.gen))

    def hash_parts(self, records: list[Record], chans: list[int]
                   ) -> dict[int, list[Record]]:
        """``records`` split onto ``chans`` by key hash (through the memo, as above)."""
        return (hash_split(records, chans) if self.memo is None else
                self.memo.derive(f"hash{chans}", records, partial(hash_split, chans=chans)))

    @property
    def exhausted(self) -> bool:
        return self.offset >= self.hi

    def seek(self, offset: int) -> None:
        """Sources: produce from ``offset`` on (a restart resuming, or a rewind)."""
        self.offset = offset

    # ------------------------------------------------------------------ output

    def _output(self, out: list[Record]) -> None:
        self.records_out += len(out)
        if self.is_sink:
            if out and self.on_sink_output is not None:
                self.on_sink_output(out)
            if out:
                self._produced.append(Emit(self.id, self.key_values(out)))
            return
        self.route(out)

    def key_values(self, records: list[Record]) -> list[tuple[Any, Any]]:
        """A sink's output as (key, value) pairs, in C (a million records a q0 sink); once
        per process for a batch the memo holds (``ftctl.runtime.memo``): every run then
        emits, and its sink counts, the same pairs, not a million new ones a run."""
        if self.memo is None:
            return _key_values(records)
        made: list[tuple[Any, Any]] = self.memo.derive("key-value", records, _key_values)
        return made

    def route(self, records: list[Record]) -> None:
        wm: int | None = None
        advanced = False
        if self.needs_wm:
            wm = self.wm
            advanced = wm > self.wm_sent
            if advanced:
                self.wm_sent = wm
        for gi, group in enumerate(self.spec.outputs):
            chans = group.channels
            parts: dict[int, list[Record]]
            if not records:
                parts = {}
            elif len(chans) == 1 or group.partition == "broadcast":
                parts = dict.fromkeys(chans, records)
            elif group.partition == "hash":
                parts = self.hash_parts(records, chans)
            else:  # round-robin by whole batches: deterministic given the instance's state
                turn = self.rr_time() if self.rr_time is not None else self.rr[gi]
                parts = {chans[turn % len(chans)]: records}
                self.rr[gi] += 1
            for ch in chans:
                recs = parts.get(ch)
                if recs or advanced:
                    self.send(ch, Batch(recs or [], watermark=wm))

    def send(self, ch: int, batch: Batch) -> None:
        seq = self.out_seq[ch] + 1
        self.out_seq[ch] = seq
        batch.seq = seq
        if self.on_send is not None:
            self.on_send(ch, batch)
        self._produced.append(Send(ch, batch))

    def send_marker(self, marker: Marker) -> None:
        for ch in self.out_channels:
            self._produced.append(Send(ch, marker))

    def next_seq(self, ch: int) -> int:
        """Number something the protocol sends on ``ch`` itself, in the sequence of the
        core's batches (a marker that is numbered like a batch)."""
        seq = self.out_seq[ch] + 1
        self.out_seq[ch] = seq
        return seq

    def number_from(self, ch: int, seq: int) -> None:
        """The next batch on ``ch`` is numbered ``seq + 1`` (a replacement that resumes
        its predecessor's numbering without its state)."""
        self.out_seq[ch] = seq

    def round_robin_by(self, time: Callable[[], int]) -> None:
        """Choose round-robin channels by ``time()`` mod n instead of a counter. ``time``
        is a method of the logic that holds this core, held weakly: a core holding its
        logic made the two a cycle, which only the garbage collector frees, after walking
        all the logic held (a Nexmark sink's million counts)."""
        self.rr_time = HeldWeakly(time)

    # ------------------------------------------------------------ watermarks kept

    def raise_input_watermark(self, ch: int, wm: int) -> None:
        """Take ``wm`` as received on ``ch`` (no lower than what it has), without running
        anything: a replacement learning what its predecessor had received."""
        if wm > self.in_wm[ch]:
            self.in_wm[ch] = wm

    def resume_watermark(self) -> int:
        """The inputs' watermark counts as reached and already sent (a replacement
        continuing where its predecessor's output stood); returns it."""
        self.wm = self.wm_sent = max(self.wm, min(self.in_wm.values()))
        return self.wm

    # ------------------------------------------------------------------ state

    def snapshot_state(self) -> dict[str, Any]:
        """Everything a replacement needs to continue as this instance would."""
        return {
            "op": self.op.snapshot(),
            "offset": self.offset,
            "seq": dict(self.out_seq),
            "rr": list(self.rr),
            "in_wm": dict(self.in_wm),
            "wm": (self.wm, self.wm_sent),
            "finished": set(self.finished),
        }

    def state_size(self) -> int:
        """Entries the operator holds (a key's aggregate, a held record): what a
        snapshot of it costs, roughly."""
        return self.op.state_size()

    def restore_state(self, state: dict[str, Any]) -> None:
        self.op.restore(state["op"])
        self.offset = state["offset"]
        self.out_seq = dict(state["seq"])
        self.rr = list(state["rr"])
        self.in_wm = dict(state["in_wm"])
        self.wm, self.wm_sent = state["wm"]
        self.finished = set(state["finished"])

    def take_output(self) -> Output:
        """What the steps produced since the last take: the sends, and a sink's records
        (``(key, value)``, in the order produced), which nothing has made visible."""
        produced, self._produced = self._produced, []
        if not self.is_sink:
            return Output(produced)  # type: ignore[arg-type]  # only sends
        out = Output()
        for a in produced:
            if isinstance(a, Emit):
                out.records.extend(a.records)
            else:
                out.sends.append(a)
        return out

    def take_actions(self) -> list[Action]:
        """The same, as actions: a sink's records as one ``Emit`` per step, visible as
        they come. For protocols that make a sink's output visible unfiltered."""
        acts, self._produced = self._produced, []
        return acts
