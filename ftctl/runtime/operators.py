"""Operator logic: pure functions of (state, input batch) -> output records.

Operators know nothing of channels, protocols or hosts. Stateful operators expose
``snapshot``/``restore`` so protocols can persist and roll back their state.
"""

from __future__ import annotations

import difflib
import heapq
import importlib
import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, ClassVar

from ftctl.runtime.nexmark import FUNCTIONS as NEXMARK_FUNCTIONS
from ftctl.runtime.records import ANY, SAME, Record, field_index, stable_hash, typed

WATERMARK_MAX = 2**62


class Operator:
    """Base operator: stateless identity."""

    stateful: ClassVar[bool] = False
    inputs: ClassVar[int] = 1
    # ``process`` is a pure function of its batch (no state, no user code that could keep
    # any): a simulator may reuse its output for the same batch (``ftctl.runtime.memo``).
    pure: bool = False

    def process(self, records: list[Record], port: int) -> list[Record]:
        return records

    def on_watermark(self, watermark: int) -> list[Record]:
        """Called when the instance's input watermark advances."""
        return []

    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        pass

    def state_size(self) -> int:
        """Number of entries held (for reports and benchmarks)."""
        return 0


# ---------------------------------------------------------------- user functions

@typed("text.line", "text.word")
def _split_words(rec: Record) -> Iterable[Record]:
    _, line, ts = rec
    return [(w, 1, ts) for w in line.split()]


@typed(ANY, SAME)
def _identity(rec: Record) -> Record:
    return rec


@typed(ANY, "tally")
def _key_to_tag(rec: Record) -> Record:
    return (rec[0], 1, rec[2])


@typed(ANY, SAME)
def _is_even_key(rec: Record) -> bool:
    return stable_hash(rec[0]) % 2 == 0


BUILTIN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "split_words": _split_words,
    "identity": _identity,
    "key_one": _key_to_tag,
    "even_key": _is_even_key,
    **NEXMARK_FUNCTIONS,
}


def builtin_summary() -> str:
    """The built-in function names, the Nexmark family abbreviated."""
    plain = [n for n in BUILTIN_FUNCTIONS if not n.startswith("nexmark.")]
    return ", ".join([*plain, "nexmark.* (ftctl list operators)"])


def resolve_function(name: str) -> Callable[..., Any]:
    """A built-in function name or ``module:function``."""
    if name in BUILTIN_FUNCTIONS:
        return BUILTIN_FUNCTIONS[name]
    if ":" not in name:
        close = difflib.get_close_matches(name, BUILTIN_FUNCTIONS, n=1, cutoff=0.7)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise LookupError(f"unknown function {name!r} ({hint}built-ins: {builtin_summary()})")
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"cannot import {name!r}: {exc}") from exc
    if not inspect.isfunction(fn):
        # Builtins and classes (builtins:len, builtins:print) take a record but do not
        # return one; only a def of one argument can be an operator's function.
        raise LookupError(f"{name!r} is a {type(fn).__name__}, not a Python function of "
                          "one record (def f(record): ...)")
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        raise LookupError(f"{name!r} must take exactly one argument, the record") from None
    return fn


def function_role(fn: Callable[..., Any]) -> str | None:
    """The operator a function is written for, from its return annotation: filter
    (-> bool), flat_map (-> Iterable/Iterator/list) or map (-> Record/tuple); None when
    it does not say."""
    ret = getattr(fn, "__annotations__", {}).get("return")
    text = ret if isinstance(ret, str) else getattr(ret, "__name__", str(ret))
    if text == "bool":
        return "filter"
    if text.startswith(("Iterable", "Iterator", "list", "typing.Iterable", "typing.Iterator")):
        return "flat_map"
    if text.startswith(("Record", "tuple")):
        return "map"
    return None


class FunctionFailed(TypeError):
    """A user's function returned what its operator cannot use. The instance running it
    fills in ``operator`` (``InstanceCore.deliver``); commands print it as one line."""

    def __init__(self, message: str, operator: str | None = None):
        super().__init__(message, operator)
        self.message = message
        self.operator = operator

    def __str__(self) -> str:
        return self.message if self.operator is None else (
            f"operator '{self.operator}': {self.message}")


