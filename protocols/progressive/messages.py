"""Reports and controls of ``progressive`` (plain fields: the kernel's codec carries them)."""

from __future__ import annotations

from dataclasses import dataclass

from protocols.contract.messages import Ended, Msg, Persisted

PUNCTUATION = "punct"  # marker P_k: id k; meta = (gen, channel position at send)
MINI_BATCH = "mb"  # marker mb(b): id b; meta = (gen, channel position at send)
FINAL = 2**31 - 1  # the punctuation of end of stream: every instance's last snapshot
SINK_COUNTS = 0  # storage ref of a sink's visible counts per record identity (the base)
# A sink's visible counts change with every output: each output stores only the counts it
# changed, under the next of these refs (a chain after the base, which a chain at its
# longest ends in). Below every punctuation, so a rollback's discard of later snapshots
# keeps them.
SINK_DELTAS = tuple(range(-1, -65, -1))


@dataclass(frozen=True, slots=True)
class Recover(Msg):
    """Control to a live instance (R8): roll back to punctuation ``to`` kept in memory,
    take generation ``gen`` and recovery ``mode`` (blocking or progressive)."""

    to: int
    gen: int
    mode: str


@dataclass(frozen=True, slots=True)
class Init(Msg):
    """``Restart.init`` of a replacement: the episode's generation, mode and restore point."""

    gen: int
    mode: str
    k: int


@dataclass(frozen=True, slots=True)
class Ready(Msg):
    """Report of a started replacement: the next ``seq`` it wants per input channel."""

    resume: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Resend(Msg):
    """Control: serve ``channel`` from batch ``start`` on out of the recovery buffer."""

    channel: int
    start: int


@dataclass(frozen=True, slots=True)
class Trim(Msg):
    """Control to a source: ``cp(P_upto)`` is complete; drop what was sent before it."""

    upto: int


@dataclass(frozen=True, slots=True)
class Normal(Msg):
    """Control: recovery is over with ``cp(P_at)`` complete; buffers off, sources trim."""

    at: int


@dataclass(frozen=True, slots=True)
class Checkpointed(Persisted):
    """Report (R2): the instance's part of ``P_snapshot`` is durable, taken in generation
    ``gen``. One sent before the instance took a rollback is stale, like a message of an
    older generation (R17): that snapshot was discarded (R8) or belongs to the old run."""

    gen: int = 0


@dataclass(frozen=True, slots=True)
class Finished(Ended):
    """Report: the instance passed end of stream in generation ``gen``. One sent before
    the instance took a rollback is stale: the rollback sends it back to ``P_k``, from
    where it ends again in the new generation."""

    gen: int = 0


MESSAGES: tuple[type[Msg], ...] = (Recover, Init, Ready, Resend, Trim, Normal, Checkpointed,
                                   Finished)
