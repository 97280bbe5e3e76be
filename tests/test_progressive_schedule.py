"""The recovery scheduler of papers/004 (§5) on the worked examples of the progressive spec
(§6: E1-E5, E4 = the Fig. 5 plan): exact picks, order and per-query recovery times under
profit density, topological order and blocking recovery; plus its invariants."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.queries import topology_queries
from protocols.progressive.schedule import (
    Blocking,
    Planner,
    ProfitDensity,
    Query,
    Timeline,
    Topological,
    planner,
    replay,
)

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def pending(failed: dict[str, int], topo: Sequence[str]) -> list[str]:
    """Pending instances in execution order: ``op[0]``, ``op[1]``, ... per operator."""
    return [f"{op}[{i}]" for op in topo for i in range(failed.get(op, 0))]


def q(name: str, *ops: str, prt: float = 1.0) -> Query:
    return Query(name, frozenset(ops), prt)


# ---------------------------------------------------------------- the examples


def e1() -> tuple[list[Query], list[str]]:
    """Paper Fig. 1: Q1 = {O1, O2}, Q2 = {O1, O3}, O1 shared."""
    return ([q("Q1", "O1", "O2"), q("Q2", "O1", "O3")],
            pending({"O1": 2, "O2": 1, "O3": 2}, ["O1", "O2", "O3"]))


def e2(prt3: float) -> tuple[list[Query], list[str]]:
    """src -> A (2 of 4 failed) -> S1, S2; src -> B (3 of 3) -> S3."""
    return ([q("Q1", "src", "A", "S1"), q("Q2", "src", "A", "S2"),
             q("Q3", "src", "B", "S3", prt=prt3)],
            pending({"A": 2, "B": 3, "S1": 1, "S2": 1, "S3": 1},
                    ["src", "A", "B", "S1", "S2", "S3"]))


def e3() -> tuple[list[Query], list[str]]:
    """A (4) shared by Q1, Q2, Q4; B (2) by Q3 alone."""
    return ([q("Q1", "A", "S1"), q("Q2", "A", "S2"), q("Q3", "B", "S3"), q("Q4", "A", "S4")],
            pending({"A": 4, "B": 2, "S1": 1, "S2": 1, "S3": 1, "S4": 1},
                    ["A", "B", "S1", "S2", "S3", "S4"]))


def e5() -> tuple[list[Query], list[str]]:
    """Once Q1 took A, Q2 overtakes Q3: densities are recomputed after each pick."""
    return ([q("Q1", "A", "S1"), q("Q2", "A", "S2"), q("Q3", "B", "S3", prt=1.2)],
            pending({"A": 4, "S1": 1, "S2": 2, "B": 3, "S3": 1}, ["A", "B", "S1", "S2", "S3"]))


UNIT = [(float(t), 1) for t in range(1, 9)]
FOURS = [(1.0, 4), (2.0, 4)]

# example, problem, arrivals, {schedule: recovery times}, sum prt*t per schedule
TABLE = [
    ("E1", e1(), [(1.0, 3), (2.0, 2)],
     {"profit-density": {"Q1": 1, "Q2": 2}, "topological": {"Q1": 1, "Q2": 2},
      "blocking": {"Q1": 2, "Q2": 2}}, (3, 3, 4)),
    ("E2a", e2(1.5), UNIT,
     {"profit-density": {"Q1": 3, "Q2": 4, "Q3": 8}, "topological": {"Q1": 6, "Q2": 7, "Q3": 8},
      "blocking": {"Q1": 8, "Q2": 8, "Q3": 8}}, (19, 25, 28)),
    ("E2b", e2(3.0), FOURS,
     {"profit-density": {"Q3": 1, "Q1": 2, "Q2": 2}, "topological": {"Q1": 2, "Q2": 2, "Q3": 2},
      "blocking": {"Q1": 2, "Q2": 2, "Q3": 2}}, (7, 10, 10)),
    ("E2c", e2(3.0), [(1.0, 3), (2.0, 5)],
     {"profit-density": {"Q1": 1, "Q2": 2, "Q3": 2}, "topological": {"Q1": 2, "Q2": 2, "Q3": 2},
      "blocking": {"Q1": 2, "Q2": 2, "Q3": 2}}, (9, 10, 10)),
    ("E2d", e2(1.5), FOURS,
     {"profit-density": {"Q1": 1, "Q2": 1, "Q3": 2}, "topological": {"Q1": 2, "Q2": 2, "Q3": 2},
      "blocking": {"Q1": 2, "Q2": 2, "Q3": 2}}, (5, 7, 7)),
    ("E3", e3(), [(1.0, 5), (2.0, 3), (3.0, 2)],
     {"profit-density": {"Q1": 1, "Q2": 2, "Q4": 2, "Q3": 3},
      "topological": {"Q1": 2, "Q2": 2, "Q3": 3, "Q4": 3},
      "blocking": {"Q1": 3, "Q2": 3, "Q3": 3, "Q4": 3}}, (8, 10, 12)),
    ("E5", e5(), [(1.0, 9), (2.0, 4)],
     {"profit-density": {"Q1": 1, "Q2": 1, "Q3": 2}, "topological": {"Q1": 1, "Q2": 2, "Q3": 2},
      "blocking": {"Q1": 2, "Q2": 2, "Q3": 2}}, (4.4, 5.4, 6.4)),
]


def run(schedule: str, problem: tuple[list[Query], list[str]],
        arrivals: list[tuple[float, int]]) -> Timeline:
    queries, pend = problem
    return replay(planner(schedule), queries, pend, arrivals)  # type: ignore[arg-type]


@pytest.mark.parametrize("name,problem,arrivals,times,weighted", TABLE,
                         ids=[row[0] for row in TABLE])
def test_recovery_times_per_schedule(name: str, problem: tuple[list[Query], list[str]],
                                     arrivals: list[tuple[float, int]],
                                     times: dict[str, dict[str, float]],
                                     weighted: tuple[float, float, float]) -> None:
    for schedule, want in times.items():
        tl = run(schedule, problem, arrivals)
        assert tl.recovered == want, schedule
        assert not tl.pending, schedule
    got = tuple(round(run(s, problem, arrivals).weighted(problem[0]), 9)
                for s in ("profit-density", "topological", "blocking"))
    assert got == weighted


# Every instance per operator, for a planted bug that counts them all.
WHOLE = {"src": 1, "A": 4, "B": 3, "S1": 1, "S2": 1, "S3": 1, "S4": 1, "O1": 2, "O2": 1,
         "O3": 2}


def check_examples(make: Callable[[], Planner] = lambda: ProfitDensity(sizes=WHOLE)) -> None:
    """Every profit-density example of the spec, exact (mutants plant into ``make``)."""
    for name, problem, arrivals, times, _ in TABLE:
        assert replay(make(), *problem, arrivals).recovered == times["profit-density"], name
    assert replay(make(), *e2(3.0), [(1.0, 3), (2.0, 5)]).picks() == [["Q1"], ["Q2", "Q3"]]
    assert replay(make(), *e3(), [(1.0, 5), (2.0, 1), (3.0, 4)]).picks() == \
        [["Q1"], ["Q2"], ["Q4", "Q3"]]
    assert replay(make(), *e5(), [(1.0, 9), (2.0, 4)]).picks() == [["Q1", "Q2"], ["Q3"]]


def test_profit_density_examples() -> None:
    check_examples()


def test_e1_densities_and_update() -> None:
    queries, pend = e1()
    pd = ProfitDensity()
    remaining = {"O1": 2, "O2": 1, "O3": 2}
    assert pd.density(queries[0], remaining, queries) == 0.5
    assert pd.density(queries[1], remaining, queries) == pytest.approx(1 / 3)
    plan = pd.plan(queries, pend, 3)
    assert [(p.query, p.density, p.cost) for p in plan.picks] == [("Q1", 0.5, 3)]
    assert plan.started == ("O1[0]", "O1[1]", "O2[0]") and plan.free == 0
    # O1 started: Q2 alone now, and only O3 left to pay for.
    rest = [i for i in pend if i not in plan.started]
    assert pd.density(queries[1], {"O3": 2}, [queries[1]]) == 0.5
    assert pd.plan(queries, rest, 2).started == ("O3[0]", "O3[1]")


def test_e2c_head_does_not_fit_keep_scanning() -> None:
    tl = run("profit-density", e2(3.0), [(1.0, 3), (2.0, 5)])
    assert tl.picks() == [["Q1"], ["Q2", "Q3"]]
    first = tl.plans[0]
    assert first.started == ("A[0]", "A[1]", "S1[0]")
    # Q2 became the head once A was started: PD = 1 / (S2's 1 slot).
    assert [(p.query, p.density, p.cost) for p in tl.plans[1].picks] == [("Q2", 1.0, 1),
                                                                          ("Q3", 0.75, 4)]


def test_e3b_ties_by_declaration() -> None:
    tl = run("profit-density", e3(), [(1.0, 5), (2.0, 1), (3.0, 4)])
    assert tl.picks() == [["Q1"], ["Q2"], ["Q4", "Q3"]]


def test_e5_picks() -> None:
    tl = run("profit-density", e5(), [(1.0, 9), (2.0, 4)])
    assert tl.picks() == [["Q1", "Q2"], ["Q3"]]
    assert [round(p.density, 9) for p in tl.plans[0].picks] == [round(1 / 3, 9), 0.5]


def test_fit_strict_is_the_papers_wording() -> None:
    queries, pend = e1()
    tl = replay(ProfitDensity(fit="lt"), queries, pend, [(1.0, 3), (2.0, 2)])
    # Nothing of exactly 3 slots fits at t=1; at t=2 Q1 (3 < 5) does, Q2 (2 < 2) not.
    assert tl.picks() == [[], ["Q1"]] and tl.recovered == {"Q1": 2.0}


def test_leftover_prefill_starts_the_best_query_early() -> None:
    queries, pend = e2(1.5)
    idle = ProfitDensity().plan(queries, pend, 2)
    assert idle.started == () and idle.free == 2
    pre = ProfitDensity(leftover="prefill").plan(queries, pend, 2)
    assert pre.started == ("A[0]", "A[1]") and pre.free == 0 and pre.picks == ()


# ---------------------------------------------------------------- E4: the Fig. 5 plan

SAMPLE1 = [121.9, 165.4, 165.6, 186.0, 194.8, 208.6, 256.2, 356.9]
SAMPLE2 = [171.0, 196.5, 260.1, 277.6, 281.8, 283.8, 338.1, 357.0]


def fig5() -> tuple[list[Query], list[str]]:
    """progressive15.yaml with every instance but the source's and the parser's failed."""
    topo = load_topology(TOPOLOGIES / "progressive15.yaml")
    graph = ExecutionGraph(topo)
    queries = [Query(f"Q{k}", qi.operators, qi.priority)
               for k, qi in enumerate(topology_queries(topo), start=1)]
    pend = [i for i in graph.order if not i.startswith(("tweets[", "parser["))]
    return queries, pend


@pytest.mark.parametrize("times,mean", [(SAMPLE1, (196.9, 275.6, 356.9)),
                                        (SAMPLE2, (265.0, 323.2, 357.0))])
def test_e4_fig5_plan(times: list[float], mean: tuple[float, float, float]) -> None:
    queries, pend = fig5()
    assert len(pend) == 90 and [x.name for x in queries][:2] == ["Q1", "Q2"]
    arrivals = [(t, 12) for t in times]
    pd = run("profit-density", (queries, pend), arrivals)
    assert pd.picks() == [["Q1", "Q2"], ["Q3", "Q4"], ["Q5", "Q6"], ["Q7", "Q8"],
                          ["Q9", "Q10"], ["Q11", "Q12"], ["Q13", "Q14"], ["Q15"]]
    assert pd.plans[0].picks[0].density == pytest.approx(1 / (5 / 6 + 1))
    assert pd.plans[-1].free == 6
    assert pd.available_after(times) == [2, 4, 6, 8, 10, 12, 14, 15]
    topo = run("topological", (queries, pend), arrivals)
    assert topo.available_after(times) == [0, 1, 2, 3, 4, 4, 9, 15]
    block = run("blocking", (queries, pend), arrivals)
    assert block.available_after(times) == [0] * 7 + [15]
    got = tuple(round(sum(tl.recovered.values()) / 15, 1) for tl in (pd, topo, block))
    assert got == mean


# ---------------------------------------------------------------- invariants

OPS = ["A", "B", "C", "D", "E"]


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[Query], list[str], list[tuple[float, int]]]:
    n = draw(st.integers(1, 5))
    queries = []
    for k in range(n):
        ops = draw(st.sets(st.sampled_from(OPS), min_size=1, max_size=4))
        prt = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]))
        queries.append(Query(f"Q{k}", frozenset(ops | {f"S{k}"}), prt))
    # Every operator of a topology is in some query (each has a path to a sink).
    used = set().union(*(qu.operators for qu in queries))
    failed = {op: draw(st.integers(0, 3)) for op in sorted(used)}
    pend = pending(failed, [*OPS, *(f"S{k}" for k in range(n))])
    slots = draw(st.lists(st.integers(0, 6), min_size=1, max_size=6))
    return queries, pend, [(float(i + 1), s) for i, s in enumerate(slots)]


@settings(max_examples=150, deadline=None)
@given(problems())
def test_profit_density_plan_invariants(problem: tuple[list[Query], list[str],
                                                       list[tuple[float, int]]]) -> None:
    queries, pend, arrivals = problem
    p = ProfitDensity()
    free = 0
    left = list(pend)
    for _t, slots in arrivals:
        free += slots
        plan = p.plan(queries, left, free)
        # Never more than the free slots; only pending instances, each once, in order.
        assert len(plan.started) + plan.free == free and plan.free >= 0
        assert len(set(plan.started)) == len(plan.started) and set(plan.started) <= set(left)
        # Whole queries only (leftover idle): every pick leaves its query with nothing
        # pending, and what is started is exactly the picks' operators' pending instances.
        rest = [i for i in left if i not in plan.started]
        picked = {x.query for x in plan.picks}
        ops = {i.split("[")[0] for i in rest}
        for qu in queries:
            if qu.name in picked:
                assert not qu.operators & ops
        # Maximal (D5): no failed query left that would still fit.
        for qu in queries:
            cost = sum(1 for i in rest if i.split("[")[0] in qu.operators)
            assert cost == 0 or cost > plan.free
        free, left = plan.free, rest


@settings(max_examples=100, deadline=None)
@given(problems())
def test_baselines_and_the_shared_end(problem: tuple[list[Query], list[str],
                                                     list[tuple[float, int]]]) -> None:
    queries, pend, arrivals = problem
    p: Planner
    for p in (Topological(), Blocking()):
        tl = replay(p, queries, pend, arrivals)
        total = sum(s for _, s in arrivals)
        started = [i for plan in tl.plans for i in plan.started]
        if isinstance(p, Topological):  # a prefix of the execution order, as far as slots go
            assert started == pend[:min(total, len(pend))]
        else:  # all or nothing
            assert started in ([], pend)
            assert len(set(tl.recovered.values())) <= 1
    # With enough capacity at the first arrival, every schedule recovers everything then.
    big = [(1.0, len(pend))]
    for s in ("profit-density", "topological", "blocking"):
        tl = replay(planner(s), queries, pend, big)  # type: ignore[arg-type]
        assert not tl.pending and set(tl.recovered.values()) <= {1.0}