class _FunctionOp(Operator):
    """An operator that runs a user's function on every record."""

    kind = "map"

    def __init__(self, fn: Callable[[Record], Any], name: str = "function"):
        self.fn = fn
        self.name = name
        self.pure = name in BUILTIN_FUNCTIONS and fn is BUILTIN_FUNCTIONS[name]

    def process(self, records: list[Record], port: int) -> list[Record]:
        try:
            return self._apply(records)
        except FunctionFailed:
            raise
        except Exception as exc:  # the user's code: name it rather than end in a traceback
            raise FunctionFailed(f"{self.kind} function {self.name!r} raised "
                                 f"{type(exc).__name__}: {exc}") from exc

    def _apply(self, records: list[Record]) -> list[Record]:
        fn = self.fn
        return [fn(r) for r in records]


class MapOp(_FunctionOp):
    pass


class FilterOp(_FunctionOp):
    kind = "filter"

    def _apply(self, records: list[Record]) -> list[Record]:
        fn = self.fn
        return [r for r in records if fn(r)]


class FlatMapOp(_FunctionOp):
    kind = "flat_map"

    def _apply(self, records: list[Record]) -> list[Record]:
        out: list[Record] = []
        fn = self.fn
        for r in records:
            got = fn(r)
            # A str is iterable too: extending by it would pass its characters on as
            # records and break the next operator far from the cause.
            if isinstance(got, str | bytes | bytearray | Mapping) or not hasattr(got,
                                                                                "__iter__"):
                raise FunctionFailed(f"flat_map function {self.name!r} returned "
                                     f"{type(got).__name__}, not a list of records")
            out.extend(got)
        return out


# ---------------------------------------------------------------- keyed aggregates

class _KeyedAggregate(Operator):
    """Emits ``(key, aggregate, ts)`` for every input record: the running value."""

    stateful = True

    def __init__(self) -> None:
        self.state: dict[Any, Any] = {}

    def snapshot(self) -> Any:
        return dict(self.state)

    def restore(self, state: Any) -> None:
        self.state = dict(state or {})

    def state_size(self) -> int:
        return len(self.state)


class CountOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, _, ts in records:
            c = st.get(k, 0) + 1
            st[k] = c
            out.append((k, c, ts))
        return out


class SumOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, v, ts in records:
            s = st.get(k, 0) + v
            st[k] = s
            out.append((k, s, ts))
        return out


class MaxOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, v, ts in records:
            cur = st.get(k)
            if cur is None or v > cur:
                st[k] = v
                cur = v
            out.append((k, cur, ts))
        return out


# ---------------------------------------------------------------- windows

def _argmax(acc: Any, score: Any, v: Any) -> Any:
    """(best score, sorted tuple of the values reaching it): ties all kept, order-free."""
    if acc is None or score > acc[0]:
        return (score, (v,))
    if score == acc[0]:
        return (score, tuple(sorted((*acc[1], v))))
    return acc


_AGGS: dict[str, Callable[[Any, Any], Any]] = {
    "count": lambda acc, v: acc + 1,
    "sum": lambda acc, v: acc + v,
    "max": lambda acc, v: v if acc is None or v > acc else acc,
    "avg": lambda acc, v: (acc[0] + v, acc[1] + 1),
}
_INIT: dict[str, Any] = {"count": 0, "sum": 0, "max": None, "avg": (0, 0), "argmax": None}


