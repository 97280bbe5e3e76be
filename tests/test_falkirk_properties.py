"""Invariants the paper states, on random epoch dataflows (hypothesis).

§3.6: the loop ends with a consistent assignment, values only move down, and the result
is the greatest consistent one (closed under max), so it does not depend on the visiting
order and shrinks as more instances fail. §4.2: the low-watermark is below every rollback
and GC under it changes no rollback.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.falkirk.fixedpoint import FixedPoint, consistent
from protocols.falkirk.frontier import EPOCHS, TOP, sub
from protocols.falkirk.gc import low_watermark, prune
from protocols.falkirk.model import Dataflow, Edge, Entry, Node
from tests.falkirk_cases import brute_force


@st.composite
def dataflows(draw: st.DrawFn) -> Dataflow:
    """A random DAG of epoch instances: node 0 is a source (durable TOP, logs), the others
    have a chain of checkpoints, some log their outputs, some have a sink's volatile top."""
    n = draw(st.integers(2, 5))
    epochs = draw(st.integers(1, 4))
    edges: dict[str, Edge] = {}
    for dst in range(1, n):
        srcs = draw(st.sets(st.integers(0, dst - 1), min_size=1, max_size=2))
        for src in sorted(srcs):
            closed = draw(st.one_of(st.none(), st.integers(-1, epochs)))
            edges[f"{src}-{dst}"] = Edge(str(src), str(dst), closed=closed)
    nodes = {}
    for i in range(n):
        p = str(i)
        ins = [e for e, ed in edges.items() if ed.dst == p]
        outs = [e for e, ed in edges.items() if ed.src == p]
        logs = outs if i == 0 or draw(st.booleans()) else []
        ks = sorted(draw(st.sets(st.integers(0, epochs), max_size=3)))
        chain = [Entry(k, consumed={d: k for d in ins},
                       discarded={e: k for e in outs if e not in logs}, notified=k,
                       logged={e: tuple(range(k + 1)) for e in logs})
                 for k in [-1, *ks]]
        top_c = draw(st.integers(max(ks, default=-1), epochs + 1))
        chain.append(Entry(TOP, consumed={d: top_c for d in ins},
                           discarded={e: top_c for e in outs if e not in logs},
                           notified=max(ks, default=-1),
                           logged={e: tuple(range(top_c + 1)) for e in logs},
                           durable=i == 0))
        nodes[p] = Node(EPOCHS, tuple(chain))
    return Dataflow(nodes, edges)


failed_sets = st.sets(st.integers(0, 4).map(str))


def _failed(flow: Dataflow, raw: set[str]) -> set[str]:
    return {p for p in raw if p in flow.nodes}


@settings(max_examples=60, deadline=None)
@given(dataflows(), failed_sets)
def test_result_is_a_consistent_fixed_point_below_the_start(flow: Dataflow,
                                                            raw: set[str]) -> None:
    failed = _failed(flow, raw)
    fp = FixedPoint(flow, failed)
    sol = fp.solve()
    assert consistent(flow, failed, sol.f)
    chains = fp.chains()
    for p, e in sol.f.items():
        assert e in chains[p]  # a restorable frontier
        assert sub(EPOCHS, e.front, chains[p][-1].front)  # only moved down
    # solving again from the result changes nothing
    again = fp.solve(chains={p: tuple(x for x in chains[p] if sub(EPOCHS, x.front, e.front))
                             for p, e in sol.f.items()})
    assert again.fronts == sol.fronts


@settings(max_examples=40, deadline=None)
@given(dataflows(), failed_sets, st.randoms(use_true_random=False))
def test_greatest_and_independent_of_order(flow: Dataflow, raw: set[str], rnd) -> None:
    failed = _failed(flow, raw)
    sol = FixedPoint(flow, failed).solve().fronts
    assert brute_force(flow, failed) == sol
    order = list(flow.nodes)
    rnd.shuffle(order)
    assert FixedPoint(flow, failed).solve(order=order, jacobi=False).fronts == sol


@settings(max_examples=60, deadline=None)
@given(dataflows(), failed_sets)
def test_chaotic_iteration_reaches_the_same_fixed_point(flow: Dataflow, raw: set[str]) -> None:
    """The worklist solver the low-watermark uses gives Figure 6's result, f and fn."""
    failed = _failed(flow, raw)
    jacobi = FixedPoint(flow, failed).solve()
    worklist = FixedPoint(flow, failed).solve_worklist()
    assert (worklist.fronts, dict(worklist.fn)) == (jacobi.fronts, dict(jacobi.fn))
    assert low_watermark(flow) == FixedPoint(flow, flow.nodes).solve().fronts


@settings(max_examples=60, deadline=None)
@given(dataflows(), failed_sets, failed_sets)
def test_monotone_in_the_failed_set(flow: Dataflow, a: set[str], b: set[str]) -> None:
    small = _failed(flow, a)
    big = small | _failed(flow, b)
    f_small = FixedPoint(flow, small).solve().fronts
    f_big = FixedPoint(flow, big).solve().fronts
    assert all(sub(EPOCHS, f_big[p], f_small[p]) for p in flow.nodes)


@settings(max_examples=60, deadline=None)
@given(dataflows(), failed_sets)
def test_watermark_below_rollback_and_gc_changes_nothing(flow: Dataflow,
                                                         raw: set[str]) -> None:
    failed = _failed(flow, raw)
    lw = low_watermark(flow)
    f = FixedPoint(flow, failed).solve().fronts
    assert all(sub(EPOCHS, lw[p], f[p]) for p in flow.nodes)
    after = FixedPoint(flow.with_entries(prune(flow, lw)), failed).solve().fronts
    assert after == f
