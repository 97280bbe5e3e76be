"""Plug-in protocols reach Spark executors: the driver zips each one's top-level package,
names them in the executors' environment, and checks on an executor that they resolve.
Without a cluster: a fake SparkContext whose one task runs in a fresh Python process that
has neither the plug-in's distribution nor its source, only what was shipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ftctl.cluster.errors import InfraError
from ftctl.spark import plugins
from protocols.plugins import SHIPPED_ENV
from protocols.registry import PROTOCOLS, registered
from tests.conftest import ROOT
from tests.plugin_dist import FIXTURE, installed


class FakeContext:
    """``addPyFile`` and a one-task ``parallelize().map().collect()``, the task run in a
    new interpreter the way an executor would: ftctl importable, plus the shipped zips."""

    def __init__(self, env: dict[str, str], drop_files: bool = False):
        self.env = env
        self.files: list[str] = []
        self.drop_files = drop_files  # an executor that never got the files

    def addPyFile(self, path: str) -> None:  # pyspark's name
        self.files.append(path)

    def parallelize(self, data: list[Any], slices: int) -> FakeContext:
        self.data = data
        return self

    def map(self, fn: Callable[[Any], Any]) -> FakeContext:
        assert fn is plugins.resolve_here
        return self

    def collect(self) -> list[Any]:
        shipped = [] if self.drop_files else self.files
        env = {**os.environ, **self.env,
               "PYTHONPATH": os.pathsep.join([str(ROOT), *shipped])}
        code = ("import json, sys\nfrom ftctl.spark.plugins import resolve_here\n"
                "print(json.dumps(resolve_here(json.loads(sys.argv[1]))))")
        out = subprocess.run([sys.executable, "-c", code, json.dumps(self.data[0])],
                             capture_output=True, text=True, env=env, cwd="/", check=True)
        return [json.loads(out.stdout)]


def _executor_env(conf: dict[str, str]) -> dict[str, str]:
    prefix = "spark.executorEnv."
    return {k.removeprefix(prefix): v for k, v in conf.items() if k.startswith(prefix)}


def test_used_plugins_are_shipped_and_resolve_on_an_executor_without_them(
        tmp_path: Path) -> None:
    with installed(tmp_path / "site", FIXTURE, "ftctl-fixture-proto", "0.3.1",
                   {"fixture": "fixture_proto.spec:SPEC"}):
        registered("fixture")
        registered("fixture_proto.spec:SPEC")
        used = plugins.used()
        assert used == {"fixture": "fixture_proto.spec:SPEC",
                        "fixture_proto.spec:SPEC": "fixture_proto.spec:SPEC"}
        conf = plugins.executor_conf(used)
        assert _executor_env(conf) == {
            SHIPPED_ENV: "fixture=fixture_proto.spec:SPEC;"
                         "fixture_proto.spec:SPEC=fixture_proto.spec:SPEC"}
        sc = FakeContext(_executor_env(conf))
        plugins.ship(sc, used, tmp_path / "logs")
    assert [Path(f).name for f in sc.files] == ["fixture_proto.zip"]  # one package, once
    assert Path(sc.files[0]).parent == tmp_path / "logs" / "plugins"


def test_a_plugin_the_executor_cannot_import_is_one_line(tmp_path: Path) -> None:
    with installed(tmp_path / "site", FIXTURE, "ftctl-fixture-proto", "0.3.1",
                   {"fixture": "fixture_proto.spec:SPEC"}):
        registered("fixture")
        used = plugins.used()
        sc = FakeContext(_executor_env(plugins.executor_conf(used)), drop_files=True)
        with pytest.raises(InfraError) as exc:
            plugins.ship(sc, used, tmp_path)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith("on a Spark executor, cannot load protocol 'fixture' "
                              "(fixture_proto.spec:SPEC, shipped by the driver)")
    assert "No module named 'fixture_proto'" in message


def test_nothing_is_shipped_without_plugins(tmp_path: Path) -> None:
    PROTOCOLS.rescan()
    registered("checkpoint")
    assert plugins.used() == {} and plugins.executor_conf({}) == {}
    sc = FakeContext({})
    plugins.ship(sc, {}, tmp_path)
    assert sc.files == [] and not list(tmp_path.iterdir())


def test_a_shipped_name_resolves_from_the_environment_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SHIPPED_ENV, "fixture=fixture_proto.spec:SPEC")
    monkeypatch.syspath_prepend(str(FIXTURE))
    PROTOCOLS.rescan()
    try:
        assert registered("fixture").name == "fixture"
        assert str(PROTOCOLS.origin("fixture")) == (
            "shipped by the driver (fixture_proto.spec:SPEC)")
    finally:
        for name in [m for m in sys.modules if m.startswith("fixture_proto")]:
            del sys.modules[name]
        monkeypatch.delenv(SHIPPED_ENV)
        PROTOCOLS.rescan()