class WindowOp(Operator):
    """Tumbling (slide == size) or sliding event-time windows per key.

    A window [start, start+size) fires once the input watermark reaches its end and
    emits ``(key, (window_end, aggregate), window_end - 1)``. Sources are in order and
    watermarks travel behind records on FIFO channels, so no record is ever late.
    """

    stateful = True

    def __init__(self, size: int, slide: int, agg: str, field: int | None = None):
        if size <= 0 or slide <= 0:
            raise ValueError("window size and slide must be positive")
        if size // slide > 1000:
            raise ValueError(f"size/slide is {size // slide}: each record would fall in that "
                             "many windows (at most 1000)")
        if agg not in _INIT:
            raise ValueError(f"unknown aggregate {agg!r} ({', '.join(_INIT)})")
        if agg == "argmax" and field is None:
            raise ValueError("agg argmax needs a 'field' (the value field to maximise)")
        if agg == "count" and field is not None:
            raise ValueError("agg count takes no 'field'")
        self.size, self.slide, self.agg, self.field = size, slide, agg, field
        self._fold = _field_fold(agg, field)
        # window_start -> key -> accumulator
        self.windows: dict[int, dict[Any, Any]] = {}

    def process(self, records: list[Record], port: int) -> list[Record]:
        if not records or self.size % self.slide:
            self._process_each(records)
            return []
        slide = self.slide
        # With size a multiple of slide, the windows a record falls in depend only on
        # its slide bucket (ts - ts % slide), and the buckets of a batch are usually one
        # or two: look each bucket's windows up once, not per record and window. The
        # windows and keys are created, and folded, in the order the per-record loop
        # would (a run's first record creates its windows; keys in first-seen order), so
        # the state and its snapshots are the same.
        stamps = [r[2] for r in records]
        lo, hi = min(stamps), max(stamps)
        if lo - lo % slide == hi - hi % slide and self.agg == "count":
            # One bucket (the bucket is monotone in ts): a count adds how often each key
            # occurs to every window of the bucket.
            tally = Counter([r[0] for r in records])
            for w in self._bucket(lo - lo % slide):
                get = w.get
                for k, c in tally.items():
                    w[k] = get(k, 0) + c
            return []
        fold, init = self._fold, _INIT[self.agg]
        bucket, targets = None, []
        for k, v, ts in records:
            last = ts - ts % slide
            if last != bucket:
                bucket, targets = last, self._bucket(last)
            for w in targets:
                w[k] = fold(w.get(k, init), v)
        return []

    def _bucket(self, last: int) -> list[dict[Any, Any]]:
        """The windows holding the slide bucket starting at ``last``, newest first,
        created (in that order) where missing."""
        wins, out, start = self.windows, [], last
        while start > last - self.size:
            w = wins.get(start)
            if w is None:
                w = wins[start] = {}
            out.append(w)
            start -= self.slide
        return out

    def _process_each(self, records: list[Record]) -> None:
        size, slide, fold, init = self.size, self.slide, self._fold, _INIT[self.agg]
        wins = self.windows
        for k, v, ts in records:
            last = ts - ts % slide
            start = last
            while start > ts - size:
                w = wins.get(start)
                if w is None:
                    w = wins[start] = {}
                w[k] = fold(w.get(k, init), v)
                start -= slide

    def on_watermark(self, watermark: int) -> list[Record]:
        out: list[Record] = []
        for start in sorted(s for s in self.windows if s + self.size <= watermark):
            end = start + self.size
            w = self.windows.pop(start)
            keys = list(w)
            # Keys in the order of their str (ties: first inserted first, as a stable
            # sort of the items by str would give), without a Python call per key.
            names = list(map(str, keys))
            ranked = list(map(keys.__getitem__, sorted(range(len(keys)),
                                                       key=names.__getitem__)))
            # (key, (end, acc), end - 1) per key, the tuples made by zip in C.
            out += zip(ranked, zip(repeat(end), map(w.__getitem__, ranked)), repeat(end - 1))
        return out

    def snapshot(self) -> Any:
        return {s: dict(w) for s, w in self.windows.items()}

    def restore(self, state: Any) -> None:
        self.windows = {s: dict(w) for s, w in (state or {}).items()}

    def state_size(self) -> int:
        return sum(len(w) for w in self.windows.values())


def _field_fold(agg: str, field: int | None) -> Callable[[Any, Any], Any]:
    if agg == "argmax":
        assert field is not None
        return lambda acc, v: _argmax(acc, v[field], v)
    fold = _AGGS[agg]
    if field is None:
        return fold
    return lambda acc, v: fold(acc, v[field])


# ---------------------------------------------------------------- join

def _copy_sides(sides: tuple[dict[Any, list[Any]], dict[Any, list[Any]]]
                ) -> tuple[dict[Any, list[Any]], dict[Any, list[Any]]]:
    """Two dicts of lists, copied as far as an operator changes them (the dicts and the
    lists): record values are immutable everywhere in the runtime, so they are shared."""
    return ({k: list(v) for k, v in sides[0].items()}, {k: list(v) for k, v in sides[1].items()})


