"""Record types along a topology: what each operator makes, so edges can be checked and
operators can name value fields (key_by field, argmax field) instead of indices."""

from __future__ import annotations

from ftctl.runtime.records import ANY, SAME
from ftctl.runtime.topology import OperatorSpec, Topology


def made_type(op: OperatorSpec, in_type: str) -> str:
    """The record type ``op`` emits when fed ``in_type``."""
    from ftctl.runtime.operators import OPERATORS, is_source, resolve_function
    from ftctl.runtime.sources import SOURCES

    if op.out_type:
        return op.out_type
    if op.type == "source.table":
        return str(op.params.get("record_type", ANY))
    if is_source(op.type):
        spec = SOURCES.get(op.type)
        return spec.makes if spec else ANY
    kind = OPERATORS.get(op.type)
    if kind is None:
        return ANY
    if kind.makes == "function":
        try:
            fn = resolve_function(op.function or "")
        except LookupError:
            return ANY
        made = str(getattr(fn, "makes", SAME if op.type == "filter" else ANY))
        return in_type if made == SAME else made
    return kind.makes or in_type


def record_types(topology: Topology) -> dict[str, tuple[dict[int, str], str]]:
    """Per operator: (input type per port, output type), in topological order.

    A port fed by producers of different types is ``any``.
    """
    from ftctl.runtime.graph import topo_order

    out: dict[str, tuple[dict[int, str], str]] = {}
    for name in topo_order(topology):
        op = topology.operator(name)
        ins: dict[int, str] = {}
        for e in topology.edges:
            if e.dst == name and e.src in out:
                t = out[e.src][1]
                ins[e.port] = t if ins.get(e.port, t) == t else ANY
        in_type = ins.get(0, ANY) if len(ins) <= 1 else ANY
        out[name] = (ins, made_type(op, in_type))
    return out
