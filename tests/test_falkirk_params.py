"""falkirk's parameters: policy syntax, per-operator validation against a topology."""

from __future__ import annotations

import pytest

from ftctl.runtime.graph import ExecutionGraph
from protocols.contract.params import ParamError, validate
from protocols.contract.view import GraphView
from protocols.falkirk.params import FalkirkParams
from protocols.falkirk.policy import Kind, Policy, PolicyError
from tests.conftest import load


def graph(name: str) -> GraphView:
    return GraphView(ExecutionGraph(load(name)))


def test_policy_syntax_round_trips_and_schedules_checkpoints() -> None:
    assert [str(Policy.parse(s)) for s in ("ephemeral", "log", "batch", "lazy:3", "eager",
                                           "eager+log", "lazy:2+log")] == [
        "ephemeral", "log", "batch", "lazy:3", "eager", "eager+log", "lazy:2+log"]
    lazy = Policy.parse("lazy:4")
    assert [t for t in range(12) if lazy.checkpoints(t)] == [3, 7, 11]
    assert [t for t in range(12) if lazy.checkpoints(t, offset=1)] == [2, 6, 10]
    assert [t for t in range(3) if Policy.parse("eager").checkpoints(t)] == [0, 1, 2]
    assert not any(Policy.parse("batch").checkpoints(t) for t in range(8))
    assert Policy.parse("log").logs and not Policy.parse("ephemeral").logs
    assert Policy.parse("lazy:2+log").logs and Policy.parse("lazy:2+log").kind is Kind.LAZY
    for bad in ("lazy:0", "lazy", "log+log", "ephemeral+log", "eagr"):
        with pytest.raises(PolicyError):
            Policy.parse(bad)


def test_both_spellings_merge_and_conflicts_are_refused() -> None:
    p = validate(FalkirkParams, {"policy": "sharder=log, shard=lazy:2",
                                 "policies": {"out": "eager"}})
    assert p.policies == {"out": "eager", "sharder": "log", "shard": "lazy:2"}
    with pytest.raises(ParamError, match=r"one policy per operator \(sharder is given both"):
        validate(FalkirkParams, {"policy": "sharder=ephemeral", "policies": {"sharder": "log"}})
    with pytest.raises(ParamError, match=r"^policies.shard must be ephemeral, .*got 'lazy:x'$"):
        validate(FalkirkParams, {"policies": {"shard": "lazy:x"}})
    with pytest.raises(ParamError, match="a default_stateful of batch, lazy:K or eager"):
        validate(FalkirkParams, {"default_stateful": "log"})
    with pytest.raises(ParamError, match=r"^pause must be 'all', got 'region'$"):
        validate(FalkirkParams, {"pause": "region"})


def test_a_policy_an_operator_cannot_use_names_the_operator() -> None:
    g = graph("sharder")
    assert validate(FalkirkParams, {"policy": "sharder=log,shard=eager+log"}).check(g) == []
    assert validate(FalkirkParams, {"policy": "sharder=lazy:2"}).check(g) == [
        "policies.sharder: sharder is stateless; lazy:2 needs state (use ephemeral or log)"]
    assert validate(FalkirkParams, {"policy": "shard=log"}).check(g) == [
        "policies.shard: shard is stateful; log would lose its state "
        "(use batch, lazy:K, eager, optionally +log)"]
    assert validate(FalkirkParams, {"policy": "votes=log"}).check(g) == [
        "policies.votes: votes is a source; its policy is implicit"]
    (line,) = validate(FalkirkParams, {"policy": "shrd=eager"}).check(g)
    assert line.startswith("policies.shrd: no operator 'shrd' in the topology")


def test_each_operator_gets_its_policy() -> None:
    p = validate(FalkirkParams, {"policy": "sharder=log", "default_stateful": "eager"})
    assert str(p.policy_of("sharder", stateful=False)) == "log"
    assert str(p.policy_of("other", stateful=False)) == "ephemeral"
    assert str(p.policy_of("shard", stateful=True)) == "eager"
    assert p.policy_of("votes", stateful=False, kind="source").kind is Kind.SOURCE
    assert p.policy_of("out", stateful=False, kind="sink").kind is Kind.SINK


def test_every_variant_of_the_spec_fits_every_bundled_topology() -> None:
    from protocols.contract.params import validate as v
    from protocols.falkirk.spec import SPEC

    for variant in SPEC.variants:
        params = v(FalkirkParams, dict(variant.params))
        for name in ("wordcount", "diamond", "windowed", "sharder"):
            assert params.check(graph(name)) == [], (variant.name, name)
