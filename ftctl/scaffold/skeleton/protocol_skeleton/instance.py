"""``Instance``: reads its inputs in a fixed rotation, snapshots locally, replays on restart.

It builds on ``LoggedInstance`` (``protocols/shared/logged.py``), which keeps a payload log
per output channel, answers ``Resend`` and ``TrimPayloadLog`` controls, drops batches a
receiver already has, and de-duplicates a sink's output. This class adds the fixed input
order, the snapshots and the restart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch
from protocols.contract import (
    BatchIn,
    InstanceAction,
    InstanceId,
    InstanceView,
    MarkerIn,
    Send,
    Started,
)
from protocols.contract.logic import EOS
from protocols.shared.logged import LoggedInstance, Ready

from .messages import LocalSnapshot
from .params import Params

SNAPSHOT = 1  # the instance's newest snapshot, overwritten in place
VISIBLE = 2  # a sink's visible-record counts, written with every output


class Instance(LoggedInstance[Params]):
    def __init__(self, me: InstanceView, cores: Mapping[InstanceId, InstanceCore],
                 params: Params):
        super().__init__(me, cores, params)
        inputs = self.core.inputs
        self.queued: dict[int, deque[Batch]] = {ch: deque() for ch in inputs}
        self.received = dict.fromkeys(inputs, 0)  # newest batch accepted, read or queued
        self.final: dict[int, int] = {}  # channel -> its last batch, from end of stream
        self.turn = 0  # the rotation: which input is read next
        self.since_snapshot = 0

    # ------------------------------------------------------------ restart

    def start(self, ev: Started) -> None:
        snapshot = ev.extra.get(SNAPSHOT)
        if snapshot is not None:
            self.restore(snapshot)
        self.restore_visible(ev.extra.get(VISIBLE))
        if ev.reason != "restart":
            return
        # A running child may be behind this snapshot: offer what the log holds (it
        # drops what it has), then ask the parents for everything after the snapshot.
        for ch, log in self.plog.items():
            self.out += [Send(ch, b) for b in log]
        if self.core.inputs:
            self.report(Ready({ch: self.pos[ch] + 1 for ch in self.core.inputs}))
        elif not self.more:
            self.close_outputs()  # a source restored at its end

    def restore_visible(self, visible: Any) -> None:
        """A sink: what it already made visible, so a replay does not show it again."""
        if visible is not None:
            self.emitted = dict(visible)

    def restore(self, blob: Any) -> None:
        core = self.core
        core.restore_state(blob["core"])
        self.pos = dict(blob["pos"])
        self.received = dict(self.pos)
        self.turn = blob["turn"]
        self.seen = dict(blob["seen"])
        for ch, batches in blob["log"].items():
            for records, seq, watermark, meta in batches:
                self.plog[ch].append(seq, Batch(list(records), seq, watermark, meta))
        self.more = not core.exhausted

    def snapshot(self) -> None:
        self.since_snapshot = 0
        # Copies: the simulation's store keeps the blob object as it is given.
        log = {ch: [(list(b.records), b.seq, b.watermark, b.meta) for b in batches]
               for ch, batches in self.plog.items()}
        self.persist(SNAPSHOT, {"core": self.core.snapshot_state(), "pos": dict(self.pos),
                                "turn": self.turn, "seen": dict(self.seen), "log": log})
        if self.core.inputs:
            # Delivered only once the snapshot is durable (the kernel's rule for reports).
            self.report(LocalSnapshot(self.trim_points()))

    def trim_points(self) -> dict[int, int]:
        """Per input, the last batch its parent may forget: what this snapshot has read."""
        return dict(self.pos)

    # ------------------------------------------------------------ input, in a fixed order

    def on_batch(self, ev: BatchIn, now: float) -> list[InstanceAction]:
        ch, batch = ev.channel, ev.batch
        if batch.seq == self.received[ch] + 1:  # older: a duplicate; newer: a gap a resend fills
            self.received[ch] = batch.seq
            self.queued[ch].append(batch)
            self.read()
        return self.flush()

    def on_marker(self, ev: MarkerIn, now: float) -> list[InstanceAction]:
        if ev.marker.kind == EOS and ev.marker.meta is not None:
            self.final[ev.channel] = ev.marker.meta
            self.read()
        return self.flush()

    def read(self) -> None:
        """Read queued input in the rotation until the input whose turn it is has none."""
        core = self.core
        inputs = core.inputs
        while len(core.finished) < len(inputs):
            ch = inputs[self.turn % len(inputs)]
            if ch in core.finished:
                self.turn += 1
            elif self.queued[ch]:
                batch = self.queued[ch].popleft()
                self.turn += 1
                self.pos[ch] = batch.seq
                self.process(ch, batch)
                self.after_step()
            elif self.final.get(ch) == self.pos[ch]:
                self.turn += 1
                self.on_eos(ch)
            else:
                return

    def step(self) -> None:
        """A source's next batch."""
        super().step()
        if self.more:
            self.after_step()

    def after_step(self) -> None:
        self.since_snapshot += 1
        if self.since_snapshot >= self.params.snapshot_every:
            self.snapshot()

    # ------------------------------------------------------------ sinks

    def persist_sink(self, out: list[tuple[Any, Any]]) -> None:
        # In the same step as the output: a crash cannot separate them.
        self.persist(VISIBLE, dict(self.emitted))
