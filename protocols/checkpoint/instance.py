"""The instance side of ``checkpoint``: snapshot tokens, channel state, staged sink output.

Sources inject a snapshot token on a timer. Unaligned (Noir): an instance copies its
state at the first token ``i``, forwards the token at once and keeps processing every
channel, recording the tuples that arrive on channels whose token ``i`` has not come yet;
once token ``i`` came on every input it persists the copy plus those tuples (the channel
state). Aligned (Flink): a channel is blocked once its token came; when all came, the
state is persisted, the token forwarded and the blocked messages processed.

End of stream is the last, aligned snapshot ``FINAL``. A channel that ended stands for
every later token. A sink stages the output it made before token ``i`` under epoch ``i``;
the coordinator commits it once snapshot ``i`` is complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker, Message
from protocols.checkpoint.params import CheckpointParams
from protocols.contract.actions import (
    DeclarePhase,
    InstanceAction,
    Persist,
    Report,
    Send,
    StageOutput,
)
from protocols.contract.events import BatchIn, ControlIn, MarkerIn, SourceReady, Started
from protocols.contract.logic import EOS, InstanceLogic
from protocols.contract.messages import Ended, InputEnded, Persisted
from protocols.contract.names import InstanceId
from protocols.contract.view import InstanceView

SNAPSHOT = "snapshot"  # the marker kind of a snapshot token
FINAL = 2**31 - 1  # id of the snapshot taken at end of stream


@dataclass
class _Pending:
    """A snapshot an instance has started but not yet persisted."""

    state: dict[str, Any]
    waiting: set[int]
    output: list[Any]
    channel_state: dict[int, list[Batch]] = field(default_factory=dict)


class CheckpointInstance(InstanceLogic[CheckpointParams]):
    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: CheckpointParams):
        super().__init__(me, cores, params)
        self.aligned = params.alignment == "aligned"
        self.interval = params.seconds()
        self.pending: dict[int, _Pending] = {}
        self.blocked: dict[int, list[Message]] = {}  # aligned: channel -> held messages
        self.aligning: _Pending | None = None
        self.aligning_id = 0
        self.next_token = 1
        self.next_token_at: float | None = None
        # A source replaying after a fallback: (token, offset) it cuts next, none before.
        self.cut: tuple[int, int] | None = None
        self.out: list[InstanceAction] = []  # this event's actions, in the order taken
        # Sinks: output since the last snapshot began; staged with the next one.
        self.held: list[tuple[Any, Any]] = []
        # Snapshot ids this instance has begun and not persisted: ``snapshotting`` open.
        self.snapshotting: set[int] = set()

    # ------------------------------------------------------------ events

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        core = self.core
        blob = ev.restored
        if blob is not None:
            core.restore_state(blob["core"])
            self.next_token = blob["id"] + 1
            # Channel state first: tuples that were in flight when the snapshot was cut.
            for ch, batches in sorted(blob["channels"].items()):
                for records, seq, watermark in batches:
                    core.deliver(ch, Batch(records, seq, watermark))
        for sid, part in ev.extra.items():  # a fallback: cut ``sid`` where it was cut
            if part is not None:
                self.cut = (sid, part["core"]["offset"])
        return self._take()

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        if self.cut is not None:  # replaying committed epochs: no token but the cut's
            if self.core.offset >= self.cut[1]:
                self.next_token, self.cut = self.cut[0], None
                self.next_token_at = now + self.interval
                self._source_token()
        elif self.next_token_at is None:
            self.next_token_at = now + self.interval
        elif now >= self.next_token_at:
            self.next_token_at = now + self.interval
            self._source_token()
        if not self.core.source_next():
            self._finish()
        return self._take()

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        self.receive(ev.channel, ev.batch)
        return self._take()

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        self.receive(ev.channel, ev.marker)
        return self._take()

    def on_control(self, ev: ControlIn, now: float) -> list[InstanceAction]:
        if isinstance(ev.msg, InputEnded):
            self.input_ended(ev.msg.channel)
        return self._take()

    # ------------------------------------------------------------ sources

    def _source_token(self) -> None:
        sid = self.next_token
        self.next_token += 1
        self.begin(sid)
        state = self.core.snapshot_state()
        self._put(*self._forward(Marker(SNAPSHOT, sid)))
        self.persist(sid, _Pending(state, set(), []))

    # ------------------------------------------------------------ inner instances

    def receive(self, ch: int, msg: Message) -> None:
        """A batch or a marker on input ``ch``."""
        if self.aligned and ch in self.blocked:
            self.blocked[ch].append(msg)
            return
        if isinstance(msg, Batch):
            for snap in self.pending.values():
                if ch in snap.waiting:
                    snap.channel_state.setdefault(ch, []).append(msg)
            self.core.deliver(ch, msg)
        elif msg.kind == EOS:
            self.input_ended(ch)
        elif msg.kind == SNAPSHOT:
            self.on_token(ch, msg)

    def on_token(self, ch: int, marker: Marker) -> None:
        if self.aligned:
            self.aligned_token(ch, marker)
            return
        snap = self.pending.get(marker.id)
        if snap is None:
            self.begin(marker.id)
            core = self.core
            waiting = set(core.inputs) - core.finished - {ch}
            snap = _Pending(core.snapshot_state(), waiting, self._take_output())
            self._put(*self._forward(marker))
            self.pending[marker.id] = snap
        else:
            snap.waiting.discard(ch)
        if not snap.waiting:
            del self.pending[marker.id]
            self.persist(marker.id, snap)

    def input_ended(self, ch: int) -> None:
        if ch in self.core.finished:
            return
        # Mark the channel ended before anything below replays held messages that may
        # start a new snapshot: that snapshot must not wait on this channel.
        all_ended = self.core.end_of_stream(ch)
        # Nothing follows end-of-stream on a channel: it stands for every later token.
        for sid in sorted(self.pending):
            snap = self.pending[sid]
            snap.waiting.discard(ch)
            if not snap.waiting:
                del self.pending[sid]
                self.persist(sid, snap)
        if self.aligning is not None:
            self.aligning.waiting.discard(ch)
            if not self.aligning.waiting:
                self.aligned_complete()
        if all_ended:
            self._finish()

    def _finish(self) -> None:
        # All inputs ended (or the source ran dry): the final snapshot is aligned by nature.
        self.persist(FINAL, _Pending(self.core.snapshot_state(), set(), self._take_output()))
        self._put(*self._forward(Marker(EOS)), Report(Ended()))

    # ------------------------------------------------------------ aligned

    def aligned_token(self, ch: int, marker: Marker) -> None:
        if self.aligning is None:
            self.begin(marker.id)
            self.aligning_id = marker.id
            self.aligning = _Pending({}, set(self.core.inputs) - self.core.finished, [])
        self.aligning.waiting.discard(ch)
        self.blocked[ch] = []
        if not self.aligning.waiting:
            self.aligned_complete()

    def aligned_complete(self) -> None:
        sid = self.aligning_id
        snap = _Pending(self.core.snapshot_state(), set(), self._take_output())
        self.aligning = None
        self.persist(sid, snap)
        self._put(*self._forward(Marker(SNAPSHOT, sid)))
        held = [(c, m) for c, msgs in sorted(self.blocked.items()) for m in msgs]
        self.blocked.clear()
        for c, m in held:
            self.receive(c, m)

    # ------------------------------------------------------------ output

    def begin(self, sid: int) -> None:
        """This instance starts its part of snapshot ``sid``: ``snapshotting`` is open
        (keyed by the id) until it is persisted, so ``during: snapshotting`` can strike
        an instance waiting for the token on its other inputs."""
        if sid not in self.snapshotting:
            self.snapshotting.add(sid)
            self._put(DeclarePhase("snapshotting", True, sid))

    def persist(self, sid: int, snap: _Pending) -> None:
        """Persist this instance's part of snapshot ``sid``; a sink stages its output
        under epoch ``sid``; then report it (after both are durable)."""
        blob = {
            "id": sid,
            "core": snap.state,
            # Plain tuples, not Batch objects: the blob stays marshal-able (``ftctl.codec``).
            "channels": {ch: [(b.records, b.seq, b.watermark) for b in batches]
                         for ch, batches in snap.channel_state.items()},
        }
        me = self.me.id
        acts: list[InstanceAction] = [Persist(me, sid, blob)]
        if self.me.is_sink:
            acts.append(StageOutput(me, sid, snap.output))
        acts.append(Report(Persisted(sid)))
        if sid in self.snapshotting:
            self.snapshotting.discard(sid)
            acts.append(DeclarePhase("snapshotting", False, sid))
        self._put(*acts)

    def on_output(self, slot: InstanceId, records: list[tuple[Any, Any]]
                  ) -> list[InstanceAction]:
        self.held += records  # a sink's output waits for its snapshot
        return []

    def _take_output(self) -> list[Any]:
        """A sink's output since the last snapshot began, for the one beginning now."""
        self.out += self.output(self.me.id)
        out, self.held = self.held, []
        return out

    def _forward(self, marker: Marker) -> list[InstanceAction]:
        return [Send(ch, marker) for ch in self.me.out_channels]

    def _put(self, *acts: InstanceAction) -> None:
        """Protocol actions, after what the core produced so far (sends keep their order)."""
        self.out += self.output(self.me.id)
        self.out.extend(acts)

    def _take(self) -> list[InstanceAction]:
        out, self.out = self.out, []
        out += self.output(self.me.id)
        return out
