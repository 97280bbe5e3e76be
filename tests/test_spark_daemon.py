"""``ftctl/spark/daemon.py`` preloads only what is safe to import before a fork."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ftctl.spark import daemon
from tests.conftest import ROOT

SPARK_LIB = Path(str(importlib.metadata.distribution("pyspark").locate_file("pyspark")),
                 "python", "lib")


def test_the_preload_imports_ftctl_but_no_library_that_starts_threads() -> None:
    code = ("import json, sys, threading\nfrom ftctl.spark.daemon import preload\n"
            "failed = preload()\n"
            "print(json.dumps({'failed': failed, 'threads': threading.active_count(),\n"
            "  'mods': [m for m in ('pyarrow', 'pandas', 'numpy', 'duckdb') if m in sys.modules],\n"
            "  'protocols': 'protocols.checkpoint.instance' in sys.modules,\n"
            "  'worker': 'pyspark.worker' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    doc = json.loads(out.stdout)
    assert doc == {"failed": [], "threads": 1, "mods": [], "protocols": True, "worker": True}


def test_spark_forks_its_workers_from_the_preloading_daemon() -> None:
    from ftctl.spark.session import spark_conf

    assert spark_conf("local[1]", "t")["spark.python.daemon.module"] == "ftctl.spark.daemon"


def test_spark_s_zipped_pyspark_gives_way_to_the_installed_one(tmp_path: Path) -> None:
    zips = sorted(str(p) for p in SPARK_LIB.glob("*.zip"))
    assert {Path(z).name.split("-")[0] for z in zips} == {"pyspark.zip", "py4j"}
    other = str(tmp_path / "plugin.zip")  # a shipped plug-in's zip stays
    path = [*zips, other, *sys.path]
    assert daemon.drop_zipped_copies(path) == zips
    assert path == [other, *sys.path]


def test_a_zip_is_kept_when_nothing_else_provides_what_it_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    zips = sorted(str(p) for p in SPARK_LIB.glob("*.zip"))
    monkeypatch.setattr(daemon, "ZIPPED", (*daemon.ZIPPED, "no_such_module_anywhere"))
    path = [*zips, *sys.path]
    assert daemon.drop_zipped_copies(path) == []
    assert path == [*zips, *sys.path]


def test_the_daemon_s_workers_import_pyspark_from_the_installed_package() -> None:
    """As Spark starts the daemon: its zips first on PYTHONPATH."""
    code = ("import ftctl.spark.daemon as d\nd.drop_zipped_copies(); d.preload()\n"
            "import pyspark.worker, py4j\nprint(pyspark.worker.__file__)\n"
            "print(py4j.__file__)")
    env = {"PYTHONPATH": ":".join([*(str(p) for p in sorted(SPARK_LIB.glob("*.zip"))),
                                   str(ROOT)]), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=env)
    files = out.stdout.split()
    assert len(files) == 2 and not any(".zip" in f for f in files), files
