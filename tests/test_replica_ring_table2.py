"""Paper 002 Table 2 on the simulation host: the wire model and the figure's shape."""

from __future__ import annotations

from pathlib import Path

from ftctl.figures import FigureOptions
from ftctl.figures.fig_002_table1 import chain
from ftctl.figures.fig_002_table2 import FIGURE, HEADER, fit, measure, tuple_sizer
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.messages import Batch
from ftctl.sim.host import SimHost
from ftctl.sim.wire import WiredSimHost, WireModel
from protocols.contract.spec import Guarantee
from protocols.replica_ring.messages import Ack, Data
from protocols.replica_ring.params import ReplicaRingParams
from protocols.replica_ring.spec import SPEC


def _hosts(wire: WireModel) -> tuple[SimHost, WiredSimHost]:
    topo = chain(2, 40, sources=2).with_input(rate=1e6)
    params = ReplicaRingParams(reinstate_after=None, retry_every=5.0, ping_timeout=5.0)
    return (SimHost(ExecutionGraph(topo), SPEC, params, seed=4, max_events=None),
            WiredSimHost(ExecutionGraph(topo), SPEC, params, seed=4, wire=wire))


def test_the_wire_changes_the_clock_not_the_output() -> None:
    plain, wired = _hosts(WireModel(per_message=1e-3, bandwidth=1e6))
    free = _hosts(WireModel(per_message=0.0, bandwidth=float("inf")))[1]
    a, b, c = plain.run(), wired.run(), free.run()
    assert a.complete and b.complete and c.complete
    # interleavings differ with the clock; the records do not
    assert {k: sorted(v) for k, v in a.outputs.items()} == {
        k: sorted(v) for k, v in b.outputs.items()}
    assert wired.wire_messages == b.stats.messages  # no failures: nothing was lost
    # a wire that costs nothing is the plain host, draw for draw
    assert c.outputs == a.outputs and c.stats.kinds == a.stats.kinds
    assert wired.last_output > free.last_output + 1e-3 * 100


def test_a_shared_link_serializes_every_units_messages() -> None:
    per_unit = _hosts(WireModel(per_message=1e-4, bandwidth=1e9))[1]
    shared = _hosts(WireModel(per_message=1e-4, bandwidth=1e9, shared=True))[1]
    per_unit.run()
    shared.run()
    # the shared link sends everything one after another: at least messages x 0.1 ms
    assert shared.last_output >= 1e-4 * shared.wire_messages * 0.5
    assert shared.last_output > per_unit.last_output


def test_bytes_cost_bandwidth() -> None:
    link = WireModel(per_message=0.0, bandwidth=1000.0)
    assert link.cost(500) == 0.5
    size = tuple_sizer(64)
    assert size(Batch([(1, 1), (2, 2)])) == HEADER + 128
    assert size(Data("u", (0, ((1, 1),), 0), "A[0]")) == HEADER + 64
    assert size(Ack("u")) == HEADER


def test_exactly_once_costs_more_than_at_most_once_on_the_wire() -> None:
    amo, amo_msgs = measure(2, 64, Guarantee.AT_MOST_ONCE, seed=0)
    eo, eo_msgs = measure(2, 64, Guarantee.EXACTLY_ONCE, seed=0)
    assert eo_msgs > amo_msgs
    assert eo > amo


def test_fit_recovers_a_quadratic() -> None:
    a, c, residual = fit({2: 2 * 0.5 + 0.1, 3: 6 * 0.5 + 0.1, 4: 12 * 0.5 + 0.1})
    assert abs(a - 0.5) < 1e-9 and abs(c - 0.1) < 1e-9 and residual < 1e-9


def test_table2_quick_has_the_papers_shape(tmp_path: Path) -> None:
    result = FIGURE.run(FigureOptions(out=tmp_path, quick=True))
    summary = result.summary
    deltas = summary["deltas_s"]
    messages = summary["messages"]
    for size in ("small", "large"):
        assert 0 < deltas[size]["2"] < deltas[size]["3"]
        assert messages[size]["1"] < messages[size]["2"] < messages[size]["3"]
    # the R-part of the difference is the records' cost: it does not grow with T (C5)
    a_small, a_large = summary["fit"]["small"]["a"], summary["fit"]["large"]["a"]
    assert a_small > 0 and abs(a_small - a_large) / a_large < 0.25
    assert all(summary["shape"][k] for k in ("delta_positive", "delta_grows_with_r",
                                             "messages_grow_with_r"))
    assert (tmp_path / "table2-sim.png").stat().st_size > 0