class JoinOp(Operator):
    """Symmetric keyed inner join of port 0 (left) and port 1 (right).

    Every matching pair is emitted once, when its later side arrives:
    ``(key, (left_value, right_value), max_ts)``.
    """

    stateful = True
    inputs = 2

    def __init__(self) -> None:
        self.sides: tuple[dict[Any, list[Any]], dict[Any, list[Any]]] = ({}, {})

    def process(self, records: list[Record], port: int) -> list[Record]:
        mine, other = self.sides[port], self.sides[1 - port]
        out: list[Record] = []
        for k, v, ts in records:
            mine.setdefault(k, []).append((v, ts))
            for ov, ots in other.get(k, ()):
                pair = (v, ov) if port == 0 else (ov, v)
                out.append((k, pair, max(ts, ots)))
        return out

    def snapshot(self) -> Any:
        return _copy_sides(self.sides)

    def restore(self, state: Any) -> None:
        self.sides = _copy_sides(state) if state else ({}, {})

    def state_size(self) -> int:
        return sum(len(v) for side in self.sides for v in side.values())


# ---------------------------------------------------------------- event-time operators


class KeyByOp(Operator):
    """Re-keys: key := value[field], or key := ts - ts % time_bucket."""

    pure = True

    def __init__(self, field: int | None, bucket: int | None):
        self.field, self.bucket = field, bucket

    def process(self, records: list[Record], port: int) -> list[Record]:
        if self.bucket is not None:
            b = self.bucket
            return [(ts - ts % b, v, ts) for _, v, ts in records]
        f = self.field
        return [(v[f], v, ts) for _, v, ts in records]


class AvgOp(_KeyedAggregate):
    """Running exact mean per key as (sum, count); the float is derived when reporting."""

    def __init__(self, field: int | None = None) -> None:
        super().__init__()
        self.field = field

    def process(self, records: list[Record], port: int) -> list[Record]:
        st, f = self.state, self.field
        out = []
        for k, v, ts in records:
            s, c = st.get(k, (0, 0))
            acc = (s + (v if f is None else v[f]), c + 1)
            st[k] = acc
            out.append((k, acc, ts))
        return out


class TailAvgOp(_KeyedAggregate):
    """Per key, (sum, count) of the last ``n`` values in input order, on every input.

    Order-sensitive by nature: validation puts a ``reorder`` before it.
    """

    def __init__(self, n: int, field: int | None = None) -> None:
        super().__init__()
        if not 1 <= n <= 100_000:
            raise ValueError(f"n must be between 1 and 100000, got {n}")
        self.n, self.field = n, field

    def process(self, records: list[Record], port: int) -> list[Record]:
        st, f, n = self.state, self.field, self.n
        out = []
        for k, v, ts in records:
            last = (*st.get(k, ()), v if f is None else v[f])[-n:]
            st[k] = last
            out.append((k, (sum(last), len(last)), ts))
        return out


def _sorted(items: list[Any]) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=repr)


class ReorderOp(Operator):
    """Holds records until the input watermark W passes their ts, then releases those
    with ts < W sorted by (ts, key, value): arrival order becomes event-time order."""

    stateful = True

    def __init__(self) -> None:
        self.held: list[Record] = []

    def process(self, records: list[Record], port: int) -> list[Record]:
        self.held.extend(records)
        return []

    def on_watermark(self, watermark: int) -> list[Record]:
        ready = [r for r in self.held if r[2] < watermark]
        if not ready:
            return []
        self.held = [r for r in self.held if r[2] >= watermark]
        return [(k, v, ts) for ts, k, v in _sorted([(ts, k, v) for k, v, ts in ready])]

    def snapshot(self) -> Any:
        return list(self.held)

    def restore(self, state: Any) -> None:
        self.held = list(state or [])

    def state_size(self) -> int:
        return len(self.held)


