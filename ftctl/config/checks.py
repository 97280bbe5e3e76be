"""Graph-level checks of a topology that pydantic cannot express.

Each check yields `Problem`s located by a path into the YAML document (e.g.
``("edges", 1, "to")``) so the loader can name the field and its line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ftctl.config.errors import ConfigError
from ftctl.config.topology import EdgeSpec, OperatorSpec, SinkMode, Topology
from ftctl.config.verifiable import verifiable_problems
from ftctl.runtime.operators import (
    OPERATORS,
    build_operator,
    builtin_summary,
    function_role,
    is_source,
    operator_names,
    resolve_function,
)
from ftctl.runtime.sources import SOURCES, check_source

Loc = tuple[str | int, ...]
DEFAULT_SINK_MODE: SinkMode = "multiset"
_RETURNS = {"filter": "a bool", "flat_map": "a list of records", "map": "one record"}


@dataclass(frozen=True)
class Problem:
    loc: Loc
    message: str

    @property
    def field(self) -> str:
        return dotted(self.loc)


def dotted(loc: Loc) -> str:
    """``("operators", 2, "type")`` -> ``operators[2].type``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def check_topology(
    topology: Topology, file: str = "<topology>", lines: Mapping[Loc, int] | None = None
) -> Topology:
    """Raise ConfigError for the first problem; otherwise return it with defaults filled."""
    problem = next(find_problems(topology), None)
    if problem is not None:
        raise ConfigError(file, problem.field or None, problem.message, line_of(lines, problem.loc))
    return fill_defaults(topology)


def line_of(lines: Mapping[Loc, int] | None, loc: Loc) -> int | None:
    """The line of the longest prefix of `loc` that the document has."""
    if not lines:
        return None
    for end in range(len(loc), -1, -1):
        line = lines.get(loc[:end])
        if line is not None:
            return line
    return None


def fill_defaults(topology: Topology) -> Topology:
    """The topology with every sink's comparison mode set (a copy when one was missing)."""
    if all(op.type != "sink" or op.mode is not None for op in topology.operators):
        return topology
    return topology.with_operators([
        op.model_copy(update={"mode": DEFAULT_SINK_MODE})
        if op.type == "sink" and op.mode is None else op for op in topology.operators])


def find_problems(topology: Topology) -> Iterator[Problem]:
    """Every problem, most basic first; later checks skip what earlier ones reported."""
    checks: list[Callable[[Topology], Iterator[Problem]]] = [
        _duplicate_names,
        _input_fields,
        _operator_fields,
        _edge_ends,
        _has_sink,
        _roles,
        _cycle,
        _ports,
        _forward,
        _queries,
        _operator_builds,
        verifiable_problems,
    ]
    for check in checks:
        yield from check(topology)


# ---------------------------------------------------------------- operators


def _duplicate_names(topo: Topology) -> Iterator[Problem]:
    first: dict[str, int] = {}
    for i, op in enumerate(topo.operators):
        if op.name in first:
            yield Problem(
                ("operators", i, "name"),
                f"duplicate operator name '{op.name}' (also operators[{first[op.name]}])",
            )
        else:
            first[op.name] = i


def _input_fields(topo: Topology) -> Iterator[Problem]:
    if topo.input.rate_change is not None and topo.input.rate is None:
        yield Problem(("input", "rate_change"), "needs input.rate (the pace before the change)")


def _operator_fields(topo: Topology) -> Iterator[Problem]:
    for i, op in enumerate(topo.operators):
        yield from _operator_problems(i, op, topo.source_seed(op), topo.source_records(op))


