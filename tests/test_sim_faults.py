"""The simulation host's non-crash faults (ftctl/sim/*_faults.py, ftctl/sim/faults.py): pause
and hang detection with fenced zombies, partition and drop fence the receiver, delay keeps
FIFO, slow postpones, node loss, and every fault that cannot strike is logged skipped."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from ftctl.kernel.history import HistoryEvent
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim import faults as sf
from ftctl.sim.cluster import SimCluster
from ftctl.sim.faults import FAULT_KINDS, HANG_TIMEOUT, NET_DELAY, FailureSchedule, parse_kinds
from ftctl.sim.golden import golden_output
from ftctl.sim.host import SimHost, SimResult
from ftctl.sim.runner import Simulator, sim_params
from ftctl.verify.checker import verify
from protocols.contract.spec import Guarantee
from protocols.registry import PROTOCOLS
from tests.conftest import load

pytestmark = pytest.mark.sim

Delay, Drop, NodeLoss, Partition = sf.Delay, sf.Drop, sf.NodeLoss, sf.Partition
Pause, SimFault, Slow, Strike = sf.Pause, sf.SimFault, sf.Slow, sf.Strike

_GOLDEN: dict[str, Any] = {}


def _host(topology: str, protocol: str, seed: int = 3,
          cluster: SimCluster | None = None) -> SimHost:
    graph = ExecutionGraph(load(topology))
    return SimHost(graph, PROTOCOLS[protocol], sim_params(graph, PROTOCOLS[protocol], {}),
                   seed, trace=True, cluster=cluster)


def _run(topology: str, protocol: str, faults: list[tuple[float, SimFault]], seed: int = 3,
         cluster: SimCluster | None = None) -> tuple[SimHost, SimResult]:
    host = _host(topology, protocol, seed, cluster)
    for t, f in faults:
        host.at(t, lambda f=f: host.inject(f))  # type: ignore[misc]
    return host, host.run()


def _exactly_once(topology: str, result: SimResult) -> bool:
    if topology not in _GOLDEN:
        _GOLDEN[topology] = golden_output(ExecutionGraph(load(topology)))
    return verify(load(topology).sink_modes(), _GOLDEN[topology], result.outputs,
                  Guarantee.EXACTLY_ONCE, complete=result.complete).passed


def _events(result: SimResult, kind: str) -> list[HistoryEvent]:
    return [e for e in result.events if e.kind == kind]


def _deliveries(result: SimResult, dst: str) -> list[tuple[float, int, str]]:
    """(time, channel, what) of every delivery to ``dst``, from the trace."""
    out = []
    for line in result.trace:
        m = re.match(r"^(\S+) deliver ch(\d+) (\S+) -> (\S+)$", line)
        if m and m.group(4) == dst:
            out.append((float(m.group(1)), int(m.group(2)), m.group(3)))
    return out


def test_a_short_pause_holds_deliveries_in_order_and_detects_nothing() -> None:
    _, free = _run("wordcount", "none", [])
    _, res = _run("wordcount", "none", [(0.005, Pause(0, 0.004, "out[0]"))])
    assert res.outputs == free.outputs  # nothing lost, nothing repeated
    assert res.stats.failures == 0 and not _events(res, "failure-detected")
    (inj,), (healed,) = _events(res, "fault-injected"), _events(res, "fault-healed")
    assert (inj.payload["type"], inj.payload["target"], inj.t) == ("pause", "out[0]", 0.005)
    assert healed.t == pytest.approx(0.009)
    got = _deliveries(res, "out[0]")
    assert not [d for d in got if 0.005 < d[0] < 0.009]  # nothing handled while paused
    held = [d for d in got if d[0] == pytest.approx(0.009)]
    assert len(held) >= 2  # what waited is handled at the resume ...
    before = [d for d in _deliveries(free, "out[0]") if 0.005 <= d[0] < 0.009]
    assert [d[1:] for d in held] == [d[1:] for d in before]  # ... in its order


@pytest.mark.parametrize("protocol", ["checkpoint", "causal"])
def test_a_pause_past_the_hang_timeout_fences_a_zombie_sink(protocol: str) -> None:
    _, res = _run("wordcount", protocol, [(0.004, Pause(0, 2.5 * HANG_TIMEOUT, "out[0]"))])
    (det,) = _events(res, "failure-detected")
    assert det.payload["instances"] == ["out[0]"] and det.payload["cause"] == "heartbeat"
    assert det.t == pytest.approx(0.004 + HANG_TIMEOUT)
    assert any(e.instance == "out[0]" for e in _events(res, "instance-started"))
    (zombie,) = _events(res, "zombie-fenced")
    assert zombie.instance == "out[0]" and zombie.incarnation == 0
    assert zombie.t == pytest.approx(0.004 + 2.5 * HANG_TIMEOUT)
    assert zombie.payload["events"] > 0 and zombie.payload["dropped"] > 0
    # The zombie handled batches and tried to put out records (checkpoint's sink carries
    # them in its snapshot): none got through.
    assert sum(res.stats.zombie_actions[k] for k in ("Emit", "StageOutput", "Persist")) > 0
    assert res.complete and _exactly_once("wordcount", res)


def test_a_hung_source_is_replaced_and_exactly_once_holds() -> None:
    _, res = _run("diamond", "checkpoint", [(0.003, Pause(0, 2 * HANG_TIMEOUT, "tags[1]"))])
    assert [e.payload["instances"] for e in _events(res, "failure-detected")] == [["tags[1]"]]
    assert res.stats.failed_instances == ["tags[1]"]
    assert res.complete and _exactly_once("diamond", res)


def test_a_partition_fences_the_receiver() -> None:
    _, res = _run("wordcount", "checkpoint",
                  [(0.005, Partition(0, 0.004, "split[0]", ("count[0]",)))])
    lost = _events(res, "frame-lost")
    assert lost and (lost[0].host, lost[0].instance, lost[0].data) == (
        "sim", "count[0]", {"sender": "split[0]"})
    assert 0.005 <= lost[0].t <= 0.009
    det = _events(res, "failure-detected")[0]
    assert det.payload["instances"] == ["count[0]"] and det.payload["cause"] == "heartbeat"
    assert det.payload["reasons"] == {"count[0]": "frame(s) from split[0] lost to a channel fault"}
    assert res.complete and _exactly_once("wordcount", res)
    # Only the partitioned pair: split[1] -> count[0] still went through meanwhile.
    assert "split[1]" not in {e.payload.get("sender") for e in lost}


def test_drop_loses_messages_and_fences_the_receiver() -> None:
    _, res = _run("diamond", "checkpoint", [(0.004, Drop(0, 1.0, 0.003, "ones[0]"))])
    # ones[0]'s links both ways: to its children and from its source
    assert {e.instance for e in _events(res, "frame-lost")} <= {"evens[0]", "evens[1]",
                                                                  "all[0]", "all[1]",
                                                                  "ones[0]"}
    assert _events(res, "frame-lost") and res.complete and _exactly_once("diamond", res)


def test_delay_adds_latency_and_keeps_each_channel_fifo() -> None:
    _, free = _run("wordcount", "none", [])
    extra = 10 * NET_DELAY
    _, res = _run("wordcount", "none",
                  [(0.004, Delay(0, extra, 0.01, "lines[0]", jitter=4 * NET_DELAY))])
    assert _exactly_once("wordcount", res) and res.stats.failures == 0
    for dst in ("split[0]", "split[1]"):
        seqs = [int(re.sub(r"\D", "", w.split("(")[0])) for _, _, w in _deliveries(res, dst)
                if w.startswith("batch#")]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))  # FIFO, none lost
    # From the first step in the window on, nothing arrives for `extra` but what was in
    # flight before the delay began (at most one batch per channel).
    steps = [float(line.split()[0]) for line in res.trace if " step lines[0] " in line]
    arrivals = [t for t, _, w in _deliveries(res, "split[0]") + _deliveries(res, "split[1]")
                if w.startswith("batch#")]
    first = min(s for s in steps if s >= 0.004)
    assert len([a for a in arrivals if first < a < first + extra]) <= 2
    assert [a for a in arrivals if a >= first + extra]
    # Without the delay, batches keep arriving through that span. (Not the run's end time:
    # the source is paced, so a delay early on need not move the end.)
    free_arrivals = [t for t, _, w in _deliveries(free, "split[0]")
                     + _deliveries(free, "split[1]") if w.startswith("batch#")]
    assert len([a for a in free_arrivals if first < a < first + extra]) > 2


def test_slow_spaces_out_what_the_unit_handles() -> None:
    _, free = _run("wordcount", "none", [])
    _, res = _run("wordcount", "none", [(0.002, Slow(0, 6.0, 0.012, "count[0]"))])
    assert _exactly_once("wordcount", res) and res.stats.failures == 0
    times = [t for t, _, _ in _deliveries(res, "count[0]") if 0.002 <= t < 0.014]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps and min(gaps) >= 5.0 * NET_DELAY - 1e-9  # (factor - 1) x cost each
    assert len(times) < len([t for t, _, _ in _deliveries(free, "count[0]")
                             if 0.002 <= t < 0.014])


def test_a_slow_source_produces_factor_times_slower() -> None:
    _, free = _run("wordcount", "none", [])
    _, res = _run("wordcount", "none", [(0.0005, Slow(0, 3.0, 1.0, "lines[0]"))])
    assert _exactly_once("wordcount", res)
    assert res.end_time > 2.0 * free.end_time


def test_a_fault_on_a_restarting_target_is_logged_skipped() -> None:
    host = _host("wordcount", "checkpoint")
    fired: list[int] = []

    def again() -> None:  # right after the detection, count[0]'s replacement is pending
        if not fired:
            fired.append(1)
            host.inject(Strike(0, 1, ("count[0]",)))
            host.inject(Pause(0, 0.001, "count[0]"))
            host.inject(Slow(0, 2.0, 0.001, "nope[3]"))

    host.on_detected.append(again)
    host.at(0.005, lambda: host.inject(Strike(0, 1, ("count[0]",))))
    res = host.run()
    skipped = _events(res, "fault-skipped")
    assert [(e.payload["type"], e.payload["target"], e.payload["reason"]) for e in skipped] == [
        ("crash", "count[0]", "count[0] is restarting"),
        ("pause", "count[0]", "count[0] is restarting"),
        ("slow", "nope[3]", "no instance nope[3]")]
    assert res.stats.skipped == 3 and res.stats.failures == 1
    assert _exactly_once("wordcount", res)


def test_a_crash_of_a_dead_target_is_skipped_not_dropped() -> None:
    host = _host("wordcount", "none")
    host.at(0.005, lambda: host.inject(Strike(0, 1, ("split[1]",))))
    host.at(0.0055, lambda: host.inject(Strike(0, 1, ("split[1]",))))
    res = host.run()
    (skip,) = _events(res, "fault-skipped")
    assert skip.payload["reason"] == "split[1] is not running" and skip.t == 0.0055


def test_node_loss_needs_a_cluster_and_comes_back() -> None:
    _, res = _run("wordcount", "checkpoint", [(0.004, NodeLoss(0, 0.005))])
    (skip,) = _events(res, "fault-skipped")
    assert skip.data["reason"] == "no cluster (SimHost without nodes)"
    cluster = SimCluster.workers(2, 6)
    _, res = _run("wordcount", "checkpoint", [(0.004, NodeLoss(0, 0.005, "worker-1"))],
                  cluster=cluster)
    down, up = _events(res, "node-down"), _events(res, "node-up")
    assert down[0].data["node"] == "worker-1" and down[0].data["instances"]
    assert up[0].t == pytest.approx(0.009)
    assert res.complete and _exactly_once("wordcount", res)


def test_every_fault_has_an_inject_and_a_heal() -> None:
    cluster = SimCluster.workers(2, 12)
    faults: list[tuple[float, SimFault]] = [
        (0.002, Pause(0, 0.002, "split[0]")), (0.003, Partition(0, 0.002, "count[1]")),
        (0.004, Delay(0, 0.001, 0.002, "lines[0]")), (0.005, Slow(0, 2.0, 0.002, "out[0]")),
        (0.006, NodeLoss(0, 0.002))]
    _, res = _run("wordcount", "checkpoint", faults, cluster=cluster)
    injected = {e.fault: e for e in _events(res, "fault-injected")}
    healed = {e.fault: e for e in _events(res, "fault-healed")}
    assert sorted(e.payload["type"] for e in injected.values()) == sorted(
        ["pause", "partition", "delay", "slow", "node"])
    assert injected.keys() == healed.keys()
    for fid, e in injected.items():
        assert healed[fid].t == pytest.approx(e.t + e.payload["duration"])
    assert res.complete and _exactly_once("wordcount", res)


def test_crash_only_schedules_draw_as_before() -> None:
    import random

    a = FailureSchedule.random(random.Random(9), 300, 3, 3)
    b = FailureSchedule.random(random.Random(9), 300, 3, 3, ("crash",))
    assert a == b and all(isinstance(s, Strike) for s in a.strikes)
    mixed = FailureSchedule.random(random.Random(9), 300, 30, 3, FAULT_KINDS)
    assert {type(s).__name__ for s in mixed.strikes} == {"Strike", "Pause", "Partition",
                                                         "Delay", "Slow", "NodeLoss"}


def test_parse_kinds() -> None:
    assert parse_kinds("crash, pause,pause") == ("crash", "pause")
    with pytest.raises(ValueError, match="unknown fault kind 'kill'"):
        parse_kinds("crash,kill")
    with pytest.raises(ValueError, match="no fault kind"):
        parse_kinds(" , ")


ALL = ("crash", "pause", "partition", "delay", "slow", "node")


@pytest.mark.parametrize("topology", ["wordcount", "diamond"])
@pytest.mark.parametrize("protocol", ["checkpoint", "causal"])
def test_exactly_once_under_every_fault_kind(protocol: str, topology: str) -> None:
    sim = Simulator(load(topology), PROTOCOLS[protocol], {}, kinds=ALL)
    summary = sim.run_many(150, seed=1)
    assert summary.passed, (summary.violations, summary.failing_seeds[:5])
    assert summary.failures > 100


def test_none_is_caught_under_the_new_kinds() -> None:
    # judged at most once (none promises nothing on wordcount, whose count keeps state)
    sim = Simulator(load("wordcount"), PROTOCOLS["none"], {}, Guarantee.AT_MOST_ONCE,
                    kinds=("pause", "partition"))
    assert not sim.run_many(40, seed=1).passed


def test_sim_cli_draws_the_kinds_given_and_refuses_unknown_ones() -> None:
    import json

    from typer.testing import CliRunner

    from ftctl.cli import app
    from tests.conftest import TOPOLOGIES

    runner = CliRunner()
    topo = str(TOPOLOGIES / "wordcount.yaml")
    res = runner.invoke(app, ["sim", topo, "-p", "checkpoint", "-n", "8", "--json",
                              "--faults", "pause,slow"])
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["faults"] == ["pause", "slow"]
    assert out["faults_injected"] >= 8 and out["passed"]
    bad = runner.invoke(app, ["sim", topo, "--faults", "crash,kill"])
    assert bad.exit_code == 2
    # One line naming every kind --faults takes, in the registry's order, and the aliases.
    from ftctl.config.fault_kinds import FAULT_TYPES

    known = ", ".join(n for n, k in FAULT_TYPES.items() if k.draw)
    assert bad.output == (f"error: --faults: unknown fault kind 'kill' (known: {known}; "
                          "aliases crash = kill-task, node = kill-worker)\n")
    assert known.startswith("kill-task, kill-worker, pause") and "clock-stall" in known


def test_node_loss_keeps_the_protocols_fault_model() -> None:
    # replica-ring keeps one unit of each ring up: a node holding a whole ring stays up.
    graph = ExecutionGraph(load("replica-chain"))
    spec = PROTOCOLS["replica-ring"]
    host = SimHost(graph, spec, sim_params(graph, spec, {}), 1,
                   cluster=SimCluster.workers(1, 2 * len(graph.order)))
    host.at(0.005, lambda: host.inject(NodeLoss(0, 0.005)))
    res = host.run()
    (skip,) = _events(res, "fault-skipped")
    assert skip.payload["reason"] == "no live node whose loss leaves a unit of each group up"
    assert not _events(res, "node-down") and res.stats.failures == 0
    # the schedule that lost records when a node took a ring's last units with it
    sim = Simulator(load("replica-chain"), spec, {}, kinds=FAULT_KINDS)
    assert sim.run_one(17).verdict.passed


def test_a_message_sent_to_a_dead_receiver_never_reaches_its_replacement() -> None:
    # split[0] hangs at once and is replaced; lines[0]'s sends are slowed meanwhile, so
    # batches sent while split[0] was down would arrive after its replacement started.
    # They went to the dead incarnation: falkirk, which replays the source's log to the
    # replacement, lost its tail when they got through (seed 11).
    _, res = _run("wordcount", "falkirk",
                  [(0.001026, Pause(0, 0.022524, "split[0]")),
                   (0.011026, Delay(0, 0.011437, 0.009857, "lines[0]"))], seed=11)
    assert _events(res, "failure-detected")[0].payload["instances"] == ["split[0]"]
    assert res.complete and _exactly_once("wordcount", res)