class WindowJoinOp(Operator):
    """Tumbling event-time join: pairs of a key whose two records share a window.

    A window fires when the watermark reaches its end: ``(key, (left, right), end - 1)``
    for every pair, keys in a fixed order and pairs sorted, so output is order-free.
    """

    stateful = True
    inputs = 2

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("window_join size must be positive")
        self.size = size
        # window start -> (left: key -> values, right: key -> values)
        self.windows: dict[int, tuple[dict[Any, list[Any]], dict[Any, list[Any]]]] = {}

    def process(self, records: list[Record], port: int) -> list[Record]:
        size = self.size
        for k, v, ts in records:
            sides = self.windows.setdefault(ts - ts % size, ({}, {}))
            sides[port].setdefault(k, []).append(v)
        return []

    def on_watermark(self, watermark: int) -> list[Record]:
        out: list[Record] = []
        for start in sorted(s for s in self.windows if s + self.size <= watermark):
            end = start + self.size
            left, right = self.windows.pop(start)
            for k in sorted((k for k in left if k in right), key=str):
                pairs = _sorted([(lv, rv) for lv in left[k] for rv in right[k]])
                out.extend((k, pair, end - 1) for pair in pairs)
        return out

    def snapshot(self) -> Any:
        return {start: _copy_sides(sides) for start, sides in self.windows.items()}

    def restore(self, state: Any) -> None:
        self.windows = ({start: _copy_sides(sides) for start, sides in state.items()}
                        if state else {})

    def state_size(self) -> int:
        return sum(len(v) for sides in self.windows.values() for s in sides for v in s.values())


def _best_price(bids: list[Any], lo: int, hi: int, reserve: Any, best: Any) -> Any:
    """The highest price above ``best`` among ``bids`` valid for an auction open over
    [lo, hi) with ``reserve``; ``best`` if none is."""
    for bid in bids:
        if lo <= bid[5] < hi and bid[3] >= reserve and (best is None or bid[3] > best):
            best = bid[3]
    return best


class WinningBidsOp(Operator):
    """Nexmark's winning bid per auction: port 0 auctions keyed by id, port 1 bids
    keyed by auction. A bid is valid when date_time <= bid.ts < expires and price >=
    reserve; bids that arrive before their auction are held until the watermark shows
    no such auction can still come. At watermark >= expires the auction closes:
    ``(id, (seller, category, best price, expires), expires - 1)``, in (expires, id) order.

    Its state is ``open`` and the held bids (``held_bids``). When an upstream stalls,
    thousands of auctions and held bids wait, and scanning them all at every watermark
    was most of a run's time. So open auctions are in a heap by expiry, and held bids
    are dropped lazily: a watermark ``w`` makes every held bid before ``w`` dead, and
    an auction that comes later skips them by its lower bound, ``max(date_time, w)``.
    The one exception is a late bid (before ``w``, arriving after it), which counts
    until the next watermark as it did when every watermark trimmed: its list
    remembers where the late ones may start. The dead are cleared out once as many
    bids have been held since the last clear-out as it kept, and a snapshot holds only
    the live ones, so state, snapshots and output are those of trimming at every
    watermark (only the order of held auctions may differ: a list emptied by a trim
    kept its place).
    """

    stateful = True
    inputs = 2
    _CLEAR_SLACK = 4096  # held bids beyond twice the live ones before a clear-out

    def __init__(self) -> None:
        self.open: dict[Any, list[Any]] = {}  # id -> [auction value, best price or None]
        self.held: dict[Any, list[Any]] = {}  # auction id -> bids seen before the auction
        self._wm: int | None = None  # the last watermark: held bids before it are dead
        self._late: dict[Any, int] = {}  # id -> where late bids may start in its list
        self._index()

    def _index(self) -> None:
        """A heap of (expires, id) per open auction, whose entries go stale (an auction
        closed or reopened) and are skipped when they come up."""
        self._closing = [(a[0][7], k) for k, a in self.open.items()]
        heapq.heapify(self._closing)
        self._kept = sum(len(b) for b in self.held.values())  # live after the clear-out
        self._added = 0  # bids held since

    def _live(self, k: Any, bids: list[Any]) -> list[Any]:
        """Those of ``bids`` (held for ``k``) that trimming at every watermark keeps."""
        wm = self._wm
        if wm is None:
            return list(bids)
        p = self._late.get(k)
        if p is None:
            return [b for b in bids if b[5] >= wm]
        return [b for b in bids[:p] if b[5] >= wm] + bids[p:]

    def held_bids(self) -> dict[Any, list[Any]]:
        """The held bids that can still count: auction id -> bids in arrival order."""
        return {k: live for k, bids in self.held.items() if (live := self._live(k, bids))}

    def process(self, records: list[Record], port: int) -> list[Record]:
        open_, held = self.open, self.held
        if port == 0:
            closing, wm = self._closing, self._wm
            for k, a, _ in records:
                auction = open_[k] = [a, None]
                heapq.heappush(closing, (a[7], k))
                bids = held.pop(k, None)
                if bids is None:
                    continue
                lo, hi, reserve = a[6], a[7], a[5]
                best = None
                p = self._late.pop(k, None) if self._late else None
                if p is not None:  # late bids since the last watermark: each counts
                    bids, late = bids[:p], bids[p:]
                    best = _best_price(late, lo, hi, reserve, None)
                if wm is not None and wm > lo:
                    lo = wm  # bids before the watermark are dead
                auction[1] = _best_price(bids, lo, hi, reserve, best)
            return []
        # Bids are nine in ten Nexmark events: the offer is inlined, a call less per bid.
        wm = self._wm
        added = 0
        for k, v, _ in records:
            entry = open_.get(k)
            if entry is None:
                bids = held.get(k)
                if bids is None:
                    bids = held[k] = []
                if wm is not None and v[5] < wm and k not in self._late:
                    self._late[k] = len(bids)  # late: counts until the next watermark
                bids.append(v)
                added += 1
                continue
            a = entry[0]
            if a[6] <= v[5] < a[7] and v[3] >= a[5] and (entry[1] is None or v[3] > entry[1]):
                entry[1] = v[3]
        self._added += added
        return []

    def on_watermark(self, watermark: int) -> list[Record]:
        open_, closing = self.open, self._closing
        out: list[Record] = []
        while closing and closing[0][0] <= watermark:
            expires, k = heapq.heappop(closing)
            entry = open_.get(k)
            if entry is None or entry[0][7] != expires:
                continue  # closed already, or reopened with another expiry
            del open_[k]
            a, best = entry
            if best is not None:
                out.append((k, (a[2], a[3], best, expires), expires - 1))
        # An auction still to come has date_time >= watermark, so no held bid with an
        # earlier time can be valid for it. (The runtime's watermarks only rise.)
        if self._wm is None or watermark > self._wm:
            self._wm = watermark
        self._late.clear()  # late bids are dead from here, as the others before it
        if self._added > self._kept + self._CLEAR_SLACK:
            self.held = self.held_bids()
            self._kept = sum(len(b) for b in self.held.values())
            self._added = 0
        return out

    def snapshot(self) -> Any:
        # An open entry is a list it updates; the held lists are new.
        return {k: list(v) for k, v in self.open.items()}, self.held_bids()

    def restore(self, state: Any) -> None:
        self.open, self.held = _copy_sides(state) if state else ({}, {})
        self._wm = None  # every restored bid is live until the next watermark
        self._late = {}
        self._index()

    def state_size(self) -> int:
        return len(self.open) + sum(len(b) for b in self.held_bids().values())


