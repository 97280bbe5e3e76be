"""``ftctl/spark/daemon.py`` preloads only what is safe to import before a fork."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_the_preload_imports_ftctl_but_no_library_that_starts_threads() -> None:
    code = ("import json, sys, threading\nfrom ftctl.spark.daemon import preload\n"
            "failed = preload()\n"
            "print(json.dumps({'failed': failed, 'threads': threading.active_count(),\n"
            "  'mods': [m for m in ('pyarrow', 'pandas', 'numpy', 'duckdb') if m in sys.modules],\n"
            "  'protocols': 'protocols.checkpoint.instance' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    doc = json.loads(out.stdout)
    assert doc == {"failed": [], "threads": 1, "mods": [], "protocols": True}


def test_spark_forks_its_workers_from_the_preloading_daemon() -> None:
    from ftctl.spark.session import spark_conf

    assert spark_conf("local[1]", "t")["spark.python.daemon.module"] == "ftctl.spark.daemon"
