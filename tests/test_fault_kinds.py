"""The fault-kind registry (``ftctl.config.fault_kinds``): every realization it names
exists and realizes that kind, and both hosts, the planner and ``--faults`` read it."""

from __future__ import annotations

import inspect
import random
from dataclasses import replace

import pytest
from pydantic import Field

from chaos.faults import ChaosFault
from chaos.plan import AGENT_FAULTS, CLUSTER_FAULTS, check_delivery
from ftctl.config.errors import ConfigError
from ftctl.config.fault_kinds import FAULT_TYPES, SCENARIO_KINDS, FaultKind, _Strict, realization
from ftctl.config.scenario import CONTAINER_FAULTS, STORE_FAULTS, Scenario
from ftctl.sim import faults as sf
from ftctl.sim.actuator import Realize


@pytest.mark.parametrize("name", sorted(FAULT_TYPES))
def test_every_named_realization_exists_and_fits(name: str) -> None:
    kind = FAULT_TYPES[name]
    if kind.spark:
        cls = realization(kind.spark)
        assert issubclass(cls, ChaosFault) and cls.name == name
    if kind.sim:
        fn: Realize = realization(kind.sim)
        assert list(inspect.signature(fn).parameters) == ["act", "p", "rng", "duration"]
    if kind.draw:
        fault = sf.draw(name, random.Random(3), 100, 3)
        assert 1 <= fault.at_event <= 100
        assert type(fault).strike is not sf.SimFault.strike or callable(
            getattr(_host_class(), fault.actuator))


def _host_class() -> type:
    from ftctl.sim.host import SimHost
    return SimHost


def test_the_scenario_vocabulary_is_the_kinds_some_host_realizes() -> None:
    assert set(SCENARIO_KINDS) == {n for n, k in FAULT_TYPES.items()
                                   if k.sim or k.spark or k.engine}
    assert [n for n, k in FAULT_TYPES.items() if k.engine] == ["kill-driver"]
    assert "pair" not in SCENARIO_KINDS and "kill-task" in SCENARIO_KINDS
    with pytest.raises(ValueError, match="pair"):
        Scenario.model_validate({"name": "t", "faults": [
            {"type": "pair", "at": 1.0, "target": "random"}]})
    # the delivery needs come from the table
    assert STORE_FAULTS == ()  # every store kind has a Spark realization
    assert all(k.startswith("container-") for k in CONTAINER_FAULTS) and len(CONTAINER_FAULTS) == 4
    assert "kill-group" in CLUSTER_FAULTS and "kill-group" not in AGENT_FAULTS


def test_a_kind_spark_does_not_realize_is_refused_for_spark_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    check_delivery("s.yaml", "lose-unsynced", "count[0]", None, None)
    # every scenario kind has a Spark realization now: one without it, for the refusal
    monkeypatch.setitem(FAULT_TYPES, "lose-unsynced",
                        replace(FAULT_TYPES["lose-unsynced"], spark=None))
    with pytest.raises(ConfigError, match="simulation host only"):
        check_delivery("s.yaml", "lose-unsynced", "count[0]", None, None)
    check_delivery("s.yaml", "lose-unsynced", "count[0]", None, None, sim=True)


def test_faults_takes_the_registry_names_and_the_aliases() -> None:
    assert sf.parse_kinds("kill-task,crash,kill-worker,node,drop") == ("crash", "node", "drop")
    assert set(sf.KNOWN_KINDS) == {k.sim_name or n for n, k in FAULT_TYPES.items() if k.draw}
    with pytest.raises(ValueError, match="unknown fault kind 'kill'"):
        sf.parse_kinds("kill")


def test_a_kind_carries_numeric_params_a_duration_and_a_draw(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """What a new kind needs (a clock jump: an offset in seconds, a rate, a duration) is
    one entry: its params model, its flags and its realizations."""

    class JumpParams(_Strict):
        offset: float = Field(description="seconds")
        rate: float = Field(default=1.0, gt=0)

    monkeypatch.setitem(FAULT_TYPES, "clock-jump", FaultKind(
        "jump the target's clock", JumpParams, takes_duration=True,
        sim="ftctl.sim.actuator:pause", draw="ftctl.sim.faults:draw_pause"))
    assert FAULT_TYPES["clock-jump"].hosts == ("sim",)
    params = FAULT_TYPES["clock-jump"].params.model_validate({"offset": -2.5, "rate": 1.01})
    assert params.model_dump() == {"offset": -2.5, "rate": 1.01}
    assert isinstance(sf.draw("clock-jump", random.Random(1), 10), sf.Pause)


def test_a_kind_only_spark_realizes_is_refused_on_the_simulation_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAULT_TYPES, "kill-jvm", FaultKind(
        "SIGKILL a JVM", spark="chaos.faults:KillExecutor"))
    with pytest.raises(ConfigError, match="kill-jvm has no meaning on the simulation host"):
        check_delivery("s.yaml", "kill-jvm", "count[0]", None, None, sim=True)
    check_delivery("s.yaml", "kill-jvm", "count[0]", None, None)


def test_list_faults_says_where_each_kind_runs() -> None:
    """``ftctl list faults --json``: the hosts (or the engine) that realize each kind in
    scenario files, and whether ``ftctl sim --faults`` draws it."""
    import json

    from typer.testing import CliRunner

    from ftctl.cli import app

    res = CliRunner().invoke(app, ["list", "faults", "--json"])
    assert res.exit_code == 0, res.output
    hosts = {row["type"]: row["hosts"] for row in json.loads(res.output)}
    assert hosts["kill-driver"] == ["engine"]
    assert hosts["clock-skew"] == ["sim", "spark", "sim --faults"]
    assert hosts["corrupt"] == ["sim", "spark", "sim --faults"]
    assert hosts["lose-unsynced"] == ["sim", "spark", "sim --faults"]
    assert hosts["pair"] == ["sim --faults"]
