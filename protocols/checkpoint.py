"""``checkpoint``: asynchronous snapshots with channel state (Noir), or aligned (Flink ABS).

Sources inject snapshot tokens on a timer. With ``alignment: unaligned`` (the Noir
algorithm) an instance copies its state at the first token ``i``, forwards the token at
once, and keeps processing every channel, while it also records the tuples arriving on
channels whose token ``i`` has not come yet; when token ``i`` has come from every input it
persists the copied state plus those recorded tuples (the channel state). With
``alignment: aligned`` a channel is blocked once its token arrives; when all have come,
the state is persisted, the token forwarded and the blocked tuples processed.

End of stream is the last, aligned snapshot ``FINAL``: an instance whose inputs have all
ended persists its final state and all pending output, then passes end-of-stream on. A
channel that has ended counts as having delivered every later token.

Snapshot ``i`` is complete when every instance persisted it. Recovery is a global
rollback: every instance restarts from the latest complete snapshot, sources rewind to
its offsets, restored instances first re-process their channel state. Sinks are
transactional: what a sink emits before token ``i`` is stored with its part of snapshot
``i`` and becomes visible when the coordinator sees ``i`` complete, so the visible output
is exactly-once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from ftctl.runtime.instance import InstanceCore
from ftctl.runtime.messages import Batch, Marker, Message
from protocols.base import (
    Commit,
    CoordinatorProtocol,
    Discard,
    Event,
    InstanceProtocol,
    PlanStep,
    Start,
    Stop,
)
from protocols.contract.params import ProtocolParams, RunShape

SNAPSHOT = "snapshot"
CLUSTER_INTERVAL = 1.0  # seconds between snapshots on a cluster when interval is "auto"


class CheckpointParams(ProtocolParams):
    """``--param`` keys of ``checkpoint``."""

    interval: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        default="auto", description="Seconds between snapshot tokens at the sources; auto: "
        f"{CLUSTER_INTERVAL:g} s on a cluster, an eighth of the run in simulation (so every "
        "simulated run takes several snapshots whatever its length).")
    alignment: Literal["unaligned", "aligned"] = Field(
        default="unaligned", description="unaligned: Noir's snapshots with channel state; "
        "aligned: Flink's barrier alignment.")

    def for_run(self, shape: RunShape) -> CheckpointParams:
        if self.interval != "auto":
            return self
        return self.model_copy(update={"interval": shape.period(CLUSTER_INTERVAL)})

    def seconds(self) -> float:
        """The interval of a resolved run (``for_run`` replaced ``"auto"``)."""
        if self.interval == "auto":
            raise ValueError("checkpoint interval not resolved for the run")
        return self.interval

FINAL = 2**31 - 1  # id of the snapshot taken at end of stream


@dataclass
class _Pending:
    """A snapshot an instance has started but not yet persisted."""

    state: dict[str, Any]
    waiting: set[int]
    output: list[Any]
    channel_state: dict[int, list[Batch]] = field(default_factory=dict)


class CheckpointInstance(InstanceProtocol):
    def __init__(self, core: InstanceCore, params: CheckpointParams, blob: Any, init: Any):
        super().__init__(core, params, blob, init)
        self.aligned = params.alignment == "aligned"
        self.interval = params.seconds()
        self.pending: dict[int, _Pending] = {}
        self.blocked: dict[int, list[Message]] = {}  # aligned: channel -> held messages
        self.aligning: _Pending | None = None
        self.aligning_id = 0
        self.next_token = 1
        self.next_token_at: float | None = None
        core.hold_output = core.is_sink
        if blob is not None:
            core.restore_state(blob["core"])
            self.next_token = blob["id"] + 1
            # Channel state first: tuples that were in flight when the snapshot was cut.
            for ch, batches in sorted(blob["channels"].items()):
                for records, seq, watermark in batches:
                    core.deliver(ch, Batch(records, seq, watermark))

    # ------------------------------------------------------------ sources

    def on_step(self, now: float) -> bool:
        if self.next_token_at is None:
            self.next_token_at = now + self.interval
        elif now >= self.next_token_at:
            self.next_token_at = now + self.interval
            self._source_token()
        more = self.core.source_next()
        if not more:
            self.finish()
        return more

    def _source_token(self) -> None:
        sid = self.next_token
        self.next_token += 1
        state = self.core.snapshot_state()
        self.core.send_marker(Marker(SNAPSHOT, sid))
        self._persist(sid, _Pending(state, set(), []))

    # ------------------------------------------------------------ inner instances

    def on_message(self, ch: int, msg: Message) -> None:
        if self.aligned and ch in self.blocked:
            self.blocked[ch].append(msg)
            return
        if isinstance(msg, Batch):
            for snap in self.pending.values():
                if ch in snap.waiting:
                    snap.channel_state.setdefault(ch, []).append(msg)
            self.core.deliver(ch, msg)
        else:
            super().on_message(ch, msg)

    def on_marker(self, ch: int, marker: Marker) -> None:
        if marker.kind != SNAPSHOT:
            return
        if self.aligned:
            self._aligned_token(ch, marker)
            return
        snap = self.pending.get(marker.id)
        if snap is None:
            waiting = set(self.core.inputs) - self.core.finished - {ch}
            snap = _Pending(self.core.snapshot_state(), waiting, self._take_output())
            self.core.send_marker(marker)
            self.pending[marker.id] = snap
        else:
            snap.waiting.discard(ch)
        if not snap.waiting:
            del self.pending[marker.id]
            self._persist(marker.id, snap)

    def on_eos(self, ch: int) -> None:
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
                self._persist(sid, snap)
        if self.aligning is not None:
            self.aligning.waiting.discard(ch)
            if not self.aligning.waiting:
                self._aligned_complete()
        if all_ended:
            self.finish()

    def finish(self) -> None:
        # All inputs ended (or the source ran dry): the final snapshot is aligned by nature.
        self._persist(FINAL, _Pending(self.core.snapshot_state(), set(), self._take_output()))
        super().finish()

    def _aligned_token(self, ch: int, marker: Marker) -> None:
        if self.aligning is None:
            self.aligning_id = marker.id
            self.aligning = _Pending({}, set(self.core.inputs) - self.core.finished, [])
        self.aligning.waiting.discard(ch)
        self.blocked[ch] = []
        if not self.aligning.waiting:
            self._aligned_complete()

    def _aligned_complete(self) -> None:
        sid = self.aligning_id
        snap = _Pending(self.core.snapshot_state(), set(), self._take_output())
        self.aligning = None
        self._persist(sid, snap)
        self.core.send_marker(Marker(SNAPSHOT, sid))
        held = [(c, m) for c, msgs in sorted(self.blocked.items()) for m in msgs]
        self.blocked.clear()
        for c, m in held:
            self.on_message(c, m)

    def _take_output(self) -> list[Any]:
        out, self.core.pending_output = self.core.pending_output, []
        return out

    def _persist(self, sid: int, snap: _Pending) -> None:
        blob = {
            "id": sid,
            "core": snap.state,
            # Plain tuples, not Batch objects: the blob stays marshal-able (``ftctl.codec``).
            "channels": {ch: [(b.records, b.seq, b.watermark) for b in batches]
                         for ch, batches in snap.channel_state.items()},
            "output": snap.output,
        }
        from ftctl.runtime.actions import Persist

        self.core.actions.append(Persist(sid, self.core.id, blob))
        self.report("persisted", sid)


class CheckpointCoordinator(CoordinatorProtocol):
    def __init__(self, graph: Any, params: CheckpointParams):
        super().__init__(graph, params)
        self.persisted: dict[int, set[str]] = {}
        self.complete = 0  # 0: the initial state, complete by definition
        self.everyone = set(graph.order)
        self.incarnation = 0

    def on_report(self, instance: str, kind: str, data: Any, now: float) -> list[PlanStep]:
        if kind != "persisted":
            return super().on_report(instance, kind, data, now)
        if data <= self.complete:
            return []
        got = self.persisted.setdefault(data, set())
        got.add(instance)
        # An instance that ended never persists later regular ids: those never complete,
        # and the final snapshot (aligned at end of stream) is the next to complete.
        if got != self.everyone:
            return []
        # Snapshots complete in id order on every instance, so every older one is done too.
        self.complete = data
        for sid in [s for s in self.persisted if s <= data]:
            del self.persisted[sid]
        return [Commit(data), Event("snapshot-complete", {"snapshot": data})]

    def on_failure(self, failed: set[str], now: float) -> list[PlanStep]:
        if self.complete == FINAL:
            return [Event("ignored", {"failed": sorted(failed), "reason": "run finished"})]
        self.incarnation += 1
        self.persisted.clear()
        self.eos_sent.clear()
        k = self.complete
        steps: list[PlanStep] = [
            Stop(list(self.graph.order)),
            Discard(k),
            Event(
                "rollback",
                {"failed": sorted(failed), "snapshot": k, "incarnation": self.incarnation},
            ),
        ]
        steps += [Start(i, restore=k or None) for i in self.graph.order]
        return steps

    def finished(self) -> bool:
        return self.complete == FINAL
