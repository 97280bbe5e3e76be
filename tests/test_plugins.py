"""Protocols from outside ftctl: an installed distribution's ``ftctl.protocols`` entry
point, or ``-p package.module:SPEC``; every command reaches them through the registry."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.commands.compare_cmd import _params
from ftctl.config.errors import ConfigError
from protocols.mutants import mutants_of
from protocols.plugins import PluginError
from protocols.registry import PROTOCOLS, origin, registered, resolve
from tests.cli_fuzz import one_line
from tests.conftest import TOPOLOGIES
from tests.plugin_dist import FIXTURE, installed

runner = CliRunner()
FIXTURE_DIST = ("ftctl-fixture-proto", "0.3.1")


@pytest.fixture
def fixture_installed(tmp_path: Path) -> Iterator[None]:
    with installed(tmp_path / "site", FIXTURE, *FIXTURE_DIST,
                   {"fixture": "fixture_proto.spec:SPEC",
                    "broken": "fixture_proto.spec:NOT_A_SPEC"}):
        yield


@pytest.fixture
def diamond_only(tmp_path: Path) -> Path:
    top = tmp_path / "topologies"
    top.mkdir()
    shutil.copy(TOPOLOGIES / "diamond.yaml", top)
    return top


def test_an_entry_point_is_registered_under_its_name_with_its_distribution(
        fixture_installed: None) -> None:
    spec = registered("fixture")
    assert spec.name == "fixture" and spec.description == "the plug-in test fixture"
    assert origin("fixture") == "ftctl-fixture-proto 0.3.1"
    assert origin("checkpoint") == "built-in"
    assert list(PROTOCOLS)[-2:] == ["fixture", "broken"]  # after the built-ins
    assert [m.name for m in mutants_of("fixture")] == ["no-sink-dedup", "forgetful"]
    planted, _ = resolve("fixture/forgetful")
    assert planted.name == "fixture/forgetful" and planted.instance.__name__ == "Forgetful"


def test_listing_every_protocol_with_a_broken_entry_point_is_one_line(
        fixture_installed: None) -> None:
    res = runner.invoke(app, ["list", "protocols", "--json"])
    assert res.exit_code == 2, res.output
    one_line(res.output, "not a ProtocolSpec")


def test_sim_and_conformance_run_an_installed_protocol_and_catch_its_mutants(
        tmp_path: Path, diamond_only: Path) -> None:
    with installed(tmp_path / "site", FIXTURE, *FIXTURE_DIST,
                   {"fixture": "fixture_proto.spec:SPEC"}):
        listed = runner.invoke(app, ["list", "protocols", "--json"])
        rows = {r["name"]: r for r in json.loads(listed.output)}
        assert rows["fixture"]["from"] == "ftctl-fixture-proto 0.3.1"
        assert rows["causal"]["from"] == "built-in"
        sim = runner.invoke(app, ["sim", str(TOPOLOGIES / "diamond.yaml"), "-p", "fixture",
                                  "-n", "2", "--json"])
        assert sim.exit_code == 0, sim.output
        assert json.loads(sim.output)["protocol"] == "fixture"
        bug = runner.invoke(app, ["sim", str(TOPOLOGIES / "diamond.yaml"), "-p",
                                  "fixture/forgetful", "--seed", "1", "--json"])
        assert bug.exit_code == 1, bug.output  # the planted bug duplicates output
        kit = runner.invoke(app, ["conformance", "-p", "fixture", "-n", "2",
                                  "--topologies", str(diamond_only), "--json"])
        assert kit.exit_code == 0, kit.output
        report = json.loads(kit.output)
        caught = {m["mutant"]: m["caught"] for m in report["mutants"]}
        assert caught == {"fixture/no-sink-dedup": True, "fixture/forgetful": True}


def test_a_name_clashing_with_a_built_in_is_refused_in_one_line(tmp_path: Path) -> None:
    with installed(tmp_path / "site", FIXTURE, "evil", "1.0",
                   {"checkpoint": "fixture_proto.spec:SPEC"}):
        with pytest.raises(PluginError, match="clashes with the built-in protocol"):
            registered("causal")  # refused whatever is asked: which would run is unclear
        for args in (["sim", str(TOPOLOGIES / "diamond.yaml"), "-p", "checkpoint"],
                     ["conformance"], ["list", "protocols"]):
            res = runner.invoke(app, args)
            assert res.exit_code == 2, res.output
            one_line(res.output, "'checkpoint' of evil 1.0")


def test_a_broken_entry_point_is_refused_when_named_and_others_still_run(
        fixture_installed: None) -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "diamond.yaml"), "-p", "broken"])
    assert res.exit_code == 2, res.output
    one_line(res.output, "entry point 'broken' of ftctl-fixture-proto 0.3.1")
    assert registered("fixture").name == "fixture"


def test_an_import_path_runs_without_installing(monkeypatch: pytest.MonkeyPatch,
                                                diamond_only: Path) -> None:
    monkeypatch.chdir(FIXTURE)  # found in the working directory, as python -m would
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != FIXTURE])
    PROTOCOLS.rescan()
    ref = "fixture_proto.spec:SPEC"
    assert resolve(ref).spec.name == ref and origin(ref) == f"import path {ref}"
    assert resolve(f"{ref}/forgetful").spec.instance.__name__ == "Forgetful"
    kit = runner.invoke(app, ["conformance", "-p", ref, "-n", "1",
                              "--topologies", str(diamond_only), "--json"])
    assert kit.exit_code == 0, kit.output
    assert {m["mutant"] for m in json.loads(kit.output)["mutants"]} == {
        f"{ref}/no-sink-dedup", f"{ref}/forgetful"}
    for name in list(sys.modules):
        if name.startswith("fixture_proto"):
            del sys.modules[name]
    PROTOCOLS.rescan()


@pytest.mark.parametrize(("name", "says"), [
    ("no_such_pkg.spec:SPEC", "cannot import 'no_such_pkg.spec'"),
    ("protocols.lineage.spec:NOPE", "has no 'NOPE'"),
    ("protocols.lineage.spec:MUTANTS", "not a ProtocolSpec"),
    ("protocols.lineage.spec:", "an import path is package.module:ATTRIBUTE"),
])
def test_a_bad_import_path_is_one_line_and_exit_2(name: str, says: str) -> None:
    res = runner.invoke(app, ["sim", str(TOPOLOGIES / "diamond.yaml"), "-p", name])
    assert res.exit_code == 2, res.output
    one_line(res.output, says)


def test_a_gate_suite_can_name_an_installed_protocol(fixture_installed: None,
                                                     tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: plug\ncases:\n  - name: diamond-fixture\n"
                     f"    topology: {TOPOLOGIES / 'diamond.yaml'}\n"
                     "    protocol: fixture\n    schedules: 2\n")
    res = runner.invoke(app, ["gate", "--suite", str(suite), "--baseline",
                              str(tmp_path / "base.json"), "--json"])
    assert res.exit_code == 0, res.output
    suite.write_text(suite.read_text().replace("protocol: fixture", "protocol: fixture/nope"))
    res = runner.invoke(app, ["gate", "--suite", str(suite)])
    assert res.exit_code == 2, res.output
    one_line(res.output, "cases.diamond-fixture.protocol: unknown mutant 'fixture/nope'")


def test_compare_params_address_an_import_path_protocol() -> None:
    spec = registered("protocols.checkpoint.spec:SPEC")
    given = _params(["protocols.checkpoint.spec:SPEC.interval=0.5"], [spec])
    assert given == {"protocols.checkpoint.spec:SPEC": {"interval": "0.5"}}
    with pytest.raises(ConfigError, match="unknown parameter 'nope'"):
        _params(["protocols.checkpoint.spec:SPEC.nope=1"], [spec])
    with pytest.raises(ConfigError, match="for a compared protocol, got 'interval'"):
        _params(["interval=1"], [spec])
