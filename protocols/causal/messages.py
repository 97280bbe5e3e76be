"""What ``causal``'s coordinator and instances tell each other (besides the shared
``Resend``/``TrimPayloadLog``/``Ready`` of ``protocols/shared/logged.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from protocols.causal.recovery import ReplayEvent
from protocols.contract.messages import Msg
from protocols.contract.names import ChannelId
from protocols.shared.logged import Resend
from protocols.shared.treeclock import Plain, TreeClock

# ---------------------------------------------------------------- init


@dataclass(frozen=True, slots=True)
class CausalInit(Msg):
    """Every start's init: the run's ``epoch`` (a whole-graph fallback starts a new one;
    snapshots of older epochs are stale), whether the instance ``recover``s (holds its
    input until its ``Plan``), and each input channel by its parent's id (a diff names
    instances, not channels: one channel per parent and child in these graphs)."""

    epoch: int = 0
    recover: bool = False
    parents: Mapping[str, ChannelId] = field(default_factory=dict)
    # Which incarnation this is: the id of the recovery that restarted it (0: started by
    # the run or a fallback). A RESUME names the incarnation it is for (``Marker.id``).
    incarnation: int = 0


# ---------------------------------------------------------------- controls


@dataclass(frozen=True, slots=True)
class Query(Msg):
    """Recovery ``rid`` of ``about``: what does this instance's diff log say about it,
    read along ``via`` (from this instance's parent down to ``about``; spec M3)?"""

    about: str
    via: tuple[str, ...]
    rid: int


@dataclass(frozen=True, slots=True)
class Plan(Msg):
    """A replacement's recovery: resend to each output channel from ``resume[channel]``,
    process the observed events ``replay`` in B-time order; every B-time up to ``upto``
    (the newest a child saw) must be among them (spec R7), and afterwards the clock must
    cover ``tstar`` (R8)."""

    replay: Sequence[ReplayEvent]
    resume: Mapping[ChannelId, int]
    tstar: TreeClock
    upto: int = 0
    # Per output channel in ``resume``: the incarnation of the child it resumes.
    to: Mapping[ChannelId, int] = field(default_factory=dict)
    # Per output channel in ``resume``: the child's position on it (the seq of the last
    # batch it has), where a quiet replacement's numbering resumes (``CausalInstance``).
    pos: Mapping[ChannelId, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResendTo(Resend):
    """``Resend`` to one incarnation of the child (``CausalInit.incarnation``): a resend
    asked for an earlier one that reaches a newer one, delayed on the way or sent once the
    sender caught up, is not its resend."""

    to: int = 0


@dataclass(frozen=True, slots=True)
class TrimDiffLog(Msg):
    """``src`` persisted a local snapshot at time ``upto``: diff-log entries of
    ``channel`` about ``src`` up to it are never needed again."""

    channel: ChannelId
    upto: int
    src: str


@dataclass(frozen=True, slots=True)
class FoldDiffLog(Msg):
    """A stateless parent's g moved (spec T3): fold the prefix of ``channel``'s diff log
    whose every instance at levels 1..f is at or below its ``g`` (the lowest time any
    recovery restarts it from) into one entry, their merge. No recovery reads those
    entries one by one: each lies at or below every t_min that could ask for it."""

    channel: ChannelId
    g: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Durable(Msg):
    """To a stateless instance: every child's durable restore clock holds its time
    ``upto`` (g, spec T3); no recovery restarts it earlier (T2)."""

    upto: int


# ---------------------------------------------------------------- reports


@dataclass(frozen=True, slots=True)
class LocalSnapshot(Msg):
    """A local snapshot is durable: per input channel the sender time of the last batch
    it covers (its level-1 clock entries: the parents trim their payload logs to them,
    spec T2) and its time (the children trim their diff logs)."""

    ptime: Mapping[ChannelId, int]
    time: int


@dataclass(frozen=True, slots=True)
class Covered(Msg):
    """A stateless instance's answer to ``Durable``: per input channel, the sender time
    of the last batch it had processed at that time, its T* there: the parents trim their
    payload logs to it (spec T2)."""

    ptime: Mapping[ChannelId, int]


@dataclass(frozen=True, slots=True)
class Restored(Msg):
    """A replacement runs and holds its input: ``clock`` is its restore clock R (its
    local snapshot's, and for a sink the level-1 entries of its last visible output).
    Each parent A resends from 1 + R[A] once the plan is made (spec R4)."""

    clock: TreeClock | None  # None: a stateless replacement, whose R is T* (spec R3)


@dataclass(frozen=True, slots=True)
class Answer(Msg):
    """The answer to ``Query`` ``rid``: this instance's position on ``channel``, its
    clock, and the subtrees rooted at ``about`` its diff log holds, read along ``via``."""

    rid: int
    about: str
    via: tuple[str, ...]
    channel: ChannelId
    pos: int
    clock: TreeClock
    trees: Sequence[Plain]


@dataclass(frozen=True, slots=True)
class Replayed(Msg):
    """The replacement processed every observed event of its plan."""


MESSAGES: tuple[type[Msg], ...] = (CausalInit, Query, Plan, ResendTo, TrimDiffLog, FoldDiffLog,
                                   Durable,
                                   LocalSnapshot, Covered, Restored, Answer, Replayed)
