"""``ftctl new protocol``: the package it writes installs through its entry point, holds
exactly-once on every bundled topology, and the kit catches each of its mutants."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from tests.cli_fuzz import one_line
from tests.plugin_dist import installed

runner = CliRunner()


def _new(name: str, where: Path) -> Path:
    res = runner.invoke(app, ["new", "protocol", name, "--dir", str(where)])
    assert res.exit_code == 0, res.output
    return where


def test_the_package_is_pip_installable_with_its_entry_point(tmp_path: Path) -> None:
    root = _new("my-proto", tmp_path / "my-proto")
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["name"] == "ftctl-my-proto"
    assert project["project"]["entry-points"]["ftctl.protocols"] == {
        "my-proto": "my_proto.spec:SPEC"}
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert (root / "my_proto" / "mutants.py").is_file()
    assert "NAME = \"my-proto\"" in (root / "tests" / "test_conformance.py").read_text()
    leftovers = [p for p in root.rglob("*") if p.is_file()
                 and ("skeleton" in p.read_text() or "skeleton" in str(p))]
    assert not leftovers


def test_right_after_installing_conformance_passes_and_catches_every_mutant(
        tmp_path: Path) -> None:
    root = _new("mine", tmp_path / "mine")
    entries = tomllib.loads((root / "pyproject.toml").read_text())[
        "project"]["entry-points"]["ftctl.protocols"]
    with installed(tmp_path / "site", root, "ftctl-mine", "0.1.0", entries):
        listed = runner.invoke(app, ["list", "protocols", "--json"])
        assert {r["name"]: r["from"] for r in json.loads(listed.output)}["mine"] == (
            "ftctl-mine 0.1.0")
        # N as the package's own tests/test_conformance.py runs it by default (the
        # documented ``-n 30`` runs in tests/test_writing_a_protocol.py, twice).
        res = runner.invoke(app, ["conformance", "-p", "mine", "-n", "10", "--json"])
        assert res.exit_code == 0, res.output
        report = json.loads(res.output)
    assert report["passed"] and not report["guarantees_broken"]
    stems = {c["topology"] for c in report["cases"]}
    assert {"wordcount", "diamond", "join-window", "sharder"} <= stems
    assert all(c["guarantee"] == "exactly-once" and c["passed"] for c in report["cases"])
    caught = {m["mutant"]: m["caught"] for m in report["mutants"]}
    assert len(caught) >= 3 and all(caught.values()), caught
    # Different bugs: the kit catches them with different violations.
    kinds = {frozenset(m["violations"]) for m in report["mutants"]}
    assert len(kinds) >= 2, report["mutants"]


@pytest.mark.parametrize(("name", "says"), [
    ("Mine", "not a protocol name"),
    ("my_proto", "not a protocol name"),
    ("checkpoint", "'checkpoint' is already a protocol"),
])
def test_a_bad_name_is_one_line_and_exit_2(tmp_path: Path, name: str, says: str) -> None:
    res = runner.invoke(app, ["new", "protocol", name, "--dir", str(tmp_path / "p")])
    assert res.exit_code == 2, res.output
    one_line(res.output, says)
    assert not (tmp_path / "p").exists()


def test_an_existing_directory_is_not_written_into(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "keep.txt").write_text("mine")
    res = runner.invoke(app, ["new", "protocol", "fresh", "--dir", str(tmp_path / "p")])
    assert res.exit_code == 2, res.output
    one_line(res.output, "--dir")
    assert [p.name for p in (tmp_path / "p").iterdir()] == ["keep.txt"]