class SinkOp(Operator):
    """Passes records to the external sink; the protocol decides when they become visible."""


# ---------------------------------------------------------------- registry

Build = Callable[[dict[str, Any], str | None, str], Operator]


@dataclass(frozen=True)
class OperatorType:
    """``build(params, function, input record type)``; ``makes`` is the output record
    type (None: the input type, "function": the function's declared type)."""

    name: str
    description: str
    build: Build
    needs_function: bool = False
    inputs: int = 1
    makes: str | None = None
    keyed: bool = False  # keeps state per key: its inputs must be partitioned by key
    event_time: bool = False  # fires on watermarks


def _need(fn: str | None) -> str:
    if not fn:
        raise LookupError("needs a 'function'")
    return fn


def _int(p: dict[str, Any], name: str, default: int | None = None) -> int:
    v = p.get(name, default)
    if v is None:
        raise ValueError(f"needs param '{name}'")
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or abs(v) > 2**62:
        raise ValueError(f"param '{name}' must be an integer, got {v!r}")
    if int(v) != v:
        raise ValueError(f"param '{name}' must be an integer, got {v!r}")
    return int(v)


def _field(p: dict[str, Any], in_type: str) -> int | None:
    f = p.get("field")
    return None if f is None else field_index(in_type, f)


def _only(p: dict[str, Any], *names: str) -> dict[str, Any]:
    extra = sorted(set(p) - set(names))
    if extra:
        known = ", ".join(names) if names else "none"
        raise ValueError(f"unknown param '{extra[0]}' (known: {known})")
    return p


