"""Recovery of a failed instance, pure: what its children logged in, a plan out
(spec causal.md R1-R6, M1). No protocol state, no I/O: the coordinator calls these, and
tests reproduce the spec's worked examples with them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocols.shared.treeclock import Plain, TreeClock, plain_child, t_min_of

ReplayEvent = tuple[int, str | None, int]  # (B time, parent id, parent time)


def observations(dlog: Iterable[tuple[int, Plain]], via: Sequence[str]) -> list[Plain]:
    """The subtrees rooted at ``via[-1]`` in the diffs of a diff log, read along ``via``.

    ``via[0]`` is the sender at level 1 of each diff, ``via[1]`` its cause at level 2, and
    so on: ``[B]`` reads a child's log of B's channel; ``[C, B]`` reads, in a log of C's
    channel, the B events that caused C's. Each subtree is B's own diff as logged: its
    root ``(B, B-time)`` and, below it, its cause (if the diff kept that level).
    """
    out: list[Plain] = []
    for _, diff in dlog:
        node: Plain | None = diff
        for x in via:
            node = plain_child(node, x) if node is not None else None
        if node is not None:
            out.append(node)
    return out


@dataclass(frozen=True)
class RecoveryPlan:
    """What the coordinator tells B' and its neighbours (spec causal.md R1-R6)."""

    t: dict[str, int]  # per child: B's time in the child's level-1 entry (R1)
    t_min: int
    tstar: TreeClock  # R2
    children: dict[str, int]  # B' sends to each child from 1 + t (R5)
    parents: dict[str, int]  # each parent resends from 1 + R[A] (R4)
    replay: list[ReplayEvent]  # observed B events after the restore time, by B-time (R6)


def plan_recovery(b: str, child_clocks: Mapping[str, TreeClock], trees: Iterable[Plain],
                  parents: Iterable[str], restore: TreeClock | None = None,
                  after: int | None = None,
                  floor: Mapping[str, int] | None = None,
                  bases: Iterable[Plain] = ()) -> RecoveryPlan:
    """The recovery of ``b`` from what its children (and survivors below them) logged.

    ``child_clocks``: each child's clock (a failed child's restore clock); ``trees``: every
    logged subtree rooted at ``b`` (``observations``). ``restore`` is B's restore clock R:
    a local snapshot's clock, or None for the paper's stateless case, where R is T*.
    ``after``: replay events with a B-time above it (default R's time). ``floor``: per
    child, the B-time its durable restore clock holds (spec T2); a stateless B' starts
    no later than it, so its payload log holds everything that child may ask for again.
    ``bases``: subtrees rooted at ``b`` of a failed stateless child's T*, merges rather
    than single events, so they feed T* but name no cause.
    """
    t = {c: t_min_of(b, [clock]) for c, clock in child_clocks.items()}
    low = t if floor is None else {c: min(v, floor.get(c, 0)) for c, v in t.items()}
    tmin = min(low.values(), default=0)
    trees = list(trees)
    tstar = TreeClock(b)
    for node in (*trees, *bases):
        if node[1] <= tmin:
            tstar.apply_plain(node)
    tstar.time = tmin
    rclock = restore if restore is not None else tstar
    cut = rclock.time if after is None else after
    parents = list(parents)
    causes: dict[int, tuple[str | None, int]] = {}
    for node in trees:
        if node[1] <= cut:
            continue
        if node[2]:
            causes[node[1]] = (node[2][0][0], node[2][0][1])
        elif parents:
            # A bare diff of an instance with inputs: its end-of-stream flush, an event
            # with no input batch (N5). Observed, so complete (R7); B' regenerates it
            # when its inputs end.
            causes.setdefault(node[1], (None, 0))
    return RecoveryPlan(
        t=t, t_min=tmin, tstar=tstar,
        children={c: 1 + v for c, v in t.items()},
        parents={a: 1 + t_min_of(a, [rclock]) for a in parents},
        replay=[(bt, p, pt) for bt, (p, pt) in sorted(causes.items())])


class CausalIncomplete(RuntimeError):
    """Spec R7/R8 broken within f: the children's logs do not hold what recovery needs, or
    the replay did not rebuild the causal history they rely on. An internal error (a bug
    in logging, trimming or answering), never a reason to fall back: the run fails."""


def unobserved(replay: Iterable[ReplayEvent], after: int, upto: int) -> list[int]:
    """Spec R7: the B-times in (``after``, ``upto``] no survivor logged with its cause.

    ``after`` is the restored time s, ``upto`` the largest B-time a child saw (max_j t_j).
    Every event of a non-sink instance sends on every output (N5) and channels are FIFO,
    so the child that saw ``upto`` logged every B-time up to it: a gap means a diff-log
    entry was lost or trimmed too early, and B' could not place that event.
    """
    seen = {e[0] for e in replay}
    return [t for t in range(after + 1, upto + 1) if t not in seen]


def longest_failed_path(members: Collection[str],
                        downstream: Callable[[str], Iterable[str]]) -> int:
    """L of spec M1: the number of instances on the longest directed path of a failed
    component (a dataflow graph is acyclic)."""
    memo: dict[str, int] = {}

    def longest(n: str) -> int:
        if n not in memo:
            memo[n] = 1 + max((longest(c) for c in downstream(n) if c in members), default=0)
        return memo[n]

    return max((longest(m) for m in members), default=0)
