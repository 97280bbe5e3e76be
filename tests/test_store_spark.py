"""``--store``: a run whose snapshots go to a store given as a URI, not the run directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ftctl.store import DirectoryStore

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


def test_snapshots_go_to_the_store_uri_and_the_run_passes(tmp_path: Path) -> None:
    store = tmp_path / "second-root"
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "run", str(ROOT / "topologies" / "wordcount.yaml"),
         "-p", "checkpoint", "--records", "20000", "--rate", "10000", "--json",
         "--store", store.as_uri(), "--results", str(results)],
        cwd=tmp_path, text=True, capture_output=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["passed"]
    run_dir = Path(summary["path"]) if Path(summary["path"]).is_absolute() \
        else tmp_path / summary["path"]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["store"] == f"{store.as_uri()}/{summary['run_id']}"
    written = DirectoryStore(store / summary["run_id"])  # its catalog, read back
    assert all(written.snapshots_of(i) for i in ("lines[0]", "out[0]"))
    assert not (run_dir / "snapshots").exists(), "nothing goes to the default location"
