"""The exactly-once checker: a sink's output against the golden run's.

Anomalies per sink: ``lost`` (in golden, missing from the output), ``duplicated`` (more
copies than golden), ``unexpected`` (never in golden, or for final-per-key a final value
golden does not have) and ``reordered`` (ordered-per-key: same records, other order).
A verdict holds when the anomalies fit a guarantee: at-most-once tolerates ``lost``,
at-least-once tolerates ``duplicated`` (and the reordering replays cause); ``none`` (no
delivery promise) tolerates every anomaly: only an unfinished run fails it.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from protocols.contract.spec import Guarantee

Out = list[tuple[Any, Any]]


@dataclass
class Divergence:
    key: Any
    index: int
    expected: Any
    actual: Any

    def describe(self) -> str:
        return f"key {self.key!r} @{self.index}: expected {self.expected!r}, got {self.actual!r}"


@dataclass
class SinkVerdict:
    sink: str
    mode: str
    golden_records: int
    output_records: int
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    reordered: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    def anomalies(self) -> dict[str, int]:
        return {k: v for k, v in (("lost", self.lost), ("duplicated", self.duplicated),
                                  ("unexpected", self.unexpected),
                                  ("reordered", self.reordered)) if v}

    def holds(self, guarantee: Guarantee) -> bool:
        if guarantee is Guarantee.NONE:
            return True
        if guarantee is Guarantee.EXACTLY_ONCE:
            return not self.anomalies()
        if guarantee is Guarantee.AT_LEAST_ONCE:
            return self.lost == 0 and self.unexpected == 0
        return self.duplicated == 0 and self.unexpected == 0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["divergences"] = [
            {"key": repr(x.key), "index": x.index, "expected": repr(x.expected),
             "actual": repr(x.actual)} for x in self.divergences]
        return d


def _multiset_counts(golden: Counter[Any], output: Counter[Any]) -> tuple[int, int, int]:
    lost = dup = unexpected = 0
    for r, g in golden.items():
        o = output.get(r, 0)
        if o < g:
            lost += g - o
        elif o > g:
            dup += o - g
    for r, o in output.items():
        if r not in golden:
            unexpected += o
    return lost, dup, unexpected


def index_by_key(records: Iterable[tuple[Any, Any]]) -> dict[Any, list[Any]]:
    d: dict[Any, list[Any]] = defaultdict(list)
    for k, v in records:
        d[k].append(v)
    return d


def _first_diff(expected: list[Any], actual: list[Any]) -> int:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        if e != a:
            return i
    return min(len(expected), len(actual))


def record_counts(golden: dict[str, Out], modes: dict[str, str]) -> dict[str, Counter[Any]]:
    """Each multiset sink's golden records counted, for ``compare``'s ``golden_counts``
    (a sink whose records do not hash is left out: it is compared key by key)."""
    counts: dict[str, Counter[Any]] = {}
    for name, mode in modes.items():
        if mode == "multiset":
            with contextlib.suppress(TypeError):
                counts[name] = Counter(golden.get(name, []))
    return counts


def record_positions(golden: dict[str, Out], modes: dict[str, str]) -> dict[str, dict[Any, int]]:
    """Each multiset sink's golden records with their places in golden's output, for
    ``compare``'s ``golden_positions``: only a sink whose golden records are all distinct
    and hash (a record seen twice has no one place)."""
    places: dict[str, dict[Any, int]] = {}
    for name, mode in modes.items():
        records = golden.get(name, [])
        if mode != "multiset" or not records:
            continue
        with contextlib.suppress(TypeError):
            first = dict(zip(records, range(len(records)), strict=True))
            if len(first) == len(records):
                places[name] = first
    return places


# A rearrangement in runs this short (on average) is no cheaper to prove than to count.
MIN_RUN = 16


def rearranged(output: Out, golden: Out, places: dict[Any, int]) -> bool:
    """Whether ``output`` is ``golden``'s records in another order, proved run by run:
    each run of ``output`` equals, record by record, a stretch of ``golden`` that starts
    where ``places`` puts its first record, no two stretches overlap, and together they
    are as long as ``golden``. A schedule's output is golden's in runs of a batch or more
    (a sink's inputs interleave batch by batch), so this hashes one record a run, where
    counting hashed every record into a dict of a million (most of the check on Nexmark
    q0). False also when the runs are too short to be worth it: ``_same_multiset``
    decides then. Exact either way: only equal records are matched, each place once."""
    n = len(golden)
    if len(output) != n:
        return False
    taken = bytearray(n)
    runs = i = 0
    while i < n:
        runs += 1
        if runs * MIN_RUN > n:
            return False
        try:
            j = places.get(output[i])
        except TypeError:  # a record that does not hash is no golden one
            return False
        if j is None:
            return False
        length = _run_length(output, i, golden, j)
        if taken.find(1, j, j + length) != -1:
            return False
        taken[j:j + length] = b"\x01" * length
        i += length
    return True


def _run_length(a: Out, i: int, b: Out, j: int) -> int:
    """How many records from ``a[i]`` on equal those from ``b[j]`` on (at least 1: the
    caller found ``a[i]`` at ``b[j]``). Slices compared in C: doubling until one differs,
    then halving the rest; each record is compared about twice."""
    most = min(len(a) - i, len(b) - j)
    same, step = 1, 1
    while same < most:
        end = min(same + step, most)
        if a[i + same:i + end] != b[j + same:j + end]:
            break
        same, step = end, step * 2
    else:
        return same
    hi = min(same + step, most)  # a[i + hi - 1] is not known equal
    while hi - same > 1:
        mid = (same + hi) // 2
        if a[i + same:i + mid] == b[j + same:j + mid]:
            same = mid
        else:
            hi = mid
    return same


def _same_multiset(output: Out, golden_counts: Counter[Any]) -> bool:
    try:
        # dict's own comparison, in C: Counter's walks both in Python (both hold only
        # positive counts, so the two agree).
        return dict.__eq__(Counter(output), golden_counts) is True
    except TypeError:  # a record that does not hash: compared key by key
        return False


def compare(sink: str, mode: str, golden: Out, output: Out, max_divergences: int = 5,
            golden_by_key: dict[Any, list[Any]] | None = None,
            golden_counts: Counter[Any] | None = None,
            golden_positions: dict[Any, int] | None = None) -> SinkVerdict:
    """Judge one sink. ``golden_by_key`` may carry ``index_by_key(golden)`` precomputed,
    and for a multiset sink ``golden_counts`` its records counted (``record_counts``) and
    ``golden_positions`` their places (``record_positions``)."""
    v = SinkVerdict(sink, mode, len(golden), len(output))
    # A multiset sink whose records are golden's rearranged, or counted are golden's, has
    # every key's values as a multiset too: nothing to find, and a million records need
    # no index by key.
    if mode == "multiset" and len(output) == len(golden) and (
            (golden_positions is not None and rearranged(output, golden, golden_positions))
            or (golden_counts is not None and _same_multiset(output, golden_counts))):
        return v
    divs: list[Divergence] = []
    if mode == "final-per-key":
        g_final = {k: val for k, val in golden}
        o_final = {k: val for k, val in output}
        for k, gv in g_final.items():
            if k not in o_final:
                v.lost += 1
                divs.append(Divergence(k, 0, gv, None))
            elif o_final[k] != gv:
                v.unexpected += 1
                divs.append(Divergence(k, 0, gv, o_final[k]))
        for k, ov in o_final.items():
            if k not in g_final:
                v.unexpected += 1
                divs.append(Divergence(k, 0, None, ov))
    else:
        g_keys = golden_by_key if golden_by_key is not None else index_by_key(golden)
        o_keys = index_by_key(output)
        for k in g_keys.keys() | o_keys.keys():
            gs, os_ = g_keys.get(k, []), o_keys.get(k, [])
            if gs == os_:
                continue
            if mode == "multiset" and Counter(gs) == Counter(os_):
                continue  # same records, another interleaving: fine for a multiset
            lost, dup, unexp = _multiset_counts(Counter(gs), Counter(os_))
            v.lost += lost
            v.duplicated += dup
            v.unexpected += unexp
            if not (lost or dup or unexp):
                v.reordered += 1
            if mode == "multiset":
                gs, os_ = sorted(gs, key=repr), sorted(os_, key=repr)
            i = _first_diff(gs, os_)
            divs.append(Divergence(k, i, gs[i] if i < len(gs) else None,
                                   os_[i] if i < len(os_) else None))
    divs.sort(key=lambda d: repr(d.key))
    v.divergences = divs[:max_divergences]
    return v


def not_prefix(mode: str, golden_by_key: dict[Any, list[Any]], output: Out,
               guarantee: Guarantee = Guarantee.EXACTLY_ONCE) -> int:
    """Keys whose output a run that stopped early must not have made visible: exactly-once,
    not a start of golden's (for a multiset sink: not a part of it); at-most-once, not a
    part of it; at-least-once, a record golden lacks; no delivery promise, none. A
    final-per-key sink promises only each key's last value, and the values before it
    depend on the interleaving (on Nexmark q4 at 50,000 events, three fault-free runs
    gave category 10 three different first means): a stopped run's may only lack keys
    golden has, not show a key golden lacks."""
    if guarantee is Guarantee.NONE:
        return 0
    bad = 0
    for k, got in index_by_key(output).items():
        want = golden_by_key.get(k, [])
        if mode == "final-per-key":
            bad += k not in golden_by_key
        elif guarantee is Guarantee.AT_LEAST_ONCE:
            bad += not set(got) <= set(want)
        elif mode == "multiset" or guarantee is not Guarantee.EXACTLY_ONCE:
            bad += not Counter(got) <= Counter(want)
        else:
            bad += got != want[:len(got)]
    return bad


@dataclass
class Verdict:
    """All sinks of one run, judged against one guarantee.

    A run the protocol stopped (``stopped``: why, e.g. "corrupt snapshot 3 of map[0]")
    neither passed nor, by itself, violated anything: it stopped safely when every sink's
    output so far is a start of golden's (``wrong`` counts the keys where it is not).
    Silently wrong output is a violation, stopped or not.
    """

    guarantee: Guarantee
    sinks: list[SinkVerdict]
    complete: bool = True
    stopped: str | None = None
    wrong: int = 0
    # Breaches of the phase contract, where the run was judged on it (the kit's
    # phase-triggered cases, ftctl/sim/phase_faults.py): kind -> count.
    phases: dict[str, int] = field(default_factory=dict)
    # Live units suspected, fenced or taken over, where the run was judged on it (runs
    # drawing clock faults, ftctl/sim/suspicions.py): kind -> count.
    suspicions: dict[str, int] = field(default_factory=dict)
    # Breaches of the protocol's own history checks (``ProtocolSpec.checks``): kind -> count.
    checks: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return (self.stopped is None and self.complete and not self.phases
                and not self.suspicions and not self.checks
                and all(s.holds(self.guarantee) for s in self.sinks))

    @property
    def stopped_safely(self) -> bool:
        """A breach of the phase contract, a false suspicion or of the protocol's own
        checks is a violation, stopped or not."""
        return (self.stopped is not None and self.wrong == 0 and not self.phases
                and not self.suspicions and not self.checks)

    @property
    def outcome(self) -> str:
        """``exactly-once`` (or the guarantee that held), ``stopped safely: WHY`` or
        ``violated``."""
        if self.passed:
            return self.guarantee.value
        return f"stopped safely: {self.stopped}" if self.stopped_safely else "violated"

    def totals(self) -> dict[str, int]:
        t: Counter[str] = Counter()
        if self.stopped is not None:  # what it had not made visible yet is not lost
            if self.wrong:
                t["not-a-prefix"] = self.wrong
            t.update(self.phases)
            t.update(self.suspicions)
            t.update(self.checks)
            return dict(t)
        for s in self.sinks:
            t.update(s.anomalies())
        if not self.complete:
            t["stalled"] += 1
        t.update(self.phases)
        t.update(self.suspicions)
        t.update(self.checks)
        return dict(t)

    def to_json(self) -> dict[str, Any]:
        return {"guarantee": self.guarantee.value, "passed": self.passed,
                "complete": self.complete, "outcome": self.outcome,
                "sinks": [s.to_json() for s in self.sinks]}


def verify(modes: dict[str, str], golden: dict[str, Out], output: dict[str, Out],
           guarantee: Guarantee, complete: bool = True,
           golden_index: dict[str, dict[Any, list[Any]]] | None = None,
           stopped: str | None = None,
           golden_counts: dict[str, Counter[Any]] | None = None,
           golden_positions: dict[str, dict[Any, int]] | None = None) -> Verdict:
    """``stopped``: why the protocol stopped the run, if it did (``Verdict``);
    ``golden_counts`` and ``golden_positions``: ``record_counts(golden, modes)`` and
    ``record_positions(golden, modes)``, precomputed."""
    index = golden_index or {}
    counts = golden_counts or {}
    places = golden_positions or {}
    sinks = [compare(name, modes[name], golden.get(name, []), output.get(name, []),
                     golden_by_key=index.get(name), golden_counts=counts.get(name),
                     golden_positions=places.get(name))
             for name in sorted(modes)]
    wrong = 0
    if stopped is not None:
        wrong = sum(not_prefix(modes[name], index.get(name) or index_by_key(golden.get(
            name, [])), output.get(name, []), guarantee) for name in sorted(modes))
    return Verdict(guarantee, sinks, complete, stopped=stopped, wrong=wrong)
