"""The registry resolves every ``--protocol`` name: a registered protocol or ``protocol/mutant``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from protocols.mutants import get_mutant
from protocols.registry import PROTOCOLS, UnknownProtocol, get_protocol, registered, resolve
from tests.cli_fuzz import one_line
from tests.conftest import TOPOLOGIES

runner = CliRunner()


def test_a_registered_name_is_its_entry_with_no_planted_params() -> None:
    spec, params = resolve("checkpoint")
    assert spec is PROTOCOLS["checkpoint"] and params == {}
    assert get_protocol("checkpoint") is registered("checkpoint") is spec


def test_a_mutant_name_plants_its_classes_and_variant_params() -> None:
    # aligned-no-block lives in the aligned variant: its params travel with it
    spec, params = resolve("checkpoint/aligned-no-block")
    _, mutant = get_mutant("checkpoint/aligned-no-block")
    base = PROTOCOLS["checkpoint"]
    assert spec.name == "checkpoint/aligned-no-block"
    assert spec.instance is (mutant.instance or base.instance)
    assert spec.coordinator is (mutant.coordinator or base.coordinator)
    assert (spec.instance, spec.coordinator) != (base.instance, base.coordinator)
    assert params == dict(mutant.params) and params
    assert spec.params is base.params and spec.guarantee is base.guarantee


@pytest.mark.parametrize(("name", "says"), [
    ("nope", "unknown protocol 'nope' (known: none, checkpoint"),
    ("nope/commit-early", "unknown protocol 'nope'"),
    ("checkpoint/nope", "unknown mutant 'checkpoint/nope' (known for checkpoint: "),
    ("checkpoint/", "unknown mutant 'checkpoint/'"),
])
def test_an_unknown_name_raises_one_error_type_naming_it(name: str, says: str) -> None:
    with pytest.raises(UnknownProtocol) as exc:
        resolve(name)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    assert isinstance(exc.value, KeyError)  # callers catching KeyError keep working


def test_registered_refuses_a_mutant_name() -> None:
    with pytest.raises(UnknownProtocol, match="unknown protocol 'checkpoint/commit-early'"):
        registered("checkpoint/commit-early")


@pytest.mark.parametrize("args", [
    ["sim", str(TOPOLOGIES / "wordcount.yaml"), "-p", "checkpoint/nope"],
    ["run", str(TOPOLOGIES / "wordcount.yaml"), "-p", "nope/commit-early"],
    ["conformance", "-p", "checkpoint/commit-early"],
])
def test_the_cli_turns_an_unknown_name_into_one_line_and_exit_2(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    one_line(res.output, "--protocol")
