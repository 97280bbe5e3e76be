"""Checks that a topology's output is something ftctl can verify.

A fault-free run is the reference every other run is compared with, so a topology whose
output depends on the order in which parallel instances' batches arrive would make every
protocol look broken. These checks run after the graph checks of `ftctl.config.checks`:

- V1 types: on every edge, the producer's record type is one the consumer takes; an
  operator that adds up values (sum, avg, tail_avg, a window's sum or avg) gets numbers,
  not text or tuples, and one that reads a value's field gets values with fields;
- V2 keyed state: an edge into a keyed stateful operator with parallelism > 1 is hash,
  or forward from an instance that already holds each of its keys alone;
- V3 arrival-order independence: every operator's output gets a class, D (the sequence
  per key is fixed), M (the multiset is fixed), F (only the last value per key is fixed)
  or X (nothing is); each sink's mode must be met by the class that reaches it;
- V4 event time: operators fired by watermarks need event-time sources upstream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ftctl.config.topology import OperatorSpec, Topology

if TYPE_CHECKING:
    from ftctl.config.checks import Problem

D, M, F, X = "D", "M", "F", "X"
_WORDS = {
    D: "a fixed sequence per key",
    M: "records in the order its inputs interleave",
    F: "running values whose last per key is fixed but not the ones before",
    X: "values that depend on the order its inputs arrive in",
}
# What each sink mode needs.
_NEEDS = {"ordered-per-key": {D}, "final-per-key": {D, F}, "multiset": {D, M}}
# Operators whose output per key does not depend on the order of their input.
_ORDER_FREE = {"count", "window", "window_join", "nexmark.winning_bids", "reorder"}
_RUNNING = {"sum", "max", "avg"}
_KEEPS_KEY = {"filter", "count", "sum", "max", "avg", "tail_avg", "window", "join",
              "window_join", "reorder", "sink", "nexmark.winning_bids"}
_SAME_KEY_FUNCTIONS = {"identity"}


def verifiable_problems(topo: Topology) -> Iterator[Problem]:
    from ftctl.config.checks import Problem
    from ftctl.runtime.graph import topo_order
    from ftctl.runtime.operators import OPERATORS, is_source
    from ftctl.runtime.records import ANY, accepts
    from ftctl.runtime.sources import SOURCES
    from ftctl.runtime.types import record_types

    index = {op.name: i for i, op in enumerate(topo.operators)}
    types = record_types(topo)
    order = topo_order(topo)
    ins = {name: [(i, e) for i, e in enumerate(topo.edges) if e.dst == name] for name in order}

    # V1: what each consumer takes, against what its producer makes.
    for i, edge in enumerate(topo.edges):
        dst = topo.operator(edge.dst)
        takes = _takes(dst)
        made = types[edge.src][1]
        if not accepts(takes, made):
            yield Problem(("edges", i), f"'{edge.dst}' port {edge.port} takes {takes}, "
                          f"'{edge.src}' makes {made}")
            return
    for name in order:
        why = _not_numeric(topo.operator(name), types[name][0].get(0, ANY))
        if why is not None:
            yield Problem(("operators", index[name]), why)
            return

    # V4: event time flows only from sources that declare ordered event times.
    timed: dict[str, bool] = {}
    for name in order:
        op = topo.operator(name)
        if is_source(op.type):
            timed[name] = op.type in SOURCES
            continue
        timed[name] = all(timed[e.src] for _, e in ins[name]) and bool(ins[name])
        kind = OPERATORS.get(op.type)
        if kind is not None and kind.event_time and not timed[name]:
            yield Problem(("operators", index[name]),
                          f"'{name}' ({op.type}) needs event-time sources upstream")
            return

    # V2 and V3 together: which operators hold each key alone, and each output's class.
    owned: dict[str, bool] = {}
    cls: dict[str, str] = {}
    for name in order:
        op = topo.operator(name)
        at = ("operators", index[name])
        if is_source(op.type):
            owned[name] = op.parallelism == 1
            cls[name] = D
            continue
        kind = OPERATORS.get(op.type)
        keyed = bool(kind and kind.keyed)
        edges = ins[name]
        fed_by_key = True
        hop = D
        for i, e in edges:
            keeps = owned[e.src] and (e.partition in ("hash", "forward") or op.parallelism == 1)
            if e.partition != "hash" and not (e.partition == "forward" and owned[e.src]):
                fed_by_key = False
            if keyed and op.parallelism > 1 and e.partition != "hash" and not (
                    e.partition == "forward" and owned[e.src]):
                yield Problem(
                    ("edges", i, "partition"),
                    f"{e.partition} into '{name}' ({op.type}, keyed state, parallelism "
                    f"{op.parallelism}) splits a key's records across instances; use hash")
                return
            c = cls[e.src]
            if types[e.src][1] == ANY and c == D:  # unknown records: assume the least
                c = M
            if c == D and not (len(edges) == 1 and keeps):
                c = M
            if c == F and not (len(edges) == 1 and keeps):
                c = X
            hop = _worst(hop, c)
        in_types = types[name][0]
        tally = all(t == "tally" for t in in_types.values())
        out = _transfer(op, hop, tally)
        cls[name] = out
        owned[name] = (op.parallelism == 1 or fed_by_key) and _keeps_key(op)
        if op.type == "sink":
            need = _NEEDS[op.mode or "multiset"]
            if hop not in need:
                yield Problem(at, _sink_message(topo, name, op, hop, edges, index))
                return
        elif out == X:
            producers = sorted({e.src for _, e in edges})
            yield Problem(at, f"'{name}' ({op.type}) depends on the order its input "
                          f"arrives in from {', '.join(repr(p) for p in producers)}; "
                          "add a reorder before it")
            return


# Record types whose value is a number, and the named fields that hold text.
_NUMBERS = {"any", "int", "tally", "count", "text.word"}  # a word's value is 1
_TEXT_FIELDS = {"kind", "name", "city", "state", "channel"}


def _not_numeric(op: OperatorSpec, in_type: str) -> str | None:
    """Why ``op`` would add up values that are not numbers, or read a field of values
    that have none, or None (V1). max and argmax only compare, which text and tuples
    allow."""
    from ftctl.runtime.records import RECORD_TYPES

    agg = op.params.get("agg", "count") if op.type == "window" else op.type
    if agg not in ("sum", "max", "avg", "tail_avg", "argmax"):
        return None
    field = op.params.get("field") if op.type in ("avg", "tail_avg", "window") else None
    what = f"'{op.name}' ({op.type}{', agg ' + str(agg) if op.type == 'window' else ''})"
    if field is None:
        if in_type in _NUMBERS or agg in ("max", "argmax"):
            return None
        return (f"{what} adds up values, but its input is {in_type}, not a number; map it "
                "to numbers first" + ("" if op.type == "sum" else ", or name a 'field'"))
    if isinstance(field, str) and field in _TEXT_FIELDS and agg != "max" and agg != "argmax":
        return f"{what} adds up field {field!r} of {in_type}, which is text; name a number"
    if isinstance(field, int) and in_type != "any" and not RECORD_TYPES.get(in_type):
        return f"{what} reads field {field} of {in_type}, which has no fields; drop 'field'"
    return None


def _takes(op: OperatorSpec) -> str:
    from ftctl.runtime.operators import OPERATORS, resolve_function
    from ftctl.runtime.records import ANY

    kind = OPERATORS.get(op.type)
    if kind is None or not kind.needs_function or not op.function:
        return ANY
    try:
        fn = resolve_function(op.function)
    except LookupError:
        return ANY
    return str(getattr(fn, "takes", ANY))


def _keeps_key(op: OperatorSpec) -> bool:
    return op.type in _KEEPS_KEY or (op.type == "map" and op.function in _SAME_KEY_FUNCTIONS)


def _worst(a: str, b: str) -> str:
    return max(a, b, key="DMFX".index) if {a, b} != {M, F} else X


def _transfer(op: OperatorSpec, c: str, tally: bool) -> str:
    if op.type in ("map", "filter", "flat_map", "key_by", "sink"):
        return c
    if c == X:
        return X
    if op.type in _ORDER_FREE:
        return D if c in (D, M) else X
    if op.type in _RUNNING:
        if c == D or (c == M and op.type == "sum" and tally):
            return D
        return F if c == M else X
    if op.type == "join":
        return M
    # tail_avg and anything else order-sensitive
    return D if c == D else X


def _sink_message(topo: Topology, name: str, op: OperatorSpec, c: str,
                  edges: list[Any], index: dict[str, int]) -> str:
    producers = sorted({e.src for _, e in edges})
    src = producers[0]
    fix = {
        "final-per-key": "use multiset, or a window_join or reorder before it",
        "ordered-per-key": "use multiset, or a count/window/reorder before it",
        "multiset": "aggregate with count or a window instead",
    }[op.mode or "multiset"]
    return (f"mode {op.mode}, but '{src}' ({topo.operator(src).type}, "
            f"operators[{index[src]}]) delivers {_WORDS[c]}; {fix}")
