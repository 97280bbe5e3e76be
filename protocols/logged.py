"""Channel machinery shared by the log-based protocols (``lineage`` and ``causal``).

- **Per-channel positions.** A receiver accepts a batch only if its ``seq`` is the next one
  on that channel; duplicates (replays of what it has) and gaps (a sender resent from its
  log while a newer batch was already on the wire) are dropped. A gap is always closed
  later: a resend covers everything from the requested position to the sender's newest
  batch, in order, on the same FIFO channel.
- **Payload logs.** Every instance logs what it sent per output channel so it can resend
  from any position (``resend`` control); ``gc`` controls drop the prefix a child no
  longer needs.
- **End of stream** carries the channel's final ``seq`` so a receiver ignores it until it
  has every batch before it; a resend repeats it once the sender has finished.
- **Sinks** are de-duplicated per key: a sink counts how many records of each key it has
  made visible (persisted together with the output, in the same step, so a crash can
  never separate them) and, in a re-execution from the start, suppresses the first that
  many records of each key. This is exact when each key's output sequence is
  deterministic — what the ``ordered-per-key`` / ``final-per-key`` sink modes assert.
"""

from __future__ import annotations

from typing import Any

from ftctl.runtime.actions import Emit, Persist, Send
from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker, Message
from protocols.base import InstanceProtocol

# Each instance owns one slot of the snapshot store, overwritten in place: a replacement
# always restores the newest local snapshot, and no snapshot id is shared between instances.
SLOT = 1


def eos_ok(marker: Marker, pos: int) -> bool:
    return marker.meta is None or marker.meta == pos


class LoggedInstance(InstanceProtocol):
    def __init__(self, core: InstanceCore, params: Any, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        self.pos: dict[int, int] = dict.fromkeys(core.inputs, 0)
        self.plog: dict[int, list[Batch]] = {ch: [] for ch in core.out_channels}
        self.resume: dict[int, int] = {}  # out channel -> lowest seq worth sending
        self.done = False
        self.emitted: dict[Any, int] = {}
        self.seen: dict[Any, int] = {}
        core.on_send = self._on_send
        core.hold_output = core.is_sink  # the sink filters its output before it is visible

    # ------------------------------------------------------------ hooks for subclasses

    def stamp(self, ch: int, batch: Batch) -> None:
        """Fill ``batch.meta`` before it is logged and sent."""

    def process(self, ch: int, batch: Batch) -> None:
        """An accepted batch: run it (subclasses may buffer and reorder)."""
        self.core.deliver(ch, batch)
        self.after_deliver()

    def sink_blob(self) -> dict[str, Any]:
        return {"emitted": dict(self.emitted)}

    # ------------------------------------------------------------ input

    def on_message(self, ch: int, msg: Message) -> None:
        if isinstance(msg, Batch):
            if msg.seq != self.pos[ch] + 1:
                return
            self.pos[ch] = msg.seq
            self.process(ch, msg)
        elif msg.kind == "eos" and eos_ok(msg, self.pos[ch]):
            self.on_eos(ch)
        self.filter_sends()

    def after_deliver(self) -> None:
        if self.core.is_sink and self.core.pending_output:
            self.flush_sink()

    def flush_sink(self) -> None:
        out = []
        seen, emitted = self.seen, self.emitted
        for k, v in self.core.pending_output:
            n = seen.get(k, 0) + 1
            seen[k] = n
            if n > emitted.get(k, 0):
                emitted[k] = n
                out.append((k, v))
        self.core.pending_output = []
        if out:
            # Output and its de-duplication state reach the outside world in one step.
            self.core.actions.append(Emit(self.core.id, out))
            self.persist_sink(out)

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        """Persist the de-duplication state after ``out`` was made visible."""
        self.core.actions.append(Persist(SLOT, self.core.id, self.sink_blob()))

    # ------------------------------------------------------------ output

    def _on_send(self, ch: int, batch: Batch) -> None:
        self.stamp(ch, batch)
        self.plog[ch].append(batch)

    def filter_sends(self) -> None:
        """Drop sends a child already has (a replacement regenerating old output)."""
        if not self.resume:
            return
        acts = self.core.actions
        self.core.actions = [
            a for a in acts
            if not (type(a) is Send and type(a.msg) is Batch
                    and a.msg.seq < self.resume.get(a.channel, 0))
        ]

    def finish(self) -> None:
        self.done = True
        for ch in self.core.out_channels:
            self.core.actions.append(Send(ch, Marker("eos", meta=self.core.out_seq[ch])))
        self.report("eos")

    def on_step(self, now: float) -> bool:
        more = self.core.source_next()
        if not more:
            self.finish()
        self.filter_sends()
        return more

    # ------------------------------------------------------------ controls

    def on_control(self, payload: Any) -> None:
        kind = payload.get("kind") if isinstance(payload, dict) else None
        if kind == "resend":
            self.resend(payload["channel"], payload["from"])
        elif kind == "gc":
            self.gc(payload["channel"], payload["upto"])

    def resend(self, ch: int, start: int) -> None:
        # A child that needs everything (a purged one, under lineage) leaves nothing to
        # filter; recording it would make every later step rescan its queued sends, and
        # a replacement replaying a whole history in one frame would do so per batch.
        if start > 1:
            self.resume[ch] = start
        else:
            self.resume.pop(ch, None)
        for b in self.plog.get(ch, []):
            if b.seq >= start:
                self.core.actions.append(Send(ch, b))
        if self.done:
            self.core.actions.append(Send(ch, Marker("eos", meta=self.core.out_seq[ch])))

    def gc(self, ch: int, upto: int) -> None:
        log = self.plog.get(ch)
        if log and log[0].seq <= upto:
            self.plog[ch] = [b for b in log if b.seq > upto]

    def log_size(self) -> int:
        return sum(len(v) for v in self.plog.values())