def _operator_problems(
    i: int, op: OperatorSpec, seed: int, records: int
) -> Iterator[Problem]:
    at: Loc = ("operators", i)
    known = operator_names()
    if op.type not in known:
        yield Problem((*at, "type"), f"unknown operator {op.type!r} (known: {', '.join(known)})")
        return
    if op.mode is not None and op.type != "sink":
        yield Problem((*at, "mode"), "only sinks take a mode")
    if op.split is not None and not is_source(op.type):
        yield Problem((*at, "split"), "only sources take a split")
    if op.input is not None and not is_source(op.type):
        yield Problem((*at, "input"), "only sources take their own input")
    if is_source(op.type):
        yield from _source_params(at, op, seed, records)
        return
    kind = OPERATORS[op.type]
    if kind.needs_function and not op.function:
        yield Problem((*at, "function"), f"required for {op.type} ({_function_hint()})")
        return
    if op.function and not kind.needs_function:
        yield Problem((*at, "function"), f"{op.type} takes no function")
        return
    if op.function:
        try:
            fn = resolve_function(op.function)
        except LookupError as exc:
            yield Problem((*at, "function"), str(exc))
            return
        except Exception as exc:  # a user's module can fail to import in any way
            yield Problem((*at, "function"), f"cannot import '{op.function}': {exc}")
            return
        # A filter's bool or a flat_map's list where a map expects a record breaks the
        # next operator, mid-run: refuse it here.
        role = function_role(fn)
        if role is not None and role != op.type:
            yield Problem((*at, "function"), f"'{op.function}' is a {role} function "
                          f"(it returns {_RETURNS[role]}); use it in a {role}")
            return


def _operator_builds(topo: Topology) -> Iterator[Problem]:
    """Build every operator with the record type it receives (after the graph checks,
    so the types along the edges are known)."""
    from ftctl.runtime.records import ANY
    from ftctl.runtime.types import record_types

    types = record_types(topo)
    for i, op in enumerate(topo.operators):
        if is_source(op.type) or op.type not in OPERATORS:
            continue
        try:
            build_operator(op.type, op.params, op.function, types[op.name][0].get(0, ANY))
        except (ValueError, TypeError, LookupError) as exc:
            yield Problem(("operators", i, "params"), str(exc))
            return


def _function_hint() -> str:
    return f"built-ins: {builtin_summary()}, or 'module:function'"


# Words a text source may generate in one run. The verdict runs out of core, so disk
# bounds it: 800M words were 11.7 GB a side (docs/protocols.md, wordcount at 100M lines).
MAX_WORDS = 1_000_000_000


def _source_params(at: Loc, op: OperatorSpec, seed: int, records: int) -> Iterator[Problem]:
    spec = SOURCES[op.type]
    for key, value in op.params.items():
        if key not in spec.defaults:
            yield Problem(
                (*at, "params", key),
                f"unknown param '{key}' for {op.type} (known: {', '.join(spec.defaults)})",
            )
            return
        wrong = _wrong_type(value, spec.defaults[key])
        if wrong:
            yield Problem((*at, "params", key), wrong)
            return
    try:
        merged = check_source(op.type, op.params)
    except (ValueError, TypeError) as exc:
        yield Problem((*at, "params"), str(exc))
        return
    words = records * int(merged.get("words_per_line", 1))
    if words > MAX_WORDS:
        yield Problem((*at, "params", "words_per_line"),
                      f"{records} records x {merged['words_per_line']} words is {words} "
                      f"words, more than a run may generate ({MAX_WORDS})")


def _wrong_type(value: object, default: object) -> str | None:
    """A message if `value` cannot stand in for a param whose default is `default`."""
    if isinstance(default, bool) or not isinstance(default, int | float):
        return None
    number = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    if isinstance(default, int) and (number is None or not number.is_integer()):
        return f"expected an integer, got {value!r}"
    if isinstance(default, float) and number is None:
        return f"expected a number, got {value!r}"
    return None


def _has_sink(topo: Topology) -> Iterator[Problem]:
    if not any(op.type == "sink" for op in topo.operators):
        yield Problem(("operators",), "no sink; add an operator of type 'sink'")


# ---------------------------------------------------------------- edges


def _valid_edges(topo: Topology) -> list[tuple[int, EdgeSpec]]:
    """Edges whose ends both exist; the others are reported by `_edge_ends`."""
    names = {op.name for op in topo.operators}
    return [(i, e) for i, e in enumerate(topo.edges) if e.src in names and e.dst in names]