def _key_by(p: dict[str, Any], t: str) -> KeyByOp:
    _only(p, "field", "time_bucket")
    if ("field" in p) == ("time_bucket" in p):
        raise ValueError("key_by needs exactly one of 'field' or 'time_bucket'")
    if "time_bucket" in p:
        bucket = _int(p, "time_bucket")
        if bucket <= 0:
            raise ValueError(f"time_bucket must be > 0, got {bucket}")
        return KeyByOp(None, bucket)
    return KeyByOp(_field(p, t), None)


def _window(p: dict[str, Any], f: str | None, t: str) -> WindowOp:
    _only(p, "size", "slide", "agg", "field")
    size = _int(p, "size", 100)
    return WindowOp(size, _int(p, "slide", size), str(p.get("agg", "count")), _field(p, t))


OPERATORS: dict[str, OperatorType] = {
    "map": OperatorType(
        "map", "one record in, one out, via `function`",
        lambda p, f, t: MapOp(resolve_function(_need(f)), _need(f)), needs_function=True,
        makes="function"),
    "filter": OperatorType(
        "filter", "keeps records for which `function` is true",
        lambda p, f, t: FilterOp(resolve_function(_need(f)), _need(f)),
        needs_function=True,
        makes="function"),
    "flat_map": OperatorType(
        "flat_map", "one record in, zero or more out, via `function`",
        lambda p, f, t: FlatMapOp(resolve_function(_need(f)), _need(f)), needs_function=True,
        makes="function"),
    "key_by": OperatorType(
        "key_by", "re-keys: key := value[field], or key := ts - ts % time_bucket",
        lambda p, f, t: _key_by(p, t)),
    "count": OperatorType("count", "keyed running count: (key, count, ts)",
                          lambda p, f, t: CountOp(), makes="count", keyed=True),
    "sum": OperatorType("sum", "keyed running sum of values: (key, sum, ts)",
                        lambda p, f, t: SumOp(), makes="int", keyed=True),
    "max": OperatorType("max", "keyed running maximum of values: (key, max, ts)",
                        lambda p, f, t: MaxOp(), makes="int", keyed=True),
    "avg": OperatorType(
        "avg", "keyed running exact mean as (key, (sum, count), ts); param field",
        lambda p, f, t: AvgOp(_field(_only(p, "field"), t)), makes="mean", keyed=True),
    "tail_avg": OperatorType(
        "tail_avg", "per key (sum, count) of the last n values in input order; params n, field",
        lambda p, f, t: TailAvgOp(_int(_only(p, "n", "field"), "n", 10), _field(p, t)),
        makes="mean", keyed=True),
    "window": OperatorType(
        "window",
        "event-time tumbling/sliding window per key; params size, slide (ms), "
        "agg (count, sum, max, avg, argmax), field",
        _window, makes="window", keyed=True, event_time=True),
    "join": OperatorType("join", "two-input keyed inner join (port 0 left, port 1 right)",
                         lambda p, f, t: JoinOp(), inputs=2, makes="pair", keyed=True),
    "window_join": OperatorType(
        "window_join", "tumbling event-time join of port 0 and port 1 per key; param size",
        lambda p, f, t: WindowJoinOp(_int(_only(p, "size"), "size")), inputs=2,
        makes="pair", keyed=True, event_time=True),
    "reorder": OperatorType(
        "reorder", "holds records until the watermark passes them, then emits them in "
        "event-time order",
        lambda p, f, t: ReorderOp(), keyed=True, event_time=True),
    "nexmark.winning_bids": OperatorType(
        "nexmark.winning_bids", "Nexmark's winning bid per auction (port 0 auctions by id, "
        "port 1 bids by auction), fired when the auction expires",
        lambda p, f, t: WinningBidsOp(), inputs=2, makes="nexmark.winning", keyed=True,
        event_time=True),
    "sink": OperatorType("sink", "the external world: output compared against golden",
                         lambda p, f, t: SinkOp()),
}


def is_source(kind: str) -> bool:
    return kind.startswith("source.")


def operator_names() -> list[str]:
    from ftctl.runtime.sources import SOURCES

    return sorted([*SOURCES, *OPERATORS])


def build_operator(
    kind: str, params: dict[str, Any], function: str | None, in_type: str = ANY
) -> Operator:
    return OPERATORS[kind].build(params, function, in_type)
