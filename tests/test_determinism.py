"""The dynamic determinism check: a topology whose output depends on the order of
deliveries between instances is refused by `ftctl validate --determinism N` and before
`ftctl sim`'s first schedule; bundled topologies are accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.load import load_topology
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.determinism import ShuffledHost, first_divergence
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost
from ftctl.verify.checker import verify
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from tests.conftest import TOPOLOGIES

pytestmark = pytest.mark.sim

runner = CliRunner()
ORDER_DEPENDENT = Path(__file__).parent / "fixtures" / "order-dependent.yaml"


def _one_error_line(stderr: str, *words: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_validate_refuses_an_order_dependent_topology_naming_sink_and_key() -> None:
    plain = runner.invoke(app, ["validate", str(ORDER_DEPENDENT)])
    assert plain.exit_code == 0, plain.output  # the static rules let it through
    checked = runner.invoke(app, ["validate", str(ORDER_DEPENDENT), "--determinism", "3"])
    assert checked.exit_code == 2
    _one_error_line(checked.stderr, str(ORDER_DEPENDENT), "sink 'out' key ", "differs")


def test_sim_refuses_it_before_the_first_schedule_unless_turned_off() -> None:
    args = ["sim", str(ORDER_DEPENDENT), "-p", "none", "-n", "2", "--json"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    _one_error_line(refused.stderr, str(ORDER_DEPENDENT), "sink 'out'")
    assert refused.stdout == ""  # no schedule ran
    ran = runner.invoke(app, [*args, "--determinism", "0"])
    assert ran.exit_code in (0, 1), ran.output


def test_the_check_varies_delivery_order_between_instances() -> None:
    """Seeds alone (the plain host's per-message delays) rarely reorder batches between
    instances: nine of the fixture's first ten plain interleavings match golden, while
    the check's lagging senders show the difference within three."""
    graph = ExecutionGraph(load_topology(ORDER_DEPENDENT))
    golden = golden_output(graph)
    modes = graph.topology.sink_modes()
    matched = sum(
        verify(modes, golden, SimHost(graph, PROTOCOLS["none"], NoParams(), seed=seed,
                                      max_events=None).run().outputs,
               Guarantee.EXACTLY_ONCE).passed
        for seed in range(1, 11))
    assert matched >= 8
    found = first_divergence(graph, 3, golden)
    assert found is not None and found.sink == "out"
    # ... and it keeps channels FIFO: an order-independent topology passes it.
    assert first_divergence(ExecutionGraph(load_topology(TOPOLOGIES / "windowed.yaml")),
                            3) is None
    assert ShuffledHost(graph, 1).run().complete


def test_validate_accepts_bundled_topologies_and_skips_big_ones_saying_so() -> None:
    files = [TOPOLOGIES / "wordcount.yaml", TOPOLOGIES / "diamond.yaml",
             TOPOLOGIES / "nexmark" / "q5.yaml"]
    result = runner.invoke(app, ["validate", *map(str, files), "--determinism", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("same output under 2 interleavings") == 2
    assert "q5.yaml" in result.stdout and "determinism not checked: 1,000,000 records" \
        in result.stdout