def _edge_ends(topo: Topology) -> Iterator[Problem]:
    names = {op.name for op in topo.operators}
    for i, edge in enumerate(topo.edges):
        for field, name in (("from", edge.src), ("to", edge.dst)):
            if name not in names:
                yield Problem(("edges", i, field), f"no operator named '{name}'")


def _cycle(topo: Topology) -> Iterator[Problem]:
    edges = [(e.src, e.dst) for _, e in _valid_edges(topo)]
    cycle = find_cycle([op.name for op in topo.operators], edges)
    if cycle:
        yield Problem(("edges",), "cycle " + " -> ".join(cycle))


def find_cycle(nodes: list[str], edges: list[tuple[str, str]]) -> list[str] | None:
    """A cycle as ``[a, b, a]``, found by depth-first search in file order, or None."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        succ[src].append(dst)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in succ[node]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in nodes:
        if node not in state and (found := visit(node)):
            return found
    return None


def _roles(topo: Topology) -> Iterator[Problem]:
    kinds = {op.name: op.type for op in topo.operators}
    edges = _valid_edges(topo)
    for i, edge in edges:
        if is_source(kinds[edge.dst]):
            yield Problem(("edges", i, "to"), f"'{edge.dst}' is a source and takes no input")
        if kinds[edge.src] == "sink":
            yield Problem(("edges", i, "from"), f"'{edge.src}' is a sink and has no output")
    has_in = {e.dst for _, e in edges}
    has_out = {e.src for _, e in edges}
    for i, op in enumerate(topo.operators):
        if not is_source(op.type) and op.name not in has_in:
            yield Problem(("operators", i), f"'{op.name}' has no incoming edge")
        if op.type != "sink" and op.name not in has_out:
            yield Problem(
                ("operators", i), f"'{op.name}' has no outgoing edge; its output would be lost"
            )


def _inputs(kind: str) -> int:
    op_type = OPERATORS.get(kind)
    return op_type.inputs if op_type else 0


def _ports(topo: Topology) -> Iterator[Problem]:
    kinds = {op.name: op.type for op in topo.operators}
    used: dict[str, set[int]] = {}
    for i, edge in _valid_edges(topo):
        n = _inputs(kinds[edge.dst])
        if n and edge.port >= n:
            yield Problem(
                ("edges", i, "port"),
                f"'{edge.dst}' ({kinds[edge.dst]}) has one input; the port must be 0",
            )
        used.setdefault(edge.dst, set()).add(edge.port)
    for i, op in enumerate(topo.operators):
        n = _inputs(op.type)
        for port in range(n if n > 1 else 0):
            if port not in used.get(op.name, set()):
                yield Problem(
                    ("operators", i),
                    f"{op.type} '{op.name}' needs an edge on port {port} ({_side(port)} input)",
                )


def _side(port: int) -> str:
    return "left" if port == 0 else "right"


def _forward(topo: Topology) -> Iterator[Problem]:
    par = {op.name: op.parallelism for op in topo.operators}
    for i, edge in _valid_edges(topo):
        src_p, dst_p = par[edge.src], par[edge.dst]
        if edge.partition == "forward" and src_p != dst_p and dst_p != 1:
            yield Problem(
                ("edges", i, "partition"),
                f"forward needs equal parallelism ('{edge.src}' has {src_p}, "
                f"'{edge.dst}' has {dst_p}); use hash, round-robin or broadcast",
            )


# ---------------------------------------------------------------- queries


def _queries(topo: Topology) -> Iterator[Problem]:
    kinds = {op.name: op.type for op in topo.operators}
    sinks = [op.name for op in topo.operators if op.type == "sink"]
    first: dict[str, int] = {}
    for i, q in enumerate(topo.queries):
        if kinds.get(q.sink) != "sink":
            what = f"'{q.sink}' is a {kinds[q.sink]}, not a sink" if q.sink in kinds else \
                f"no sink named '{q.sink}'"
            yield Problem(("queries", i, "sink"), f"{what} (sinks: {', '.join(sinks)})")
        elif q.sink in first:
            yield Problem(("queries", i, "sink"),
                          f"query '{q.sink}' is already given (queries[{first[q.sink]}])")
        else:
            first[q.sink] = i
